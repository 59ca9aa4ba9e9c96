// tools/env_options: the ONEINFER_* variables become SessionOptions fields and kernel tiers, in
// the command line only; --help lists them.
#include "tools/env_options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/kernel_tier.h"
#include "tests/test_util.h"

namespace oneinfer::cli {
namespace {

// Sets variables for one test and unsets them (restoring any earlier value) afterwards.
class Env {
 public:
  ~Env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->had) ::setenv(it->name.c_str(), it->value.c_str(), 1);
      else ::unsetenv(it->name.c_str());
    }
  }
  void Set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old != nullptr, old ? old : ""});
    ::setenv(name, value, 1);
  }
  void Unset(const char* name) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old != nullptr, old ? old : ""});
    ::unsetenv(name);
  }

 private:
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved_;
};

constexpr const char* kAllVars[] = {
    "ONEINFER_LOG", "ONEINFER_PROFILE", "ONEINFER_QDQ", "ONEINFER_QDQ_DEBUG", "ONEINFER_WEIGHT_FUSION",
    "ONEINFER_NPU_DESIGNS", "ONEINFER_NPU_EMULATE", "ONEINFER_NPU_WEIGHT_CACHE_MB",
    "ONEINFER_NPU_WAIT_TIMEOUT_MS", "ONEINFER_NPU_TRACE", "ONEINFER_SGEMM_TIER", "ONEINFER_INT8_TIER",
    "ONEINFER_Q4_TIER"};

void UnsetAll(Env& env) {
  for (const char* v : kAllVars) env.Unset(v);
}

TEST(EnvOptions, NothingSetLeavesTheOptions) {
  Env env;
  UnsetAll(env);
  SessionOptions o;
  o.log_level = LogLevel::kInfo;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ApplySessionEnvironment(&o, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  const SessionOptions d;
  EXPECT_EQ(o.log_level, LogLevel::kInfo);
  EXPECT_EQ(o.profile, d.profile);
  EXPECT_EQ(o.qdq_fusion, d.qdq_fusion);
  EXPECT_EQ(o.qdq_trace, d.qdq_trace);
  EXPECT_EQ(o.weight_fusion, d.weight_fusion);
  EXPECT_EQ(o.npu.designs, d.npu.designs);
  EXPECT_EQ(o.npu.emulate, d.npu.emulate);
  EXPECT_EQ(o.npu.weight_cache_mb, d.npu.weight_cache_mb);
  EXPECT_EQ(o.npu.wait_timeout_ms, d.npu.wait_timeout_ms);
  EXPECT_EQ(o.npu.trace, d.npu.trace);
}

TEST(EnvOptions, EveryVariableSetsItsField) {
  Env env;
  UnsetAll(env);
  env.Set("ONEINFER_LOG", "verbose");
  env.Set("ONEINFER_PROFILE", "1");
  env.Set("ONEINFER_QDQ", "0");
  env.Set("ONEINFER_QDQ_DEBUG", "1");
  env.Set("ONEINFER_WEIGHT_FUSION", "0");
  env.Set("ONEINFER_NPU_DESIGNS", "64x1024x2048=/d/q.xclbin:/d/q.txt");
  env.Set("ONEINFER_NPU_EMULATE", "yes");
  env.Set("ONEINFER_NPU_WEIGHT_CACHE_MB", "64");
  env.Set("ONEINFER_NPU_WAIT_TIMEOUT_MS", "250");
  env.Set("ONEINFER_NPU_TRACE", "1");
  SessionOptions o;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ApplySessionEnvironment(&o, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(o.log_level, LogLevel::kVerbose);
  EXPECT_TRUE(o.profile);
  EXPECT_FALSE(o.qdq_fusion);
  EXPECT_TRUE(o.qdq_trace);
  EXPECT_FALSE(o.weight_fusion);
  EXPECT_EQ(o.npu.designs, "64x1024x2048=/d/q.xclbin:/d/q.txt");
  EXPECT_TRUE(o.npu.emulate);
  EXPECT_EQ(o.npu.weight_cache_mb, 64u);
  EXPECT_EQ(o.npu.wait_timeout_ms, 250);
  EXPECT_TRUE(o.npu.trace);
}

// The rules the library had: "0" (and "") leave a switch off; only "0" turns a fusion off.
TEST(EnvOptions, SwitchValues) {
  Env env;
  UnsetAll(env);
  env.Set("ONEINFER_PROFILE", "0");
  env.Set("ONEINFER_QDQ_DEBUG", "");
  env.Set("ONEINFER_QDQ", "1");
  env.Set("ONEINFER_WEIGHT_FUSION", "");
  env.Set("ONEINFER_NPU_EMULATE", "0");
  SessionOptions o;
  o.profile = false;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ApplySessionEnvironment(&o, &warnings).ok());
  EXPECT_FALSE(o.profile);
  EXPECT_FALSE(o.qdq_trace);
  EXPECT_TRUE(o.qdq_fusion);
  EXPECT_TRUE(o.weight_fusion);
  EXPECT_FALSE(o.npu.emulate);
}

TEST(EnvOptions, BadValues) {
  Env env;
  UnsetAll(env);
  // Ignored before: a warning now, the option stands.
  env.Set("ONEINFER_LOG", "loud");
  env.Set("ONEINFER_NPU_WEIGHT_CACHE_MB", "-3");
  SessionOptions o;
  o.log_level = LogLevel::kError;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ApplySessionEnvironment(&o, &warnings).ok());
  EXPECT_EQ(o.log_level, LogLevel::kError);
  EXPECT_EQ(o.npu.weight_cache_mb, SessionOptions().npu.weight_cache_mb);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("ONEINFER_LOG='loud'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("ONEINFER_NPU_WEIGHT_CACHE_MB='-3' is not a positive integer"), std::string::npos)
      << warnings[1];
  // No fallback: an error naming the variable.
  env.Set("ONEINFER_NPU_WAIT_TIMEOUT_MS", "soon");
  const absl::Status s = ApplySessionEnvironment(&o, &warnings);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ONEINFER_NPU_WAIT_TIMEOUT_MS='soon'"), std::string::npos) << s;
}

// Tier variables go through the tier API; ONEINFER_Q4_TIER falls back to ONEINFER_INT8_TIER.
TEST(EnvOptions, TierVariables) {
  Env env;
  UnsetAll(env);
  for (KernelFamily f : {KernelFamily::kFloat, KernelFamily::kInt8, KernelFamily::kQ4}) ResetKernelTier(f);
  const std::string best_float = ActiveKernelTierName(KernelFamily::kFloat);
  const std::string best_int8 = ActiveKernelTierName(KernelFamily::kInt8);
  const std::string best_q4 = ActiveKernelTierName(KernelFamily::kQ4);
  std::vector<std::string> warnings;

  env.Set("ONEINFER_SGEMM_TIER", "portable");
  env.Set("ONEINFER_INT8_TIER", "reference");
  ApplyTierEnvironment(&warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_STREQ(ActiveKernelTierName(KernelFamily::kFloat), "portable");
  EXPECT_STREQ(ActiveKernelTierName(KernelFamily::kInt8), "reference");
  EXPECT_STREQ(ActiveKernelTierName(KernelFamily::kQ4), "reference");  // from ONEINFER_INT8_TIER

  // ONEINFER_Q4_TIER wins over ONEINFER_INT8_TIER for the 4-bit GEMM.
  for (KernelFamily f : {KernelFamily::kFloat, KernelFamily::kInt8, KernelFamily::kQ4}) ResetKernelTier(f);
  env.Unset("ONEINFER_SGEMM_TIER");
  env.Set("ONEINFER_Q4_TIER", best_q4.c_str());
  ApplyTierEnvironment(&warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(ActiveKernelTierName(KernelFamily::kFloat), best_float);
  EXPECT_STREQ(ActiveKernelTierName(KernelFamily::kInt8), "reference");
  EXPECT_EQ(ActiveKernelTierName(KernelFamily::kQ4), best_q4);

  // Unknown: a warning naming the variable, and the best tier, as before.
  env.Set("ONEINFER_INT8_TIER", "sse9");
  env.Unset("ONEINFER_Q4_TIER");
  ApplyTierEnvironment(&warnings);
  ASSERT_EQ(warnings.size(), 2u);  // the int8 GEMM, and the 4-bit GEMM that follows it
  EXPECT_NE(warnings[0].find("ONEINFER_INT8_TIER='sse9' is not a int8 tier"), std::string::npos) << warnings[0];
  EXPECT_EQ(ActiveKernelTierName(KernelFamily::kInt8), best_int8);
  EXPECT_EQ(ActiveKernelTierName(KernelFamily::kQ4), best_q4);
  for (KernelFamily f : {KernelFamily::kFloat, KernelFamily::kInt8, KernelFamily::kQ4}) ResetKernelTier(f);
}

TEST(EnvOptions, HelpListsEveryVariableOnce) {
  const std::string help = EnvironmentHelp();
  for (const char* v : kAllVars) {
    const std::string key = std::string("  ") + v + "=";
    const size_t at = help.find(key);
    ASSERT_NE(at, std::string::npos) << v;
    EXPECT_EQ(help.find(key, at + 1), std::string::npos) << v;
  }
  EXPECT_EQ(EnvironmentVariables().size(), std::size(kAllVars));
}

// The command line: --help lists the variables; a variable reaches the command (the tier shows
// in --version; a bad value is the command's clear error).
TEST(EnvOptions, CommandLine) {
  for (const char* cmd : {"--help", "exec --help", "run --help", "inspect --help"}) {
    const testing::CliResult r = testing::RunCli(cmd);
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_NE(r.out.find("ONEINFER_QDQ=0 "), std::string::npos) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("ONEINFER_INT8_TIER=T "), std::string::npos) << cmd;
  }
  Env env;
  UnsetAll(env);
  env.Set("ONEINFER_SGEMM_TIER", "portable");
  env.Set("ONEINFER_INT8_TIER", "reference");
  testing::CliResult r = testing::RunCli("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("(kernels: float portable, int8 reference, 4-bit reference; npu: "), std::string::npos)
      << r.out;

  const std::string relu = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx";
  r = testing::RunCli("inspect " + relu);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("off at run time"), std::string::npos) << r.out;
  env.Set("ONEINFER_QDQ", "0");
  r = testing::RunCli("inspect " + relu);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("QDQ fusion (off at run time: ONEINFER_QDQ=0)"), std::string::npos) << r.out;

  env.Set("ONEINFER_NPU_WAIT_TIMEOUT_MS", "soon");
  r = testing::RunCli("exec " + relu + " --input-dir /nonexistent --output-dir /tmp/x");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("oneinfer: error: ONEINFER_NPU_WAIT_TIMEOUT_MS='soon'"), std::string::npos) << r.out;
  env.Set("ONEINFER_NPU_WAIT_TIMEOUT_MS", "100");
  env.Set("ONEINFER_LOG", "loud");
  r = testing::RunCli("exec " + relu + " --input-dir /nonexistent --output-dir /tmp/x");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("oneinfer: warning: ONEINFER_LOG='loud'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("oneinfer: error: input folder '/nonexistent' does not exist"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oneinfer::cli
