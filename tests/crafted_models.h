// Crafted ONNX models for the resource-limit and cancellation tests: attribute builders, a Loop
// that never ends by itself, and `oneinfer exec` on a model with every input an initializer.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "tests/test_util.h"

namespace oneinfer::testing {

inline void AddIntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void AddFloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void AddStringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

inline onnx::TensorProto BoolTensor(const std::string& name, bool v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::BOOL);
  t.add_int32_data(v ? 1 : 0);
  return t;
}

// An output of unknown shape, so that load-time inference does not decide for the kernel.
inline onnx::ValueInfoProto AnyShape(const std::string& name, int elem_type) {
  onnx::ValueInfoProto v = TensorInfo(name, elem_type, {});
  v.mutable_type()->mutable_tensor_type()->clear_shape();
  return v;
}

// y = Loop(M = trips, cond = true, v = x) whose body passes v on unchanged (through an Identity,
// or with `empty_body` straight from its input to its output, so only the Loop itself checks).
inline onnx::ModelProto EndlessLoopModel(int64_t trips, bool empty_body = false) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_initializer() = Int64Tensor("M", {}, {trips});
  *g->add_initializer() = BoolTensor("cond", true);
  *g->add_initializer() = FloatTensor("x", {1}, {1.f});
  onnx::NodeProto loop = MakeNode("Loop", {"M", "cond", "x"}, {"y"}, "endless");
  auto* body_attr = loop.add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* body = body_attr->mutable_g();
  body->set_name("body");
  *body->add_input() = TensorInfo("i", onnx::TensorProto::INT64, {});
  *body->add_input() = TensorInfo("c_in", onnx::TensorProto::BOOL, {});
  *body->add_input() = TensorInfo("v_in", onnx::TensorProto::FLOAT, {1});
  if (empty_body) {
    *body->add_output() = TensorInfo("c_in", onnx::TensorProto::BOOL, {});
    *body->add_output() = TensorInfo("v_in", onnx::TensorProto::FLOAT, {1});
  } else {
    *body->add_node() = MakeNode("Identity", {"c_in"}, {"c_out"});
    *body->add_node() = MakeNode("Identity", {"v_in"}, {"v_out"});
    *body->add_output() = TensorInfo("c_out", onnx::TensorProto::BOOL, {});
    *body->add_output() = TensorInfo("v_out", onnx::TensorProto::FLOAT, {1});
  }
  *g->add_node() = loop;
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {1});
  return m;
}

inline int CountOccurrences(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + needle.size())) ++n;
  return n;
}

// `oneinfer exec` on a model whose inputs are all initializers (an empty input folder).
inline CliResult ExecModel(const std::filesystem::path& model, const std::string& extra = "") {
  const std::filesystem::path dir = model.parent_path();
  std::filesystem::create_directories(dir / "in");
  return RunCli("exec " + model.string() + " --input-dir " + (dir / "in").string() + " --output-dir " +
                (dir / "out").string() + (extra.empty() ? "" : " " + extra));
}

}  // namespace oneinfer::testing
