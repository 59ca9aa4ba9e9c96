// VersionString(): the configured version plus what this build and this CPU chose.
#include <string>

#include "absl/strings/str_cat.h"
#include "npu/device.h"
#include "oneinfer/session.h"
#include "oneinfer/version.h"
#include "ops/gemm/sgemm.h"
#include "quant/gemm_s8.h"

namespace oneinfer {

std::string VersionString() {
  return absl::StrCat(ONEINFER_VERSION_STRING, " (kernels: float ", SgemmTierName(), ", int8 ",
                      Int8TierName(), "; npu: ", npu::XrtCompiledIn() ? "built with XRT" : "not built",
                      ")");
}

}  // namespace oneinfer
