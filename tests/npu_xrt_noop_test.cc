// The XRT backend against XRT itself, without hardware.
//
// XRT itself reads XCL_EMULATION_MODE and XILINX_XRT once per process, so each scenario runs in a
// child process (this test binary re-executed with --gtest_filter and XRT's environment; the
// library reads no variable: the routers are built from RouterConfig, as a session builds its own
// from SessionOptions::npu):
//  - noop shim (XCL_EMULATION_MODE=noop, XILINX_XRT=<dir whose lib/ is the XRT libraries>): device
//    open, load of an xclbin this file generates, buffer allocation and syncs, launch and wait.
//    The noop shim runs no kernel code, so the numbers are not checked here (emulation does that).
//  - no XRT environment, and XILINX_XRT without a device: no device, so the router runs every call
//    on the host and says so once.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "npu/design.h"
#include "npu/device.h"
#include "npu/router.h"
#include "npu/trace.h"

extern char** environ;

namespace oneinfer::npu {
namespace {

// ---- A minimal xclbin, written from the layout in XRT's xclbin.h (axlf format). ----
// Offsets are spelled out rather than taken from XRT's structs so this file needs no XRT headers.
class Bytes {
 public:
  explicit Bytes(size_t n = 0) : b_(n, 0) {}
  void U8(size_t at, uint8_t v) { b_.at(at) = v; }
  void U16(size_t at, uint16_t v) { Raw(at, &v, 2); }
  void U32(size_t at, uint32_t v) { Raw(at, &v, 4); }
  void U64(size_t at, uint64_t v) { Raw(at, &v, 8); }
  void Str(size_t at, const std::string& s, size_t cap) {
    ASSERT_LT(s.size(), cap);
    Raw(at, s.data(), s.size());
  }
  void Raw(size_t at, const void* p, size_t n) {
    ASSERT_LE(at + n, b_.size());
    std::memcpy(b_.data() + at, p, n);
  }
  std::vector<char>& data() { return b_; }

 private:
  std::vector<char> b_;
};

constexpr uint32_t kEmbeddedMetadata = 2, kMemTopology = 6, kConnectivity = 7, kIpLayout = 8;
constexpr size_t kAxlfHeaderAt = 304, kSectionsAt = 456, kSectionHeaderSize = 40;

// EMBEDDED_METADATA naming `kernel` with the six arguments of mlir-aie's MLIR_AIE kernel:
// opcode (scalar), instr (global), ninstr (scalar), bo0, bo1, bo2 (global).
std::string KernelXml(const std::string& kernel) {
  std::string x =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<project name=\"oneinfer_noop\">\n"
      " <platform vendor=\"oneinfer\" boardid=\"noop\" name=\"noop\" featureRomTime=\"0\">\n"
      "  <version major=\"1\" minor=\"0\"/>\n"
      "  <device name=\"fpga0\" fpgaDevice=\"\" addrWidth=\"0\">\n"
      "   <core name=\"OCL_REGION_0\" target=\"bitstream\" type=\"clc_region\" "
      "clockFreq=\"0MHz\" numComputeUnits=\"1\">\n"
      "    <kernel name=\"" + kernel + "\" language=\"c\" vlnv=\"\" "
      "preferredWorkGroupSizeMultiple=\"1\" workGroupSize=\"1\" debug=\"false\" "
      "interrupt=\"true\" hwControlProtocol=\"ap_ctrl_hs\">\n"
      "     <port name=\"S_AXI_CONTROL\" mode=\"slave\" range=\"0x1000\" dataWidth=\"32\" "
      "portType=\"addressable\" base=\"0x0\"/>\n";
  struct Arg {
    const char *name, *qualifier, *size, *offset, *type;
  };
  const Arg args[] = {{"opcode", "0", "0x8", "0x10", "uint64_t"},
                      {"instr", "1", "0x8", "0x18", "char *"},
                      {"ninstr", "0", "0x4", "0x20", "uint32_t"},
                      {"bo0", "1", "0x8", "0x24", "void*"},
                      {"bo1", "1", "0x8", "0x2c", "void*"},
                      {"bo2", "1", "0x8", "0x34", "void*"}};
  int id = 0;
  for (const Arg& a : args) {
    absl::StrAppend(&x, "     <arg name=\"", a.name, "\" addressQualifier=\"", a.qualifier,
                    "\" id=\"", id++, "\" port=\"S_AXI_CONTROL\" size=\"", a.size,
                    "\" offset=\"", a.offset, "\" hostOffset=\"0x0\" hostSize=\"", a.size,
                    "\" type=\"", a.type, "\"/>\n");
  }
  absl::StrAppend(&x,
                  "     <instance name=\"MLIRAIE\">\n"
                  "      <addrRemap base=\"0x1800000\" range=\"0x1000\" port=\"S_AXI_CONTROL\"/>\n"
                  "     </instance>\n"
                  "    </kernel>\n"
                  "   </core>\n"
                  "  </device>\n"
                  " </platform>\n"
                  "</project>\n");
  return x;
}

// IP_LAYOUT (one kernel CU), MEM_TOPOLOGY (one HOST bank), CONNECTIVITY (the four buffer args
// on that bank), EMBEDDED_METADATA (the kernel and its arguments).
std::vector<char> MinimalXclbin(const std::string& kernel) {
  std::vector<std::pair<uint32_t, std::vector<char>>> sections;
  {
    Bytes s(8 + 40);  // mem_topology: m_count, pad, one mem_data
    s.U32(0, 1);
    s.U8(8 + 0, 10);  // m_type = MEM_HOST
    s.U8(8 + 1, 1);   // m_used
    s.U64(8 + 8, 64 * 1024);       // m_size, KB
    s.U64(8 + 16, 0x4000000ULL);   // m_base_address
    s.Str(8 + 24, "HOST", 16);     // m_tag
    sections.emplace_back(kMemTopology, s.data());
  }
  {
    Bytes s(8 + 80);  // ip_layout: m_count, pad, one ip_data
    s.U32(0, 1);
    s.U32(8 + 0, 1);                   // m_type = IP_KERNEL
    s.U32(8 + 4, 0);                   // properties: AP_CTRL_HS, no interrupt id
    s.U64(8 + 8, 0x1800000);           // m_base_address
    s.Str(8 + 16, kernel + ":MLIRAIE", 64);
    sections.emplace_back(kIpLayout, s.data());
  }
  {
    const int32_t buffer_args[] = {1, 3, 4, 5};
    Bytes s(4 + 4 * 12);  // connectivity: m_count, connections of 3 x int32
    s.U32(0, 4);
    for (int i = 0; i < 4; ++i) {
      s.U32(4 + 12 * i + 0, buffer_args[i]);  // arg_index
      s.U32(4 + 12 * i + 4, 0);               // m_ip_layout_index
      s.U32(4 + 12 * i + 8, 0);               // mem_data_index
    }
    sections.emplace_back(kConnectivity, s.data());
  }
  {
    const std::string xml = KernelXml(kernel);
    sections.emplace_back(kEmbeddedMetadata, std::vector<char>(xml.begin(), xml.end()));
  }

  auto align8 = [](size_t v) { return (v + 7) & ~size_t{7}; };
  size_t at = align8(kSectionsAt + kSectionHeaderSize * sections.size());
  std::vector<size_t> offsets;
  for (auto& [kind, body] : sections) {
    offsets.push_back(at);
    at = align8(at + body.size());
  }
  Bytes f(at);
  f.Raw(0, "xclbin2", 8);            // m_magic
  f.U32(8, 0xFFFFFFFFu);             // m_signature_length = -1: unsigned
  for (size_t i = 0; i < 28; ++i) f.U8(12 + i, 0xFF);  // reserved
  const size_t h = kAxlfHeaderAt;
  f.U64(h + 0, at);                  // m_length
  f.U8(h + 26, 2);                   // m_versionMajor
  f.U8(h + 27, 13);                  // m_versionMinor
  f.U16(h + 28, 0);                  // m_mode = XCLBIN_FLAT
  for (int i = 0; i < 16; ++i) f.U8(h + 112 + i, static_cast<uint8_t>(0xA0 + i));  // uuid
  f.U32(h + 144, static_cast<uint32_t>(sections.size()));  // m_numSections
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t sh = kSectionsAt + kSectionHeaderSize * i;
    f.U32(sh + 0, sections[i].first);
    f.Str(sh + 4, absl::StrCat("oneinfer", i), 16);
    f.U64(sh + 24, offsets[i]);
    f.U64(sh + 32, sections[i].second.size());
    f.Raw(offsets[i], sections[i].second.data(), sections[i].second.size());
  }
  return f.data();
}

void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void HostRef(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w, int32_t* c) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int32_t{a[m * K + k]} * int32_t{w[k * N + n]};
      c[m * N + n] = acc;
    }
}

std::vector<int8_t> RandomInt8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(dist(rng));
  return v;
}

// ---- Child processes ----
constexpr char kChildVar[] = "ONEINFER_NPU_TEST_CHILD";

bool InChild() { return std::getenv(kChildVar) != nullptr; }

struct ChildResult {
  int exit_code = -1;
  std::string output;
};

// Re-runs this binary on one test, with `set` added to and `unset` removed from the environment.
ChildResult RunInChild(const std::string& test, const std::map<std::string, std::string>& set,
                       const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool drop = set.count(key) > 0 || key == kChildVar;
    for (const std::string& u : unset) drop = drop || key == u;
    if (!drop) env.push_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  env.push_back(std::string(kChildVar) + "=1");
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=" + test;
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, filter.data(), nullptr};

  ChildResult r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// A folder whose lib/ is Debian's XRT library folder: XILINX_XRT for the noop shim. Removed when
// the test ends.
class NoopXrtRoot {
 public:
  NoopXrtRoot() : root_(testing::TempDir() + "npu_noop_xrt_" + std::to_string(getpid())) {
    mkdir(root_.c_str(), 0755);
    const std::string lib = root_ + "/lib";
    unlink(lib.c_str());
    EXPECT_EQ(symlink("/usr/lib/x86_64-linux-gnu", lib.c_str()), 0) << lib;
  }
  ~NoopXrtRoot() {
    unlink((root_ + "/lib").c_str());
    rmdir(root_.c_str());
  }
  const std::string& path() const { return root_; }

 private:
  std::string root_;
};

struct Files {
  std::string dir, xclbin, other_kernel, garbage, insts;
  Files() {
    dir = testing::TempDir() + "npu_noop_" + std::to_string(getpid()) + "_";
    xclbin = dir + "gemm.xclbin";
    other_kernel = dir + "other.xclbin";
    garbage = dir + "garbage.xclbin";
    insts = dir + "gemm.txt";
    WriteBytes(xclbin, MinimalXclbin("MLIR_AIE"));
    WriteBytes(other_kernel, MinimalXclbin("vadd"));
    WriteBytes(garbage, std::vector<char>(600, 'z'));
    std::ofstream(insts) << "06030100\n00000105\n00000001\n00000000\n";
  }
  ~Files() {
    for (const std::string* p : {&xclbin, &other_kernel, &garbage, &insts}) unlink(p->c_str());
  }
};

// ---- Scenarios (run in the child) ----

// A router on the XRT backend, configured as a session configures its own.
RouterConfig XrtConfig(const std::string& designs) {
  RouterConfig config;
  config.designs = designs;
  config.backend = Backend::kXrt;
  config.wait_timeout_ms = 5000;
  return config;
}

void NoopScenario() {
  Files files;
  auto device = OpenXrtDevice(5000);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ((*device)->name(), "xrt");

  // The shared layer over real XRT: load, allocate, fill and sync the instruction buffer.
  auto design = Design::Prepare(**device, {{32, 64, 32}, files.xclbin, files.insts}, 1 << 20);
  ASSERT_TRUE(design.ok()) << design.status();
  const auto a = RandomInt8(40 * 64, 1);
  const auto w = RandomInt8(64 * 32, 2);
  std::vector<int32_t> c(40 * 32, 7);
  Sections s;
  // 40 rows on an M=32 design: two launches (32 + 8 padded), each write+sync, launch, wait, sync
  // back, read.
  ASSERT_TRUE((*design)->Run(a.data(), 40, 64, 32, w.data(), c.data(), &s).ok());
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.launches, 2);
  EXPECT_EQ(s.weight_uploads, 1);
  // The noop shim runs no kernel: C comes back as the zeroed buffer it was.
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](int32_t v) { return v == 0; }));
  Sections again;
  ASSERT_TRUE((*design)->Run(a.data(), 32, 64, 32, w.data(), c.data(), &again).ok());
  EXPECT_EQ(again.weight_uploads, 0);  // weight buffer reused
  EXPECT_EQ(again.launches, 1);
  std::printf("noop sections: %s\n", (s += again).ToString().c_str());

  // The router over real XRT: 32 rows go to the device (no host line), 5 rows stay on the host.
  {
    TraceCapture capture;
    Router router(XrtConfig(absl::StrCat("32x64x32=", files.xclbin, ":", files.insts)));
    ASSERT_TRUE(router.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
    ASSERT_TRUE(router.RunGemmS8(5, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
    EXPECT_EQ(capture.Count("npu_qdq_device m=32 k=64 n=32 design=32x64x32"), 1);
    EXPECT_EQ(capture.Count("npu_qdq_host_rows m=5 k=64 n=32 min=16"), 1);
    EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0);
    EXPECT_EQ(capture.Count("npu: "), 0);
  }

  // Bad xclbins are errors, not crashes.
  auto no_kernel = Design::Prepare(**device, {{32, 64, 32}, files.other_kernel, files.insts}, 1);
  EXPECT_EQ(no_kernel.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_kernel.status().message().find("no kernel named MLIR_AIE"), std::string::npos)
      << no_kernel.status();
  auto garbage = Design::Prepare(**device, {{32, 64, 32}, files.garbage, files.insts}, 1);
  EXPECT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("XRT: loading"), std::string::npos)
      << garbage.status();
  std::printf("garbage xclbin: %s\n", garbage.status().ToString().c_str());

  // And through the router: a notice, then the host.
  TraceCapture capture;
  Router router(XrtConfig(absl::StrCat("32x64x32=", files.garbage, ":", files.insts)));
  std::vector<int32_t> ref(32 * 32);
  HostRef(32, 64, 32, a.data(), w.data(), ref.data());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(router.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
    EXPECT_TRUE(std::equal(ref.begin(), ref.end(), c.begin()));
  }
  EXPECT_EQ(capture.Count("npu: design 32x64x32"), 1);
  EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=64 n=32"), 2);
}

void NoDeviceScenario(const char* expected_reason) {
  Files files;
  auto device = OpenXrtDevice();
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(device.status().message().find(expected_reason), std::string::npos)
      << device.status();

  TraceCapture capture;
  Router router(XrtConfig(absl::StrCat("32x64x32=", files.xclbin, ":", files.insts)));
  const auto a = RandomInt8(32 * 64, 1);
  const auto w = RandomInt8(64 * 32, 2);
  std::vector<int32_t> c(32 * 32), ref(32 * 32);
  HostRef(32, 64, 32, a.data(), w.data(), ref.data());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(router.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
    EXPECT_EQ(c, ref);
  }
  EXPECT_EQ(capture.Count("npu: no NPU device ("), 1);
  EXPECT_EQ(capture.Count("npu: "), 1);
  EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=64 n=32"), 4);
}

// ---- Tests ----

TEST(NpuXclbin, MinimalXclbinHasTheAxlfLayout) {
  std::vector<char> x = MinimalXclbin("MLIR_AIE");
  ASSERT_GT(x.size(), 496u);
  EXPECT_EQ(std::string(x.data()), "xclbin2");
  uint64_t length;
  std::memcpy(&length, x.data() + kAxlfHeaderAt, 8);
  EXPECT_EQ(length, x.size());
  uint32_t sections;
  std::memcpy(&sections, x.data() + kAxlfHeaderAt + 144, 4);
  EXPECT_EQ(sections, 4u);
}

TEST(NpuXrtNoop, OpensLoadsAllocatesSyncsAndLaunches) {
  if (!XrtCompiledIn()) GTEST_SKIP() << "built without XRT";
  if (InChild()) return NoopScenario();
  NoopXrtRoot root;
  ChildResult r = RunInChild("NpuXrtNoop.OpensLoadsAllocatesSyncsAndLaunches",
                             {{"XCL_EMULATION_MODE", "noop"}, {"XILINX_XRT", root.path()}}, {});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

TEST(NpuXrtNoDevice, WithoutXrtEnvironmentRunsOnTheHostWithOneNotice) {
  if (InChild()) {
    return NoDeviceScenario(XrtCompiledIn() ? "XILINX_XRT not set" : "this build has no XRT");
  }
  ChildResult r = RunInChild("NpuXrtNoDevice.WithoutXrtEnvironmentRunsOnTheHostWithOneNotice", {},
                             {"XILINX_XRT", "XCL_EMULATION_MODE"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

TEST(NpuXrtNoDevice, WithXrtButNoDeviceRunsOnTheHostWithOneNotice) {
  if (!XrtCompiledIn()) GTEST_SKIP() << "built without XRT";
  if (InChild()) return NoDeviceScenario("Could not open device");
  NoopXrtRoot root;
  ChildResult r = RunInChild("NpuXrtNoDevice.WithXrtButNoDeviceRunsOnTheHostWithOneNotice",
                             {{"XILINX_XRT", root.path()}}, {"XCL_EMULATION_MODE"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace oneinfer::npu
