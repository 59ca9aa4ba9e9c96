#include "engine/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

void RegisterElementwiseOps(KernelRegistry& r) { (void)r; }

}  // namespace oneinfer
