// Session-wide settings every kernel factory can read.
#pragma once

#include "oneinfer/session.h"
#include "ops/kernel.h"

namespace oneinfer {

struct SessionConfig {
  SessionOptions options;
  KernelConfig kernels;  // the part of the options kernels see
};

}  // namespace oneinfer
