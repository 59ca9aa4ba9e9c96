// oneinfer exec: run a model on serialized TensorProto inputs, as ONNX test data sets store them.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "graph/onnx_loader.h"
#include "oneinfer/session.h"
#include "tools/cli.h"
#include "tools/env_options.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;

namespace {
constexpr const char* kHelp =
    "usage: oneinfer exec MODEL.onnx --input-dir D --output-dir O [--threads N] [--matmul float|int8]\n"
    "\n"
    "Reads D/input_0.pb, D/input_1.pb, ... (serialized TensorProto; the name field picks the\n"
    "graph input, an empty name means the input at that position), runs the model, and writes\n"
    "O/output_<i>.pb in graph output order with each name set.\n";
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
  std::string matmul;
  args.Take("--matmul", &matmul);
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("exec needs exactly one MODEL.onnx (see oneinfer exec --help)");
  if (input_dir.empty() || output_dir.empty()) return Fail("exec needs --input-dir and --output-dir");
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
  const auto& inputs = (*session)->inputs();

  std::vector<Feed> feeds;
  for (size_t i = 0;; ++i) {
    const fs::path p = fs::path(input_dir) / absl::StrCat("input_", i, ".pb");
    if (!fs::exists(p)) break;
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    onnx::TensorProto tp;
    if (!tp.ParseFromString(ss.str())) return Fail(absl::StrCat(p.string(), " is not a serialized TensorProto"));
    auto t = TensorFromProto(tp, nullptr);
    if (!t.ok()) return Fail(absl::StrCat(p.string(), ": ", t.status().message()));
    std::string name = tp.name();
    if (name.empty()) {
      if (i >= inputs.size()) return Fail(absl::StrCat(p.string(), " has no name and the model has only ", inputs.size(), " inputs"));
      name = inputs[i].name;
    }
    feeds.emplace_back(name, *t);
  }
  auto outputs = (*session)->Run(feeds);
  if (!outputs.ok()) return Fail(outputs.status());
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) return Fail(absl::StrCat("cannot create output folder '", output_dir, "': ", ec.message()));
  const auto& infos = (*session)->outputs();
  for (size_t i = 0; i < outputs->size(); ++i) {
    onnx::TensorProto tp;
    auto s = TensorToProto((*outputs)[i], infos[i].name, &tp);
    if (!s.ok()) return Fail(s);
    const fs::path p = fs::path(output_dir) / absl::StrCat("output_", i, ".pb");
    std::ofstream f(p, std::ios::binary);
    if (!f || !tp.SerializeToOstream(&f)) return Fail(absl::StrCat("cannot write ", p.string()));
    std::cout << p.string() << ": " << infos[i].name << " " << DTypeName((*outputs)[i].dtype())
              << ShapeToString((*outputs)[i].shape()) << "\n";
  }
  return 0;
}

}  // namespace oneinfer::cli
