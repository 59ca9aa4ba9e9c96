// ONNX backend conformance over Debian's libonnx-testdata: one gtest case per test folder.
//
// Outputs are compared as ONNX's backend runner does (rtol 1e-3, atol 1e-7; exact for
// integers, bool and strings). A model using an operator we do not support is skipped with
// the operator named. expected_failures.txt lists the cases known to fail, one reason each:
// such a case is reported as skipped while it fails, and fails when it starts passing, so a
// regression and a fix both show up.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <Eigen/Core>
#include <onnx/onnx_pb.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/session_impl.h"
#include "graph/onnx_loader.h"

namespace fs = std::filesystem;
using namespace oneinfer;

namespace {

struct Tally {
  std::mutex mu;
  int passed = 0, failed = 0, unsupported = 0, expected = 0;
  std::map<std::string, int> missing_ops;
  std::vector<std::string> failures;  // "suite/name<TAB>first line of the error"
};
Tally g_tally;
std::map<std::string, std::string> g_expected;  // "suite/name" -> reason
std::atomic<int64_t> g_test_started_ms{0};
std::string g_current_test;

absl::StatusOr<std::string> ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", p.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Parses a .pb according to the declared type of the value it feeds or checks.
absl::StatusOr<Value> ReadValue(const fs::path& p, const TypeInfo& type) {
  auto bytes = ReadFile(p);
  if (!bytes.ok()) return bytes.status();
  auto v = ParseValue(*bytes, type);
  if (!v.ok()) return absl::Status(v.status().code(), absl::StrCat(p.string(), ": ", v.status().message()));
  // ONNX 1.12's data sets store bfloat16 values as their uint16 bit patterns.
  if (v->is_tensor() && v->tensor.dtype() == DType::kUInt16 && type.kind == TypeInfo::Kind::kTensor &&
      type.elem == DType::kBFloat16) {
    Tensor t = v->tensor;
    return Value::FromTensor(Tensor::Wrap(DType::kBFloat16, t.shape(), t.holder(), t.raw_data()));
  }
  return v;
}

template <typename T>
double AsDouble(const T& v) {
  return static_cast<double>(static_cast<float>(v));
}
template <>
double AsDouble<double>(const double& v) {
  return v;
}

// Empty string when equal, else a description of the first mismatch.
std::string CompareTensors(const Tensor& expected, const Tensor& actual) {
  if (expected.dtype() != actual.dtype()) {
    return absl::StrCat("dtype ", DTypeName(actual.dtype()), " != expected ", DTypeName(expected.dtype()));
  }
  if (expected.shape() != actual.shape()) {
    return absl::StrCat("shape ", ShapeToString(actual.shape()), " != expected ", ShapeToString(expected.shape()));
  }
  const int64_t n = expected.num_elements();
  std::string diff;
  int64_t bad = 0;
  auto note = [&](int64_t i, const std::string& e, const std::string& a) {
    if (bad++ == 0) diff = absl::StrCat("element ", i, ": got ", a, ", expected ", e);
  };
  switch (expected.dtype()) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16: {
      for (int64_t i = 0; i < n; ++i) {
        double e = 0, a = 0;
        if (expected.dtype() == DType::kFloat32) { e = expected.data<float>()[i]; a = actual.data<float>()[i]; }
        else if (expected.dtype() == DType::kFloat64) { e = expected.data<double>()[i]; a = actual.data<double>()[i]; }
        else if (expected.dtype() == DType::kFloat16) { e = AsDouble(expected.data<Eigen::half>()[i]); a = AsDouble(actual.data<Eigen::half>()[i]); }
        else { e = AsDouble(expected.data<Eigen::bfloat16>()[i]); a = AsDouble(actual.data<Eigen::bfloat16>()[i]); }
        if (std::isnan(e) && std::isnan(a)) continue;
        if (std::isinf(e) || std::isinf(a)) {
          if (e != a) note(i, std::to_string(e), std::to_string(a));
          continue;
        }
        if (!(std::fabs(a - e) <= 1e-7 + 1e-3 * std::fabs(e))) note(i, std::to_string(e), std::to_string(a));
      }
      break;
    }
    case DType::kString:
      for (int64_t i = 0; i < n; ++i) {
        if (expected.data<std::string>()[i] != actual.data<std::string>()[i]) {
          note(i, expected.data<std::string>()[i], actual.data<std::string>()[i]);
        }
      }
      break;
    default: {
      const size_t bytes = expected.byte_size();
      const size_t es = DTypeSize(expected.dtype());
      const auto* e = static_cast<const unsigned char*>(expected.raw_data());
      const auto* a = static_cast<const unsigned char*>(actual.raw_data());
      for (size_t i = 0; i < bytes; i += es) {
        if (std::memcmp(e + i, a + i, es) != 0) note(static_cast<int64_t>(i / es), "(bytes differ)", "");
      }
    }
  }
  if (bad) return absl::StrCat(bad, " of ", n, " elements differ; first ", diff);
  return "";
}

std::string CompareValues(const Value& expected, const Value& actual) {
  if (expected.kind != actual.kind) return "value kind differs (tensor/sequence/none)";
  if (expected.is_tensor()) return CompareTensors(expected.tensor, actual.tensor);
  if (expected.is_sequence()) {
    if (expected.sequence.size() != actual.sequence.size()) {
      return absl::StrCat("sequence length ", actual.sequence.size(), " != expected ", expected.sequence.size());
    }
    for (size_t i = 0; i < expected.sequence.size(); ++i) {
      std::string d = CompareTensors(expected.sequence[i], actual.sequence[i]);
      if (!d.empty()) return absl::StrCat("sequence item ", i, ": ", d);
    }
  }
  return "";
}

// Runs one test folder; returns an error describing the first problem.
absl::Status RunCase(const fs::path& dir) {
  SessionOptions opts;
  opts.num_threads = 2;
  auto model = LoadModelFromFile((dir / "model.onnx").string());
  if (!model.ok()) return model.status();
  auto session = SessionImpl::Create(std::move(*model), opts);
  if (!session.ok()) return session.status();
  const Graph& g = (*session)->graph();
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && absl::StartsWith(e.path().filename().string(), "test_data_set_")) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  // The graph's own inputs minus overridable initializers, in order.
  std::vector<const ValueInfo*> ins;
  for (const ValueInfo& v : g.inputs) if (!g.IsInitializer(v.name)) ins.push_back(&v);
  for (const fs::path& set : sets) {
    std::vector<std::pair<std::string, Value>> feeds;
    for (size_t i = 0;; ++i) {
      const fs::path p = set / absl::StrCat("input_", i, ".pb");
      if (!fs::exists(p)) break;
      if (i >= ins.size()) return absl::InvalidArgumentError("more input files than graph inputs");
      auto v = ReadValue(p, ins[i]->type);
      if (!v.ok()) return v.status();
      feeds.emplace_back(ins[i]->name, std::move(*v));
    }
    auto outs = (*session)->RunValues(feeds);
    if (!outs.ok()) return outs.status();
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const fs::path p = set / absl::StrCat("output_", i, ".pb");
      if (!fs::exists(p)) continue;
      auto expected = ReadValue(p, g.outputs[i].type);
      if (!expected.ok()) return expected.status();
      std::string d = CompareValues(*expected, (*outs)[i]);
      if (!d.empty()) {
        return absl::InternalError(absl::StrCat(set.filename().string(), " output '", g.outputs[i].name, "': ", d));
      }
    }
  }
  return absl::OkStatus();
}

class ConformanceCase : public testing::Test {
 public:
  ConformanceCase(std::string key, fs::path dir) : key_(std::move(key)), dir_(std::move(dir)) {}
  void TestBody() override {
    g_current_test = key_;
    g_test_started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
    absl::Status s = RunCase(dir_);
    g_test_started_ms = 0;
    auto expected = g_expected.find(key_);
    std::lock_guard<std::mutex> lock(g_tally.mu);
    if (!s.ok() && s.code() == absl::StatusCode::kUnimplemented &&
        absl::StrContains(s.message(), "unsupported operator")) {
      ++g_tally.unsupported;
      std::string msg(s.message());
      const size_t at = msg.find("unsupported operator ");
      g_tally.missing_ops[msg.substr(at + 21)]++;
      GTEST_SKIP() << msg;
    }
    if (expected != g_expected.end()) {
      // A random output (reason "random: ...") may match the data by chance: not a fix.
      if (s.ok() && absl::StartsWith(expected->second, "random:")) {
        ++g_tally.expected;
        GTEST_SKIP() << "a random output matched the data by chance (" << expected->second << ")";
      }
      if (s.ok()) {
        ++g_tally.failed;
        FAIL() << key_ << " passes now: remove it from expected_failures.txt (" << expected->second << ")";
      }
      ++g_tally.expected;
      GTEST_SKIP() << "expected failure (" << expected->second << "): " << s.message();
    }
    if (!s.ok()) {
      ++g_tally.failed;
      std::string first(s.message());
      g_tally.failures.push_back(absl::StrCat(key_, "\t", first.substr(0, first.find('\n'))));
      FAIL() << s.message();
    }
    ++g_tally.passed;
  }

 private:
  std::string key_;
  fs::path dir_;
};

void LoadManifest(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find_first_of(" \t");
    const std::string key = line.substr(0, sp);
    std::string reason = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", sp));
    g_expected[key] = reason;
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string data = "/usr/share/libonnx-testdata/data";
  std::string manifest;
  std::string failures_out;
  int timeout_s = 120;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--data") data = next();
    else if (a == "--manifest") manifest = next();
    else if (a == "--write-failures") failures_out = next();
    else if (a == "--timeout") timeout_s = std::atoi(next().c_str());
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: oneinfer_conformance [--data DIR] [--manifest FILE] [--write-failures FILE]\n"
                   "                            [--timeout SECONDS] [gtest flags, e.g. --gtest_filter=*relu*]\n";
      return 0;
    } else {
      std::cerr << "unknown argument: " << a << "\n";
      return 2;
    }
  }
  if (!fs::is_directory(data)) {
    std::cerr << "conformance data not found at " << data << " (apt-get install libonnx-testdata)\n";
    return 2;
  }
  if (!manifest.empty()) LoadManifest(manifest);
  for (const char* suite : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
    const fs::path sdir = fs::path(data) / suite;
    if (!fs::is_directory(sdir)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(sdir)) if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    std::string suite_name = suite;
    for (char& c : suite_name) if (c == '-') c = '_';
    for (const fs::path& d : dirs) {
      const std::string key = absl::StrCat(suite, "/", d.filename().string());
      testing::RegisterTest(suite_name.c_str(), d.filename().string().c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [key, d]() -> testing::Test* { return new ConformanceCase(key, d); });
    }
  }
  // A hung kernel must not hang CI: abort with the test's name.
  std::thread([timeout_s] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const int64_t start = g_test_started_ms;
      const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now().time_since_epoch()).count();
      if (start != 0 && now - start > timeout_s * 1000LL) {
        std::cerr << "conformance: " << g_current_test << " ran past " << timeout_s << " s; aborting\n";
        std::_Exit(3);
      }
    }
  }).detach();
  const int rc = RUN_ALL_TESTS();
  if (!failures_out.empty()) {
    std::ofstream f(failures_out);
    for (const std::string& line : g_tally.failures) f << line << "\n";
  }
  std::cout << "\nunsupported operators (tests skipped):";
  for (const auto& [op, n] : g_tally.missing_ops) std::cout << " " << op << "(" << n << ")";
  std::cout << "\nexpected failures (manifest): " << g_tally.expected << ", unsupported-op skips: " << g_tally.unsupported
            << "\n";
  std::cout << "conformance: " << g_tally.passed << " passed, " << g_tally.failed << " failed, "
            << (g_tally.expected + g_tally.unsupported) << " skipped\n";
  return rc;
}
