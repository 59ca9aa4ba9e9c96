// The design table: which compiled design serves which GEMM shape.
//
// SessionOptions::npu.designs (ONEINFER_NPU_DESIGNS on the command line) =
// "MxKxN=path.xclbin:path.insts,MxKxN=...": one entry per design, split at
// the first '=' and at the last ':' (so an instruction path must not contain ':'). Malformed
// entries are reported one by one and skipped; the others still load.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "npu/device.h"

namespace oneinfer::npu {

// "32x1024x2048" -> {32, 1024, 2048}. Rejects anything else, with the reason.
absl::StatusOr<GemmShape> ParseShape(absl::string_view text);

// The micro-kernel's rules (mlir-aie whole_array int8): M % 16, K % 8, N % 16 == 0.
absl::Status CheckShapeRules(const GemmShape& shape);

struct DesignTableParse {
  std::vector<DesignSpec> designs;  // well-formed entries, in order, no duplicate shape
  std::vector<std::string> errors;  // one line per rejected entry, naming it and why
};

DesignTableParse ParseDesignTable(absl::string_view text);

}  // namespace oneinfer::npu
