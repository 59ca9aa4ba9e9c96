// The design table (ONEINFER_NPU_DESIGNS) and instruction files: good input parses, bad input is
// a clear error or a logged host fallback, never a crash.
#include "npu/design_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "npu/design.h"
#include "npu/router.h"
#include "npu/trace.h"

namespace oneinfer::npu {
namespace {

std::string TempPath(const std::string& name) { return testing::TempDir() + "npu_dt_" + name; }

std::string WriteFile(const std::string& name, const std::string& bytes) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void HostRef(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w, int32_t* c) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int32_t{a[m * K + k]} * int32_t{w[k * N + n]};
      c[m * N + n] = acc;
    }
}

TEST(NpuShape, ParsesAndRejects) {
  auto s = ParseShape("32x1024x2048");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (GemmShape{32, 1024, 2048}));
  for (const char* bad : {"", "32x1024", "32x1024x2048x1", "32X1024X2048", "ax1x1", "0x8x16",
                          "-16x8x16", "16x8x", "16 x8x16", "99999999999x8x16", "+16x8x16"}) {
    EXPECT_FALSE(ParseShape(bad).ok()) << bad;
  }
  EXPECT_TRUE(CheckShapeRules({32, 1024, 2048}).ok());
  EXPECT_FALSE(CheckShapeRules({20, 1024, 2048}).ok());  // M % 16
  EXPECT_FALSE(CheckShapeRules({32, 1020, 2048}).ok());  // K % 8
  EXPECT_FALSE(CheckShapeRules({32, 1024, 2040}).ok());  // N % 16
}

TEST(NpuDesignTable, ParsesEntries) {
  DesignTableParse t = ParseDesignTable(
      " 32x1024x2048=/d/q.xclbin:/d/q.insts , 64x1024x1024=/d/kv.xclbin:/d/kv.bin,");
  EXPECT_TRUE(t.errors.empty());
  ASSERT_EQ(t.designs.size(), 2u);
  EXPECT_EQ(t.designs[0].shape, (GemmShape{32, 1024, 2048}));
  EXPECT_EQ(t.designs[0].xclbin_path, "/d/q.xclbin");
  EXPECT_EQ(t.designs[0].insts_path, "/d/q.insts");
  EXPECT_EQ(t.designs[1].shape, (GemmShape{64, 1024, 1024}));
  EXPECT_EQ(t.designs[1].insts_path, "/d/kv.bin");
  EXPECT_TRUE(ParseDesignTable("").designs.empty());
  EXPECT_TRUE(ParseDesignTable("").errors.empty());
}

TEST(NpuDesignTable, MalformedEntriesAreReportedAndSkipped) {
  DesignTableParse t = ParseDesignTable(
      "32x1024x2048,"                  // no '='
      "32x1024=a.xclbin:a.insts,"      // two dims
      "32x1024x2048=a.xclbin,"         // no ':'
      "32x1024x2048=:a.insts,"         // empty xclbin
      "32x1024x2048=a.xclbin:,"        // empty insts
      "20x1024x2048=a.xclbin:a.insts," // M % 16
      "32x1024x2048=ok.xclbin:ok.insts,"
      "32x1024x2048=dup.xclbin:dup.insts");  // same shape twice
  ASSERT_EQ(t.designs.size(), 1u);
  EXPECT_EQ(t.designs[0].xclbin_path, "ok.xclbin");
  ASSERT_EQ(t.errors.size(), 7u);
  EXPECT_NE(t.errors[0].find("no '='"), std::string::npos) << t.errors[0];
  EXPECT_NE(t.errors[0].find("entry 1"), std::string::npos) << t.errors[0];
  EXPECT_NE(t.errors[1].find("not MxKxN"), std::string::npos) << t.errors[1];
  EXPECT_NE(t.errors[2].find("no ':'"), std::string::npos) << t.errors[2];
  EXPECT_NE(t.errors[3].find("empty xclbin"), std::string::npos) << t.errors[3];
  EXPECT_NE(t.errors[4].find("empty instruction"), std::string::npos) << t.errors[4];
  EXPECT_NE(t.errors[5].find("M % 16"), std::string::npos) << t.errors[5];
  EXPECT_NE(t.errors[6].find("same shape"), std::string::npos) << t.errors[6];
}

TEST(NpuInstructions, HexTextAndBinary) {
  auto text = ReadInstructionFile(
      WriteFile("i.txt", "# header\n06030100\n0x00000105\n\n  FFFFFFFF  \n00000001 // tail\n"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, (std::vector<uint32_t>{0x06030100u, 0x105u, 0xFFFFFFFFu, 1u}));

  std::vector<uint32_t> words = {0x06030100u, 0xDEADBEEFu, 7u};
  std::string raw(reinterpret_cast<const char*>(words.data()), words.size() * 4);
  auto bin = ReadInstructionFile(WriteFile("i.bin", raw));
  ASSERT_TRUE(bin.ok()) << bin.status();
  EXPECT_EQ(*bin, words);
  // No telling extension: the content decides (0xDEADBEEF's bytes are not hex text).
  auto sniffed = ReadInstructionFile(WriteFile("i.insts", raw));
  ASSERT_TRUE(sniffed.ok()) << sniffed.status();
  EXPECT_EQ(*sniffed, words);
  auto sniffed_text = ReadInstructionFile(WriteFile("j.insts", "00000001\n00000002\n"));
  ASSERT_TRUE(sniffed_text.ok()) << sniffed_text.status();
  EXPECT_EQ(*sniffed_text, (std::vector<uint32_t>{1u, 2u}));
}

TEST(NpuInstructions, BadFilesAreClearErrors) {
  auto missing = ReadInstructionFile(TempPath("does_not_exist.txt"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
  auto empty = ReadInstructionFile(WriteFile("empty.txt", ""));
  EXPECT_NE(empty.status().message().find("no instructions"), std::string::npos);
  auto long_word = ReadInstructionFile(WriteFile("long.txt", "123456789\n"));
  EXPECT_NE(long_word.status().message().find("line 1"), std::string::npos);
  auto junk = ReadInstructionFile(WriteFile("junk.txt", "0000000g\n"));
  EXPECT_FALSE(junk.ok());
  auto odd = ReadInstructionFile(WriteFile("odd.bin", std::string("\x01\x02\x03", 3)));
  EXPECT_NE(odd.status().message().find("multiple of 4"), std::string::npos);
  // A directory is not a readable file.
  auto dir = ReadInstructionFile(testing::TempDir());
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos) << dir.status();
}

TEST(NpuDesignFiles, MissingOrUnreadableFilesFallBackWithANotice) {
  const std::string insts = WriteFile("ok.txt", "00000001\n");
  const std::string xclbin = WriteFile("ok.xclbin", "xclbin2");
  const std::string empty_xclbin = WriteFile("empty.xclbin", "");
  const std::string designs =
      "32x1024x2048=" + TempPath("missing.xclbin") + ":" + insts +        // missing xclbin
      ",32x1024x1024=" + xclbin + ":" + TempPath("missing.txt") +         // missing insts
      ",32x2048x1024=" + empty_xclbin + ":" + insts +                     // empty xclbin
      ",32x1024x3072=" + xclbin + ":" + WriteFile("bad.txt", "zz\n") +    // bad insts
      ",32x3072x1024=" + testing::TempDir() + ":" + insts +               // a directory
      ",bogus";                                                           // malformed
  TraceCapture capture;
  Router router(designs, [] { return absl::StatusOr<std::unique_ptr<Device>>(MakeEmulatedDevice()); });
  ASSERT_EQ(router.config_errors().size(), 6u);
  EXPECT_EQ(capture.Count("npu: "), 6);
  const auto lines = capture.lines();
  EXPECT_NE(lines[0].find("entry 6 'bogus'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("cannot open xclbin"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("cannot open instruction file"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("empty or unreadable"), std::string::npos) << lines[3];
  EXPECT_NE(lines[4].find("not one 32-bit hex word"), std::string::npos) << lines[4];
  EXPECT_NE(lines[5].find("not a regular file"), std::string::npos) << lines[5];

  // Every one of those shapes still runs, on the host, with a fallback line.
  std::vector<int8_t> a(32 * 3072, 3), w(3072 * 1024, -2);
  std::vector<int32_t> c(32 * 3072), ref(32 * 3072);
  for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024},
                      {1024, 3072}, {3072, 1024}}) {
    capture.Clear();
    ASSERT_TRUE(router.RunGemmS8(32, k, n, a.data(), w.data(), c.data(), HostRef).ok());
    HostRef(32, k, n, a.data(), w.data(), ref.data());
    EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + 32 * n, c.begin()));
    EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=" + std::to_string(k) + " n=" +
                            std::to_string(n)),
              1);
  }
  EXPECT_EQ(router.counters().fallback, 5);
  EXPECT_EQ(router.counters().device, 0);
}

}  // namespace
}  // namespace oneinfer::npu
