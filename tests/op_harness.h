// One-node operator tests: build a model of one node with its attributes, load and run it
// through the real session (SessionImpl: passes, kernel creation, plan, allocator), and compare
// outputs exactly or within a tolerance. Inputs are graph inputs in0, in1, ...; outputs out0, ...
#pragma once

#include "base/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "engine/session_impl.h"
#include "graph/ir.h"
#include "ops/families.h"
#include "oneinfer/session.h"
#include "oneinfer/tensor.h"

namespace oneinfer::testing {

inline Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}
inline Attribute FloatAttr(const std::string& name, float v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kFloat;
  a.f = v;
  return a;
}
inline Attribute StrAttr(const std::string& name, const std::string& v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kString;
  a.s = v;
  return a;
}
inline Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute FloatsAttr(const std::string& name, std::vector<float> v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kFloats;
  a.floats = std::move(v);
  return a;
}
inline Attribute StrsAttr(const std::string& name, std::vector<std::string> v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kStrings;
  a.strings = std::move(v);
  return a;
}

// The declared type of a graph input that will carry `v` (element type only: shapes stay
// unknown, so the kernel, not load-time inference, sees every shape).
inline TypeInfo TypeOf(const Value& v) {
  TypeInfo t;
  if (v.is_sequence()) {
    t.kind = TypeInfo::Kind::kSequence;
    t.inner = std::make_shared<TypeInfo>();
  } else if (v.is_tensor()) {
    t.kind = TypeInfo::Kind::kTensor;
    t.elem = v.tensor.dtype();
  } else {  // an empty optional
    t.kind = TypeInfo::Kind::kOptional;
    t.inner = std::make_shared<TypeInfo>();
  }
  return t;
}

// A model of one node. Designated initializers name what a test sets:
//   OneNode{.op = "Pad", .opset = 19, .attrs = {StrAttr("mode", "wrap")}}.Run({x, pads})
struct OneNode {
  std::string op;
  int64_t opset = kNewestOpset;  // of the node's domain (ai.onnx is at kNewestOpset for other domains)
  std::string domain;  // "" is ai.onnx
  std::vector<Attribute> attrs;
  size_t num_outputs = 1;
  std::vector<DType> output_types;  // declared element types of the outputs (more outputs if longer)
  int threads = 1;
  bool constant_folding = true;

  // Loads the node with inputs of these types; an input of kind kUnknown (TypeInfo{}, or
  // DType::kUndefined below) is left out (named "").
  absl::StatusOr<std::unique_ptr<SessionImpl>> Load(const std::vector<TypeInfo>& inputs) const {
    auto model = std::make_unique<Model>();
    Graph& g = model->graph;
    g.name = "test";
    g.opsets[""] = domain.empty() ? opset : kNewestOpset;
    if (!domain.empty()) g.opsets[domain] = opset;
    Node n;
    n.name = "n";
    n.op_type = op;
    n.domain = domain;
    for (const Attribute& a : attrs) n.attrs[a.name] = a;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].kind == TypeInfo::Kind::kUnknown) {
        n.inputs.push_back("");
        continue;
      }
      n.inputs.push_back("in" + std::to_string(i));
      g.inputs.push_back(ValueInfo{n.inputs.back(), inputs[i]});
    }
    for (size_t i = 0; i < std::max(num_outputs, output_types.size()); ++i) {
      n.outputs.push_back("out" + std::to_string(i));
      ValueInfo v{n.outputs.back(), {}};
      if (i < output_types.size()) {
        v.type.kind = TypeInfo::Kind::kTensor;
        v.type.elem = output_types[i];
      }
      g.outputs.push_back(v);
    }
    g.nodes.push_back(std::move(n));
    SessionOptions opts;
    opts.num_threads = threads;
    opts.constant_folding = constant_folding;
    return SessionImpl::Create(std::move(model), opts);
  }
  absl::StatusOr<std::unique_ptr<SessionImpl>> Load(const std::vector<DType>& input_types) const {
    std::vector<TypeInfo> types(input_types.size());
    for (size_t i = 0; i < input_types.size(); ++i) {
      if (input_types[i] == DType::kUndefined) continue;
      types[i].kind = TypeInfo::Kind::kTensor;
      types[i].elem = input_types[i];
    }
    return Load(types);
  }

  // Loads the node with the types of `inputs` and runs it on them; an undefined tensor leaves
  // its input out.
  absl::StatusOr<std::vector<Value>> RunValues(const std::vector<Value>& inputs) const {
    std::vector<TypeInfo> types;
    std::vector<std::pair<std::string, Value>> feeds;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool omitted = inputs[i].is_tensor() && !inputs[i].tensor.defined();
      types.push_back(omitted ? TypeInfo{} : TypeOf(inputs[i]));
      if (!omitted) feeds.emplace_back("in" + std::to_string(i), inputs[i]);
    }
    auto s = Load(types);
    if (!s.ok()) return s.status();
    return (*s)->RunValues(feeds);
  }
  absl::StatusOr<std::vector<Value>> Run(const std::vector<Tensor>& inputs) const {
    std::vector<Value> values;
    for (const Tensor& t : inputs) values.push_back(Value::FromTensor(t));
    return RunValues(values);
  }
  // Same, the outputs as tensors.
  absl::StatusOr<std::vector<Tensor>> Outputs(const std::vector<Tensor>& inputs) const {
    auto r = Run(inputs);
    if (!r.ok()) return r.status();
    std::vector<Tensor> out;
    for (Value& v : *r) out.push_back(std::move(v.tensor));
    return out;
  }
};

// float32 <-> float16 copies of a tensor (each element rounded / widened once).
inline Tensor ToF16(const Tensor& t) {
  Tensor r = Tensor::Empty(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) r.data<uint16_t>()[i] = F32ToF16(t.data<float>()[i]);
  return r;
}
inline Tensor ToF32(const Tensor& t) {
  Tensor r = Tensor::Empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) r.data<float>()[i] = F16ToF32(t.data<uint16_t>()[i]);
  return r;
}

// The elements of t as doubles (numeric and bool types).
inline std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DType::kFloat32: v[i] = t.data<float>()[i]; break;
      case DType::kFloat64: v[i] = t.data<double>()[i]; break;
      case DType::kFloat16: v[i] = static_cast<float>(t.data<Eigen::half>()[i]); break;
      case DType::kBFloat16: v[i] = static_cast<float>(t.data<Eigen::bfloat16>()[i]); break;
      case DType::kInt8: v[i] = t.data<int8_t>()[i]; break;
      case DType::kInt16: v[i] = t.data<int16_t>()[i]; break;
      case DType::kInt32: v[i] = t.data<int32_t>()[i]; break;
      case DType::kInt64: v[i] = static_cast<double>(t.data<int64_t>()[i]); break;
      case DType::kUInt8: v[i] = t.data<uint8_t>()[i]; break;
      case DType::kUInt16: v[i] = t.data<uint16_t>()[i]; break;
      case DType::kUInt32: v[i] = t.data<uint32_t>()[i]; break;
      case DType::kUInt64: v[i] = static_cast<double>(t.data<uint64_t>()[i]); break;
      case DType::kBool: v[i] = t.data<bool>()[i] ? 1 : 0; break;
      default: ADD_FAILURE() << "AsDoubles: unsupported type " << DTypeName(t.dtype()); return {};
    }
  }
  return v;
}

// got == want: same type, shape and elements (NaN equals NaN; strings compared as strings).
inline void ExpectTensorEq(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  if (got.dtype() == DType::kString) {
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      EXPECT_EQ(got.data<std::string>()[i], want.data<std::string>()[i]) << "element " << i;
    }
    return;
  }
  const std::vector<double> g = AsDoubles(got), w = AsDoubles(want);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    else EXPECT_EQ(g[i], w[i]) << "element " << i;
  }
}

// |got - want| <= abs_tol + rel_tol * |want| elementwise, with the same type and shape.
inline void ExpectTensorNear(const Tensor& got, const Tensor& want, double abs_tol, double rel_tol = 0) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = AsDoubles(got), w = AsDoubles(want);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    else EXPECT_NEAR(g[i], w[i], abs_tol + rel_tol * std::fabs(w[i])) << "element " << i;
  }
}

}  // namespace oneinfer::testing
