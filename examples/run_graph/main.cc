// run_graph: load an ONNX model, make an input tensor for each graph input, run, print outputs.
//
//   run_graph MODEL.onnx [--dim NAME=SIZE]... [--threads N]
//
// Inputs are filled with a fixed pattern so the answer can be checked elsewhere:
//   float/double  element i = (i % 7) * 0.25 - 0.5
//   int32/int64   element i = i % 5
//   bool          element i = (i % 2 == 1)
// A symbolic or unknown dimension takes the size given with --dim NAME=SIZE, else 2.
//
// Output: the library's version and the headers' version,
//   library: 0.1.0 (kernels: float avx2, int8 avx2, 4-bit avx2; npu: not built)
//   headers: 0.1.0
// one line per input fed, then one line per graph output:
//   output NAME DTYPE [d0,d1,...]: v0 v1 v2 ...
// and then one line showing that a bad feed comes back as an error value, not an exception:
//   error (expected): <the message, which names the input>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oneinfer/session.h"
#include "oneinfer/tensor.h"
#include "oneinfer/version.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: run_graph MODEL.onnx [--dim NAME=SIZE]... [--threads N]\n");
  return 2;
}

// Makes the tensor for one input, or an empty (undefined) tensor for a dtype we do not fill.
oneinfer::Tensor MakeInput(const oneinfer::IOInfo& info, const std::map<std::string, int64_t>& dims) {
  oneinfer::Shape shape;
  for (size_t d = 0; d < info.shape.size(); ++d) {
    if (info.shape[d] >= 0) {
      shape.push_back(info.shape[d]);
      continue;
    }
    const std::string& param = d < info.dim_params.size() ? info.dim_params[d] : std::string();
    auto it = dims.find(param);
    shape.push_back(it != dims.end() ? it->second : 2);
  }
  // Tensor::Empty allocates zeroed storage the tensor owns (shared by its copies).
  oneinfer::Tensor t = oneinfer::Tensor::Empty(info.dtype, shape);
  const int64_t n = t.num_elements();
  switch (info.dtype) {
    case oneinfer::DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
      break;
    case oneinfer::DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = static_cast<double>(i % 7) * 0.25 - 0.5;
      break;
    case oneinfer::DType::kInt32:
      for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(i % 5);
      break;
    case oneinfer::DType::kInt64:
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = i % 5;
      break;
    case oneinfer::DType::kBool:
      for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = (i % 2) == 1;
      break;
    default:
      return oneinfer::Tensor();
  }
  return t;
}

void PrintTensor(const std::string& name, const oneinfer::Tensor& t) {
  std::printf("output %s %s %s:", name.c_str(), oneinfer::DTypeName(t.dtype()),
              oneinfer::ShapeToString(t.shape()).c_str());
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case oneinfer::DType::kFloat32: std::printf(" %.6g", static_cast<double>(t.data<float>()[i])); break;
      case oneinfer::DType::kFloat64: std::printf(" %.6g", t.data<double>()[i]); break;
      case oneinfer::DType::kInt32: std::printf(" %d", t.data<int32_t>()[i]); break;
      case oneinfer::DType::kInt64: std::printf(" %lld", static_cast<long long>(t.data<int64_t>()[i])); break;
      case oneinfer::DType::kBool: std::printf(" %d", t.data<bool>()[i] ? 1 : 0); break;
      default: std::printf(" ?"); break;
    }
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::map<std::string, int64_t> dims;
  oneinfer::SessionOptions options;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--dim") && i + 1 < argc) {
      const std::string arg = argv[++i];
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) return Usage();
      dims[arg.substr(0, eq)] = std::atoll(arg.c_str() + eq + 1);
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      options.num_threads = std::atoi(argv[++i]);
    } else {
      return Usage();
    }
  }

  std::printf("library: %s\nheaders: %s\n", oneinfer::VersionString().c_str(), ONEINFER_VERSION_STRING);

  // Load returns StatusOr<unique_ptr<Session>>: the caller owns the session.
  auto session = oneinfer::Session::Load(argv[1], options);
  if (!session.ok()) {
    std::fprintf(stderr, "run_graph: %s\n", session.status().ToString().c_str());
    return 1;
  }
  const oneinfer::Session& s = **session;

  std::vector<oneinfer::Feed> feeds;
  for (const oneinfer::IOInfo& in : s.inputs()) {
    if (in.has_default) continue;  // an initializer stands behind it
    oneinfer::Tensor t = MakeInput(in, dims);
    if (!t.defined()) {
      std::fprintf(stderr, "run_graph: input '%s' has dtype %s, which this example does not fill\n",
                   in.name.c_str(), oneinfer::DTypeName(in.dtype));
      return 1;
    }
    std::printf("input %s %s %s\n", in.name.c_str(), oneinfer::DTypeName(t.dtype()),
                oneinfer::ShapeToString(t.shape()).c_str());
    feeds.emplace_back(in.name, std::move(t));
  }

  auto outputs = s.Run(feeds);  // all graph outputs, in graph order
  if (!outputs.ok()) {
    std::fprintf(stderr, "run_graph: %s\n", outputs.status().ToString().c_str());
    return 1;
  }
  for (size_t i = 0; i < outputs->size(); ++i) PrintTensor(s.outputs()[i].name, (*outputs)[i]);

  // Errors are values: a feed with the wrong rank is refused with a message naming the input.
  if (!feeds.empty()) {
    std::vector<oneinfer::Feed> bad = feeds;
    oneinfer::Shape shape = bad[0].second.shape();
    shape.push_back(1);
    bad[0].second = bad[0].second.Reshaped(shape);
    auto refused = s.Run(bad);
    if (refused.ok()) {
      std::fprintf(stderr, "run_graph: a feed of the wrong rank was accepted\n");
      return 1;
    }
    std::printf("error (expected): %s\n", refused.status().ToString().c_str());
  }
  return 0;
}
