// oneinfer exec: run a model on serialized TensorProto inputs, as ONNX test data sets store them.
#include <filesystem>
#include <fstream>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "graph/onnx_loader.h"
#include "engine/session_impl.h"
#include "oneinfer/session.h"
#include "tools/cli.h"
#include "tools/env_options.h"
#include "tools/input_files.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;

namespace {
constexpr const char* kHelp =
    "usage: oneinfer exec MODEL.onnx --input-dir D --output-dir O [--threads N] [--matmul float|int8]\n"
    "                     [--timeout SECONDS]\n"
    "\n"
    "Reads D/input_0.pb, D/input_1.pb, ... (serialized TensorProto, or SequenceProto /\n"
    "OptionalProto for an input declared a sequence / optional; the name field picks the graph\n"
    "input, an empty name means the input at that position), runs the model, and writes\n"
    "O/output_<i>.pb in graph output order with each name set, in the same formats.\n"
    "\n"
    "  --timeout SECONDS  stop past this time from the start (exit 1); Ctrl-C stops the run too\n"
    "                     (exit 130; a second Ctrl-C ends the process at once)\n";

// Serializes an output in the format of its value: SequenceProto, OptionalProto or TensorProto.
absl::StatusOr<std::string> SerializeOutput(const Value& v, const ValueInfo& info) {
  std::string bytes;
  if (info.type.kind == TypeInfo::Kind::kOptional || v.is_none()) {
    onnx::OptionalProto op;
    if (auto s = ValueToOptionalProto(v, info.name, &op); !s.ok()) return s;
    op.SerializeToString(&bytes);
  } else if (v.is_sequence()) {
    onnx::SequenceProto sp;
    if (auto s = ValueToSequenceProto(v, info.name, &sp); !s.ok()) return s;
    sp.SerializeToString(&bytes);
  } else {
    onnx::TensorProto tp;
    if (auto s = TensorToProto(v.tensor, info.name, &tp); !s.ok()) return s;
    tp.SerializeToString(&bytes);
  }
  return bytes;
}

std::string Describe(const Value& v) {
  if (v.is_none()) return "optional (empty)";
  if (v.is_tensor()) return absl::StrCat(DTypeName(v.tensor.dtype()), ShapeToString(v.tensor.shape()));
  std::string items;
  for (const Tensor& t : v.sequence) absl::StrAppend(&items, items.empty() ? "" : ", ", DTypeName(t.dtype()), ShapeToString(t.shape()));
  return absl::StrCat("sequence of ", v.sequence.size(), " [", items, "]");
}
}  // namespace

int CmdExec(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp << EnvironmentHelp();
    return 0;
  }
  std::string input_dir, output_dir, threads;
  args.Take("--input-dir", &input_dir);
  args.Take("--output-dir", &output_dir);
  args.Take("--threads", &threads);
  std::string matmul, timeout;
  args.Take("--matmul", &matmul);
  args.Take("--timeout", &timeout);
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("exec needs exactly one MODEL.onnx (see oneinfer exec --help)");
  if (input_dir.empty() || output_dir.empty()) return Fail("exec needs --input-dir and --output-dir");
  // The timeout counts from here (loading included); the run checks it between nodes and loop
  // iterations. A Ctrl-C while loading stops the run when it starts; a second one ends at once.
  RunOptions run;
  if (auto s = StopRunOnTimeoutOrInterrupt(timeout, &run); !s.ok()) return Fail(s);
  SessionOptions opts;
  if (auto s = ParseMatMulFlag(matmul, &opts.matmul); !s.ok()) return Fail(s);
  if (auto s = ApplySessionEnvironment(&opts); !s.ok()) return Fail(s);
  if (!threads.empty()) {
    try {
      opts.num_threads = std::stoi(threads);
    } catch (...) {
      return Fail(absl::StrCat("--threads '", threads, "' is not a number"));
    }
  }
  if (!fs::is_directory(input_dir)) return Fail(absl::StrCat("input folder '", input_dir, "' does not exist"));

  auto session = Session::Load(pos[0], opts);
  if (!session.ok()) return Fail(session.status());
  const SessionImpl& impl = (*session)->impl();
  const Graph& graph = impl.graph();
  auto feeds = ReadInputFolder(input_dir, **session);
  if (!feeds.ok()) return Fail(feeds.status());
  auto outputs = impl.RunValues(*feeds, &run);
  if (!outputs.ok()) return FailRun(outputs.status(), timeout);
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) return Fail(absl::StrCat("cannot create output folder '", output_dir, "': ", ec.message()));
  for (size_t i = 0; i < outputs->size(); ++i) {
    const ValueInfo& info = graph.outputs[i];
    auto bytes = SerializeOutput((*outputs)[i], info);
    if (!bytes.ok()) return Fail(bytes.status());
    const fs::path p = fs::path(output_dir) / absl::StrCat("output_", i, ".pb");
    std::ofstream f(p, std::ios::binary);
    if (!f || !f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()))) return Fail(absl::StrCat("cannot write ", p.string()));
    std::cout << p.string() << ": " << info.name << " " << Describe((*outputs)[i]) << "\n";
  }
  return 0;
}

}  // namespace oneinfer::cli
