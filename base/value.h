// The runtime value of a graph name: a tensor, a sequence of tensors, or an empty optional.
#pragma once

#include <utility>
#include <vector>

#include "oneinfer/tensor.h"

namespace oneinfer {

struct Value {
  enum class Kind { kNone, kTensor, kSequence };
  Kind kind = Kind::kNone;
  Tensor tensor;                 // kTensor
  std::vector<Tensor> sequence;  // kSequence
  DType seq_dtype = DType::kUndefined;  // element type of a sequence (may be empty)

  static Value FromTensor(Tensor t) {
    Value v;
    v.kind = Kind::kTensor;
    v.tensor = std::move(t);
    return v;
  }
  static Value FromSequence(std::vector<Tensor> s, DType dtype) {
    Value v;
    v.kind = Kind::kSequence;
    v.sequence = std::move(s);
    v.seq_dtype = dtype;
    return v;
  }
  // An optional without a value (ONNX Optional() with no input).
  static Value None() { return Value(); }

  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_none() const { return kind == Kind::kNone; }
};

}  // namespace oneinfer
