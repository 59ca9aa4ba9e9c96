#include "engine/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

void RegisterControlFlowOps(KernelRegistry& r) { (void)r; }

}  // namespace oneinfer
