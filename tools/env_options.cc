#include "tools/env_options.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/kernel_tier.h"

namespace oneinfer::cli {
namespace {

const char* Get(const char* name) { return std::getenv(name); }

// Switches that turn something on: set to anything but "" or "0".
bool On(const char* name) {
  const char* v = Get(name);
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

// Switches that turn a default-on feature off: exactly "0".
bool Off(const char* name) {
  const char* v = Get(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

std::string TierNames(const KernelTier* tiers, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) absl::StrAppend(&s, i == 0 ? "" : i + 1 == count ? " or " : ", ", tiers[i].name);
  return s;
}

void ApplyTier(KernelFamily family, const char* var, const char* name, std::vector<std::string>* warnings) {
  if (SetKernelTier(family, name)) return;
  warnings->push_back(absl::StrCat(var, "='", name, "' is not a ", KernelFamilyName(family),
                                   " tier this CPU runs (", absl::StrJoin(SupportedKernelTiers(family), ", "),
                                   "); using ", ActiveKernelTierName(family)));
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "oneinfer: warning: " << w << "\n";
}

}  // namespace

std::vector<EnvVariable> EnvironmentVariables() {
  return {
      {"ONEINFER_LOG=LEVEL", "log level: error, warning (default), info or verbose"},
      {"ONEINFER_PROFILE=1", "per-run node timing profile in the log"},
      {"ONEINFER_QDQ=0", "no QDQ MatMul fusion: every Q/DQ/MatMul node runs on its own"},
      {"ONEINFER_QDQ_DEBUG=1", "QDQ fusion trace on stderr: each fused group, each refusal"},
      {"ONEINFER_WEIGHT_FUSION=0", "no weight-only DequantizeLinear -> MatMul fusion"},
      {"ONEINFER_NPU_DESIGNS=TABLE", "NPU designs, MxKxN=x.xclbin:x.insts[,...] (docs/npu.md)"},
      {"ONEINFER_NPU_EMULATE=1", "run the NPU designs on the in-process emulated device"},
      {"ONEINFER_NPU_WEIGHT_CACHE_MB=N", "device memory for resident weights per design (default 2048)"},
      {"ONEINFER_NPU_WAIT_TIMEOUT_MS=N", "a device run not done after N ms finishes on the host (default 10000)"},
      {"ONEINFER_NPU_TRACE=1", "one NPU routing line per GEMM on stderr"},
      {"ONEINFER_SGEMM_TIER=T", absl::StrCat("float GEMM tier: ", TierNames(kFloatTiers, kFloatTierCount),
                                             " (default: the best this CPU runs)")},
      {"ONEINFER_INT8_TIER=T", absl::StrCat("int8 GEMM tier: ", TierNames(kInt8Tiers, kInt8TierCount))},
      {"ONEINFER_Q4_TIER=T", absl::StrCat("4-bit GEMM tier: ", TierNames(kQ4Tiers, kQ4TierCount),
                                          " (default: ONEINFER_INT8_TIER's)")},
  };
}

std::string EnvironmentHelp() {
  std::string s = "\nenvironment (the command turns these into session options and kernel tiers):\n";
  for (const EnvVariable& v : EnvironmentVariables()) {
    std::string name = v.name;
    name.resize(std::max<size_t>(name.size() + 1, 32), ' ');
    absl::StrAppend(&s, "  ", name, v.help, "\n");
  }
  return s;
}

absl::Status ApplySessionEnvironment(SessionOptions* options, std::vector<std::string>* warnings) {
  if (const char* v = Get("ONEINFER_LOG")) {
    const std::string level(v);
    if (level == "error") options->log_level = LogLevel::kError;
    else if (level == "warning") options->log_level = LogLevel::kWarning;
    else if (level == "info") options->log_level = LogLevel::kInfo;
    else if (level == "verbose") options->log_level = LogLevel::kVerbose;
    else warnings->push_back(absl::StrCat("ONEINFER_LOG='", level, "' is not error, warning, info or verbose; ignored"));
  }
  if (On("ONEINFER_PROFILE")) options->profile = true;
  if (Off("ONEINFER_QDQ")) options->qdq_fusion = false;
  if (On("ONEINFER_QDQ_DEBUG")) options->qdq_trace = true;
  if (Off("ONEINFER_WEIGHT_FUSION")) options->weight_fusion = false;

  NpuOptions& npu = options->npu;
  if (const char* v = Get("ONEINFER_NPU_DESIGNS")) npu.designs = v;
  if (On("ONEINFER_NPU_EMULATE")) npu.emulate = true;
  if (const char* v = Get("ONEINFER_NPU_WEIGHT_CACHE_MB")) {
    int64_t mb = 0;
    if (absl::SimpleAtoi(v, &mb) && mb > 0) {
      npu.weight_cache_mb = static_cast<size_t>(mb);
    } else {
      warnings->push_back(absl::StrCat("ONEINFER_NPU_WEIGHT_CACHE_MB='", v,
                                       "' is not a positive integer; keeping the default"));
    }
  }
  if (const char* v = Get("ONEINFER_NPU_WAIT_TIMEOUT_MS")) {
    int64_t ms = 0;
    if (!absl::SimpleAtoi(v, &ms) || ms <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("ONEINFER_NPU_WAIT_TIMEOUT_MS='", v,
                                                     "' is not a positive number of milliseconds"));
    }
    npu.wait_timeout_ms = ms;
  }
  if (On("ONEINFER_NPU_TRACE")) npu.trace = true;
  return absl::OkStatus();
}

void ApplyTierEnvironment(std::vector<std::string>* warnings) {
  if (const char* v = Get("ONEINFER_SGEMM_TIER")) ApplyTier(KernelFamily::kFloat, "ONEINFER_SGEMM_TIER", v, warnings);
  const char* int8 = Get("ONEINFER_INT8_TIER");
  if (int8 != nullptr) ApplyTier(KernelFamily::kInt8, "ONEINFER_INT8_TIER", int8, warnings);
  // The 4-bit GEMM follows the int8 choice unless told otherwise (one variable pins both).
  if (const char* v = Get("ONEINFER_Q4_TIER")) {
    ApplyTier(KernelFamily::kQ4, "ONEINFER_Q4_TIER", v, warnings);
  } else if (int8 != nullptr) {
    ApplyTier(KernelFamily::kQ4, "ONEINFER_INT8_TIER", int8, warnings);
  }
}

absl::Status ApplySessionEnvironment(SessionOptions* options) {
  std::vector<std::string> warnings;
  absl::Status s = ApplySessionEnvironment(options, &warnings);
  PrintWarnings(warnings);
  return s;
}

void ApplyTierEnvironment() {
  std::vector<std::string> warnings;
  ApplyTierEnvironment(&warnings);
  PrintWarnings(warnings);
}

}  // namespace oneinfer::cli
