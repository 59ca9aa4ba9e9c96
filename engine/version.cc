// VersionString(): the configured version plus what this build and this CPU chose.
#include <string>

#include "absl/strings/str_cat.h"
#include "base/kernel_tier.h"
#include "npu/device.h"
#include "oneinfer/session.h"
#include "oneinfer/version.h"

namespace oneinfer {

std::string VersionString() {
  std::string kernels;
  for (KernelFamily f : {KernelFamily::kFloat, KernelFamily::kInt8, KernelFamily::kQ4}) {
    absl::StrAppend(&kernels, kernels.empty() ? "" : ", ", KernelFamilyName(f), " ",
                    ActiveKernelTierName(f));
  }
  return absl::StrCat(ONEINFER_VERSION_STRING, " (kernels: ", kernels,
                      "; npu: ", npu::XrtCompiledIn() ? "built with XRT" : "not built", ")");
}

}  // namespace oneinfer
