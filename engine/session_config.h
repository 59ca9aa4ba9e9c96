// Session-wide settings every kernel factory can read.
#pragma once

#include "oneinfer/session.h"

namespace oneinfer {

struct SessionConfig {
  SessionOptions options;
};

}  // namespace oneinfer
