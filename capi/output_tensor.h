// What a binding hands its caller from Session::Run: the output itself when the run made its
// memory and nothing else refers to it, else a copy. An output may share storage with a feed (an
// Identity of a graph input), with the model's weights (a constant output) or with another
// output (a Reshape); handing those out as they are would let the caller write into them.
#pragma once

#include <utility>

#include "oneinfer/tensor.h"

namespace oneinfer::capi {

// Takes the tensor by value: once a shared output has been copied and dropped, the last output
// still holding that storage owns it alone and is handed out as it is.
inline Tensor OwnedOutput(Tensor t) {
  if (t.holder() != nullptr && t.holder().use_count() == 1) return t;
  return t.Clone();
}

}  // namespace oneinfer::capi
