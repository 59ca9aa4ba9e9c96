// Enumerations shared by SessionOptions and the layers below the session (logger, kernels).
#pragma once

namespace oneinfer {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3 };

// MatMuls with a constant float weight: float32, or dynamic A8W8 (activations quantised per
// row at run time, weights per column once; int8 x int8 -> int32 kernels).
enum class MatMulPrecision { kFloat32, kInt8 };

}  // namespace oneinfer
