// Fuzz target: the TensorProto / SequenceProto / OptionalProto reader behind `oneinfer exec`
// (graph/onnx_loader.h ParseValue), each value read back and written out again.
#include <cstdint>
#include <string>

#include "graph/onnx_loader.h"
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

namespace {

// Reads every byte of a tensor (ASan checks its storage) and serializes it again.
void Touch(const oneinfer::Tensor& t) {
  volatile uint8_t sink = 0;
  if (t.dtype() == oneinfer::DType::kString) {
    const auto* s = t.data<std::string>();
    for (int64_t i = 0; i < t.num_elements(); ++i) sink = sink + static_cast<uint8_t>(s[i].size());
  } else {
    const auto* p = static_cast<const uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.byte_size(); ++i) sink = sink + p[i];
  }
  onnx::TensorProto proto;
  (void)oneinfer::TensorToProto(t, "x", &proto);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using oneinfer::TypeInfo;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (TypeInfo::Kind kind : {TypeInfo::Kind::kUnknown, TypeInfo::Kind::kSequence, TypeInfo::Kind::kOptional}) {
    TypeInfo type;
    type.kind = kind;
    std::string name;
    auto v = oneinfer::ParseValue(bytes, type, &name);
    if (!v.ok()) continue;
    if (v->is_tensor()) Touch(v->tensor);
    for (const auto& t : v->sequence) Touch(t);
    onnx::SequenceProto sp;
    onnx::OptionalProto op;
    if (v->is_sequence()) (void)oneinfer::ValueToSequenceProto(*v, name, &sp);
    (void)oneinfer::ValueToOptionalProto(*v, name, &op);
  }
  return 0;
}
