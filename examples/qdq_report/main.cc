// qdq_report: load a QDQ model, say which DequantizeLinear -> MatMul [-> QuantizeLinear] groups
// oneinfer fused into exact int8 nodes (the facts `oneinfer inspect` prints), then run it fused
// and per node (SessionOptions::qdq_fusion = false) on the same inputs and compare the outputs.
//
//   qdq_report MODEL.onnx [--dim NAME=SIZE]...
//
// Inputs are filled with a fixed pattern (element i: int8 (i*37)%256-128, uint8 (i*37)%256,
// float (i%7)*0.25-0.5); a symbolic dimension takes the size given with --dim, else 2.
//
// Output:
//   fused groups: N
//     K x FORM                      (one line per fused form)
//   not fused: REASON K             (one line per reason MatMuls stayed per node)
//   output NAME DTYPE [dims]: D of T values differ fused vs per node (max |d| X)
// Quantised outputs may differ by 1 LSB where float accumulation in the per-node path lands on
// a rounding tie the exact int32 path does not (docs/qdq.md).
#include <algorithm>
#include <cmath>
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

namespace {

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
  oneinfer::Tensor t = oneinfer::Tensor::Empty(info.dtype, shape);
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (info.dtype) {
      case oneinfer::DType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>((i * 37) % 256 - 128); break;
      case oneinfer::DType::kUInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>((i * 37) % 256); break;
      case oneinfer::DType::kFloat32: t.data<float>()[i] = static_cast<float>(i % 7) * 0.25f - 0.5f; break;
      case oneinfer::DType::kInt64: t.data<int64_t>()[i] = i % 5; break;
      default: return oneinfer::Tensor();  // not filled: reported below
    }
  }
  return t;
}

// Element i of t as a double (the dtypes a QDQ graph outputs).
double At(const oneinfer::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case oneinfer::DType::kInt8: return t.data<int8_t>()[i];
    case oneinfer::DType::kUInt8: return t.data<uint8_t>()[i];
    case oneinfer::DType::kFloat32: return t.data<float>()[i];
    case oneinfer::DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    default: return std::nan("");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: qdq_report MODEL.onnx [--dim NAME=SIZE]...\n");
    return 2;
  }
  const std::string path = argv[1];
  std::map<std::string, int64_t> dims;
  for (int i = 2; i + 1 < argc; i += 2) {
    const char* eq = std::strchr(argv[i + 1], '=');
    if (std::strcmp(argv[i], "--dim") != 0 || eq == nullptr) {
      std::fprintf(stderr, "qdq_report: unknown argument %s\n", argv[i]);
      return 2;
    }
    dims[std::string(argv[i + 1], static_cast<size_t>(eq - argv[i + 1]))] = std::atoll(eq + 1);
  }

  oneinfer::SessionOptions per_node_options;
  per_node_options.qdq_fusion = false;  // the control: every DequantizeLinear/QuantizeLinear runs
  auto fused = oneinfer::Session::Load(path);
  auto per_node = oneinfer::Session::Load(path, per_node_options);
  if (!fused.ok() || !per_node.ok()) {
    std::fprintf(stderr, "qdq_report: %s\n",
                 std::string((fused.ok() ? per_node.status() : fused.status()).message()).c_str());
    return 1;
  }

  const oneinfer::QdqFusionSummary& report = (*fused)->qdq_fusion();
  std::printf("fused groups: %d\n", report.fused_groups);
  for (const auto& [form, count] : report.forms) std::printf("  %d x %s\n", count, form.c_str());
  for (const auto& [why, count] : report.refused) std::printf("not fused: %s %d\n", why.c_str(), count);

  std::vector<oneinfer::Feed> feeds;
  for (const oneinfer::IOInfo& in : (*fused)->inputs()) {
    oneinfer::Tensor t = MakeInput(in, dims);
    if (t.dtype() == oneinfer::DType::kUndefined) {
      std::fprintf(stderr, "qdq_report: input %s has a dtype this example does not fill\n", in.name.c_str());
      return 1;
    }
    feeds.emplace_back(in.name, t);
  }
  auto a = (*fused)->Run(feeds);
  auto b = (*per_node)->Run(feeds);
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "qdq_report: %s\n", std::string((a.ok() ? b.status() : a.status()).message()).c_str());
    return 1;
  }
  const std::vector<oneinfer::IOInfo>& outs = (*fused)->outputs();
  for (size_t o = 0; o < a->size(); ++o) {
    const oneinfer::Tensor& x = (*a)[o];
    const oneinfer::Tensor& y = (*b)[o];
    int64_t differ = 0;
    double worst = 0;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const double d = std::fabs(At(x, i) - At(y, i));
      if (d != 0 || std::isnan(d)) ++differ;
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
    std::printf("output %s %s %s: %lld of %lld values differ fused vs per node (max |d| %g)\n",
                outs[o].name.c_str(), oneinfer::DTypeName(x.dtype()), oneinfer::ShapeToString(x.shape()).c_str(),
                static_cast<long long>(differ), static_cast<long long>(x.num_elements()), worst);
  }
  return 0;
}
