// The one place that reads ONEINFER_* variables: the command line translates them into
// SessionOptions fields and kernel tier choices (base/kernel_tier.h). The library itself never
// reads the environment.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "oneinfer/session.h"

namespace oneinfer::cli {

struct EnvVariable {
  const char* name;   // "ONEINFER_QDQ=0"
  std::string help;   // one line
};

// Every variable the commands read, in the order --help lists them.
std::vector<EnvVariable> EnvironmentVariables();

// The block `oneinfer --help` and the session commands' --help print: a title line, then one
// line per variable.
std::string EnvironmentHelp();

// Reads the session variables into *options; a field whose variable is unset keeps its value.
// A bad value that was ignored before (an unknown log level, a weight cache size that is not a
// positive count) adds a warning and leaves the field; one with no fallback is an
// InvalidArgument error naming the variable.
absl::Status ApplySessionEnvironment(SessionOptions* options, std::vector<std::string>* warnings);

// ONEINFER_SGEMM_TIER, ONEINFER_INT8_TIER and ONEINFER_Q4_TIER (else ONEINFER_INT8_TIER) force
// the tiers they name for the process. A name this CPU does not run adds a warning; the best
// tier available runs instead, as before.
void ApplyTierEnvironment(std::vector<std::string>* warnings);

// The commands' forms: each warning printed as "oneinfer: warning: ..." on stderr.
absl::Status ApplySessionEnvironment(SessionOptions* options);
void ApplyTierEnvironment();

}  // namespace oneinfer::cli
