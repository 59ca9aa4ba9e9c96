// oneinfer bench: load a model once and time its runs, as onnxruntime_perf_test does.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/checked_math.h"
#include "base/half.h"
#include "engine/allocator.h"
#include "engine/session_impl.h"
#include "oneinfer/session.h"
#include "tools/cli.h"
#include "tools/env_options.h"
#include "tools/input_files.h"

namespace oneinfer::cli {

using json = nlohmann::json;

namespace {
constexpr const char* kHelp =
    "usage: oneinfer bench MODEL.onnx [--input-dir D] [--dim NAME=VALUE ...] [--runs N] [--warmup W]\n"
    "                      [--threads T] [--matmul float|int8] [--json]\n"
    "\n"
    "Loads the model once, then times its runs on the same inputs.\n"
    "\n"
    "  --input-dir D      read D/input_<i>.pb as `oneinfer exec` does; without it, each input is\n"
    "                     made of its declared type and shape: floats uniform in [-1, 1), integers\n"
    "                     in 0..9 (index-like inputs stay valid), bools random (fixed seed).\n"
    "                     Inputs with an initializer behind them keep it.\n"
    "  --dim NAME=VALUE   the size of a symbolic dimension of the inputs (repeatable); a symbolic\n"
    "                     dimension without one is 1\n"
    "  --runs N           timed runs (default 10)\n"
    "  --warmup W         runs before the timed ones (default 1, as onnxruntime_perf_test); the\n"
    "                     first run is timed on its own and counts as the first warm-up run.\n"
    "                     With --warmup 0 the first run is also the first timed run.\n"
    "  --threads T        threads for the kernels (default: all cores)\n"
    "  --matmul float|int8  constant-weight MatMuls in float32 (default) or dynamic A8W8\n"
    "  --json             one JSON object: model, threads, matmul, inputs, load_ms, first_run_ms,\n"
    "                     runs_ms, min_ms, median_ms, p90_ms, max_ms, peak_rss_mb\n"
    "\n"
    "Prints the load time, the first run, min / median / p90 / max over the timed runs, and the\n"
    "process's peak resident memory (VmHWM). Ctrl-C stops a run (exit 130).\n";

bool ParseInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtoll(s.c_str(), &end, 10);
  return *end == '\0' && errno == 0;
}

// VmHWM of /proc/self/status in MiB; -1 where the file or the line is missing.
double PeakRssMb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream is(line.substr(6));
    double kb = -1;
    if (is >> kb) return kb / 1024.0;
  }
  return -1;
}

// A tensor of `dtype` and `shape` with bench's random values (see --input-dir in kHelp).
Tensor RandomTensor(DType dtype, const Shape& shape, std::mt19937_64* rng) {
  Tensor t = Tensor::Empty(dtype, shape);
  const int64_t n = t.num_elements();
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int> small(0, 9);
  auto fill = [&](auto* p, auto make) {
    for (int64_t i = 0; i < n; ++i) p[i] = make();
  };
  switch (dtype) {
    case DType::kFloat32: fill(t.data<float>(), [&] { return real(*rng); }); break;
    case DType::kFloat64: fill(t.data<double>(), [&] { return static_cast<double>(real(*rng)); }); break;
    case DType::kFloat16: fill(t.data<uint16_t>(), [&] { return F32ToF16(real(*rng)); }); break;
    case DType::kBFloat16: fill(t.data<uint16_t>(), [&] { return F32ToBf16(real(*rng)); }); break;
    case DType::kBool: fill(t.data<bool>(), [&] { return small(*rng) % 2 == 1; }); break;
    case DType::kInt8: fill(t.data<int8_t>(), [&] { return static_cast<int8_t>(small(*rng)); }); break;
    case DType::kUInt8: fill(t.data<uint8_t>(), [&] { return static_cast<uint8_t>(small(*rng)); }); break;
    case DType::kInt16: fill(t.data<int16_t>(), [&] { return static_cast<int16_t>(small(*rng)); }); break;
    case DType::kUInt16: fill(t.data<uint16_t>(), [&] { return static_cast<uint16_t>(small(*rng)); }); break;
    case DType::kInt32: fill(t.data<int32_t>(), [&] { return static_cast<int32_t>(small(*rng)); }); break;
    case DType::kUInt32: fill(t.data<uint32_t>(), [&] { return static_cast<uint32_t>(small(*rng)); }); break;
    case DType::kInt64: fill(t.data<int64_t>(), [&] { return static_cast<int64_t>(small(*rng)); }); break;
    case DType::kUInt64: fill(t.data<uint64_t>(), [&] { return static_cast<uint64_t>(small(*rng)); }); break;
    case DType::kInt4:
    case DType::kUInt4: {
      // Two values per byte; 0..7 fits both the signed and the unsigned 4-bit range.
      uint8_t* p = t.data<uint8_t>();
      for (size_t i = 0; i < t.byte_size(); ++i) p[i] = static_cast<uint8_t>((small(*rng) % 8) | ((small(*rng) % 8) << 4));
      break;
    }
    default: break;  // strings and undefined are refused before this
  }
  return t;
}

struct InputReport {
  std::string name, dtype, shape, source;
};

// Inputs of the declared types and shapes, symbolic dims from `dims` (else 1). Every --dim must
// name a symbolic dimension of some input, so a misspelt name is an error, not a silent 1.
absl::StatusOr<std::vector<std::pair<std::string, Value>>> MakeInputs(const Session& session,
                                                                      const std::map<std::string, int64_t>& dims,
                                                                      std::vector<InputReport>* report) {
  std::mt19937_64 rng(0x6f6e65696e666572ULL);  // fixed: repeated benches time the same inputs
  std::vector<std::pair<std::string, Value>> feeds;
  std::set<std::string> symbols;
  for (const IOInfo& in : session.inputs()) {
    for (const std::string& p : in.dim_params) if (!p.empty()) symbols.insert(p);
  }
  for (const auto& [name, value] : dims) {
    if (!symbols.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dim ", name, ": the model's inputs have no symbolic dimension of that name",
          symbols.empty() ? std::string(" (they have none)") : absl::StrCat(" (they have: ", absl::StrJoin(symbols, ", "), ")")));
    }
  }
  for (const IOInfo& in : session.inputs()) {
    if (in.has_default) continue;  // its initializer is the value, as in ONNX Runtime
    if (!in.is_tensor) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' is a sequence or optional: give its value with --input-dir"));
    }
    if (in.dtype == DType::kString || in.dtype == DType::kUndefined) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' is of type ", DTypeName(in.dtype),
                                                     ", which bench does not make up: give its value with --input-dir"));
    }
    if (!in.has_shape) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' has no declared rank: give its value with --input-dir"));
    }
    Shape shape = in.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] >= 0) continue;
      const std::string param = d < in.dim_params.size() ? in.dim_params[d] : "";
      auto it = dims.find(param);
      shape[d] = !param.empty() && it != dims.end() ? it->second : 1;
    }
    const std::string what = absl::StrCat("input '", in.name, "'");
    auto bytes = CheckedByteSize(in.dtype, shape, what);
    if (!bytes.ok()) return bytes.status();
    if (static_cast<uint64_t>(*bytes) > PhysicalMemoryBytes()) {
      return absl::ResourceExhaustedError(absl::StrCat(what, " of shape ", ShapeToString(shape), " would take ", *bytes,
                                                       " bytes, more than this machine's memory (check the --dim values)"));
    }
    report->push_back({in.name, DTypeName(in.dtype), ShapeToString(shape), "random"});
    feeds.emplace_back(in.name, Value::FromTensor(RandomTensor(in.dtype, shape, &rng)));
  }
  return feeds;
}

std::string DescribeValue(const Value& v) {
  if (v.is_none()) return "optional (empty)";
  if (v.is_tensor()) return ShapeToString(v.tensor.shape());
  return absl::StrCat("sequence of ", v.sequence.size());
}

double Ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int CmdBench(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp << EnvironmentHelp();
    return 0;
  }
  std::string input_dir, runs_s, warmup_s, threads_s, matmul, dim_s;
  // An empty value (--runs=, --input-dir=) is an error, not the default.
  const bool has_input_dir = args.Take("--input-dir", &input_dir);
  const bool has_runs = args.Take("--runs", &runs_s);
  const bool has_warmup = args.Take("--warmup", &warmup_s);
  const bool has_threads = args.Take("--threads", &threads_s);
  args.Take("--matmul", &matmul);
  std::map<std::string, int64_t> dims;
  while (args.Take("--dim", &dim_s)) {
    const size_t eq = dim_s.find('=');
    int64_t v = 0;
    if (eq == std::string::npos || eq == 0 || !ParseInt(dim_s.substr(eq + 1), &v) || v < 1) {
      return Fail(absl::StrCat("--dim '", dim_s, "' must be NAME=VALUE with VALUE a positive integer"));
    }
    const std::string name = dim_s.substr(0, eq);
    if (dims.count(name) && dims[name] != v) return Fail(absl::StrCat("--dim ", name, " is given twice with different values"));
    dims[name] = v;
  }
  const bool as_json = args.TakeFlag("--json");
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("bench needs exactly one MODEL.onnx (see oneinfer bench --help)");
  if (has_input_dir && !dims.empty()) return Fail("--dim sizes the inputs bench makes; with --input-dir the files give the shapes");

  int64_t runs = 10, warmup = 1, v = 0;
  if (has_runs) {
    if (!ParseInt(runs_s, &v) || v < 1 || v > 100000000) return Fail(absl::StrCat("--runs '", runs_s, "' must be a count of at least 1"));
    runs = v;
  }
  if (has_warmup) {
    if (!ParseInt(warmup_s, &v) || v < 0 || v > 100000000) return Fail(absl::StrCat("--warmup '", warmup_s, "' must be a count (0 or more)"));
    warmup = v;
  }
  SessionOptions opts;
  if (auto s = ParseMatMulFlag(matmul, &opts.matmul); !s.ok()) return Fail(s);
  if (auto s = ApplySessionEnvironment(&opts); !s.ok()) return Fail(s);
  if (has_threads) {
    if (!ParseInt(threads_s, &v) || v < 1 || v > 4096) return Fail(absl::StrCat("--threads '", threads_s, "' is not a count"));
    opts.num_threads = static_cast<int>(v);
  }
  // The thread count the session uses (engine/session.cc: 0 = the machine's cores).
  const int threads = opts.num_threads > 0 ? opts.num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (has_input_dir && !std::filesystem::is_directory(input_dir)) return Fail(absl::StrCat("input folder '", input_dir, "' does not exist"));
  RunOptions run;
  if (auto s = StopRunOnTimeoutOrInterrupt("", &run); !s.ok()) return Fail(s);

  const auto load_start = std::chrono::steady_clock::now();
  auto session = Session::Load(pos[0], opts);
  if (!session.ok()) return Fail(session.status());
  const double load_ms = Ms(load_start);

  std::vector<InputReport> report;
  absl::StatusOr<std::vector<std::pair<std::string, Value>>> feeds;
  if (!has_input_dir) {
    feeds = MakeInputs(**session, dims, &report);
  } else {
    feeds = ReadInputFolder(input_dir, **session);
    if (feeds.ok()) {
      for (size_t i = 0; i < feeds->size(); ++i) {
        const Value& val = (*feeds)[i].second;
        report.push_back({(*feeds)[i].first, val.is_tensor() ? DTypeName(val.tensor.dtype()) : "", DescribeValue(val),
                          absl::StrCat("input_", i, ".pb")});
      }
    }
  }
  if (!feeds.ok()) return Fail(feeds.status());

  const SessionImpl& impl = (*session)->impl();
  // The clock stops before the outputs are freed; each run then allocates afresh, as a caller's loop would.
  auto timed_run = [&](double* ms) -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    auto out = impl.RunValues(*feeds, &run);
    *ms = Ms(start);
    return out.status();
  };
  double first_run_ms = 0;
  if (auto s = timed_run(&first_run_ms); !s.ok()) return FailRun(s, "");
  std::vector<double> runs_ms;
  if (warmup == 0) runs_ms.push_back(first_run_ms);  // the first run is then the first timed one
  for (int64_t i = 1; i < warmup; ++i) {
    double ms = 0;
    if (auto s = timed_run(&ms); !s.ok()) return FailRun(s, "");
  }
  while (static_cast<int64_t>(runs_ms.size()) < runs) {
    double ms = 0;
    if (auto s = timed_run(&ms); !s.ok()) return FailRun(s, "");
    runs_ms.push_back(ms);
  }

  std::vector<double> sorted = runs_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  // Nearest rank: the smallest run that at least 90% of the runs do not exceed.
  const double p90 = sorted[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1];
  const double peak_rss_mb = PeakRssMb();
  const std::string matmul_name = opts.matmul == MatMulPrecision::kInt8 ? "int8" : "float";

  if (as_json) {
    json inputs = json::array();
    for (const InputReport& r : report) inputs.push_back({{"name", r.name}, {"dtype", r.dtype}, {"shape", r.shape}, {"source", r.source}});
    json j = {{"model", pos[0]}, {"threads", threads}, {"matmul", matmul_name}, {"inputs", inputs},
              {"load_ms", load_ms}, {"first_run_ms", first_run_ms}, {"warmup", warmup}, {"runs_ms", runs_ms},
              {"min_ms", sorted.front()}, {"median_ms", median}, {"p90_ms", p90}, {"max_ms", sorted.back()},
              {"peak_rss_mb", peak_rss_mb < 0 ? json(nullptr) : json(peak_rss_mb)}};
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";  // names need not be UTF-8
    return 0;
  }
  std::cout << "model " << pos[0] << " (threads " << threads << ", matmul " << matmul_name << ")\n";
  for (const InputReport& r : report) {
    std::cout << "input '" << r.name << "': " << r.dtype << (r.dtype.empty() ? "" : " ") << r.shape << " (" << r.source << ")\n";
  }
  // Four significant digits: enough to compare runs, not the timer's noise.
  auto ms = [](double v) { return absl::StrFormat("%.4g ms", v); };
  std::cout << "load " << ms(load_ms) << "\n"
            << "first run " << ms(first_run_ms) << "\n"
            << runs << " runs after " << warmup << " warm-up: min " << ms(sorted.front()) << ", median " << ms(median)
            << ", p90 " << ms(p90) << ", max " << ms(sorted.back()) << "\n";
  if (peak_rss_mb < 0) std::cout << "peak RSS unknown (no VmHWM in /proc/self/status)\n";
  else std::cout << absl::StrFormat("peak RSS %.1f MB\n", peak_rss_mb);
  return 0;
}

}  // namespace oneinfer::cli
