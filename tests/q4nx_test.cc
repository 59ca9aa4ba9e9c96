// Q4NX (quant/q4nx.h): the q4_1 chunk layout, the writer/reader round trip, bad files, the
// session's load-time binding of Q4NX weights to MatMuls, and export-qwen3 --weights q4nx
// against a float export of the dequantised weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "base/safetensors.h"
#include "oneinfer/session.h"
#include "quant/gemm_q4.h"
#include "quant/q4nx.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;
using testing::RunCli;

std::vector<float> RandomWeights(int64_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& x : w) x = dist(rng);
  return w;
}

uint16_t Bf16Bits(float f) { return F32ToBf16(f); }

// One 32 x 256 tile written byte by byte from the format's facts, not through the library.
TEST(Q4NXLayout, HandBuiltChunkDecodesByTheFormula) {
  std::vector<uint8_t> chunk(5120, 0);
  auto code_of = [](int r, int c) { return static_cast<uint8_t>((r * 7 + c * 3 + r / 5) % 16); };
  auto scale_of = [](int r, int g) { return 0.0078125f * static_cast<float>(1 + r + 32 * g); };
  auto zero_of = [](int r, int g) { return -0.5f - 0.25f * static_cast<float>(r) + static_cast<float>(g); };
  for (int g = 0; g < 8; ++g) {
    for (int r = 0; r < 32; ++r) {
      const uint16_t s = Bf16Bits(scale_of(r, g)), z = Bf16Bits(zero_of(r, g));
      std::memcpy(&chunk[2 * (g * 32 + r)], &s, 2);
      std::memcpy(&chunk[512 + 2 * (g * 32 + r)], &z, 2);
    }
  }
  for (int r = 0; r < 32; ++r) {
    for (int c = 0; c < 256; ++c) {
      const int g = c / 32, j = c % 32;
      const size_t byte = 1024 + static_cast<size_t>(((r / 16) * 8 + g) * 256 + 8 * j + (r % 16) / 2);
      chunk[byte] |= static_cast<uint8_t>(r % 2 == 0 ? code_of(r, c) : code_of(r, c) << 4);
    }
  }
  // A few positions spelled out: a byte pairs two adjacent rows at one column.
  EXPECT_EQ(q4nx::CodeIndex(0, 0), 0u);
  EXPECT_EQ(q4nx::CodeIndex(1, 0), 0u);
  EXPECT_EQ(q4nx::CodeIndex(2, 0), 1u);
  EXPECT_EQ(q4nx::CodeIndex(0, 1), 8u);
  EXPECT_EQ(q4nx::CodeIndex(0, 32), 256u);
  EXPECT_EQ(q4nx::CodeIndex(16, 0), 8u * 256u);
  EXPECT_EQ(q4nx::CodeIndex(31, 255), 4095u);
  EXPECT_EQ(chunk[1024] & 15, code_of(0, 0));  // even row: low nibble
  EXPECT_EQ(chunk[1024] >> 4, code_of(1, 0));  // the odd row after it: high nibble

  auto q = q4nx::UnpackChunks(chunk.data(), chunk.size(), 32, 256);
  ASSERT_TRUE(q.ok()) << q.status();
  for (int r = 0; r < 32; ++r) {
    for (int c = 0; c < 256; ++c) ASSERT_EQ(q->codes[r * 256 + c], code_of(r, c)) << r << "," << c;
    for (int g = 0; g < 8; ++g) {
      EXPECT_EQ(q->d[r * 8 + g], Bf16ToF32(Bf16Bits(scale_of(r, g))));
      EXPECT_EQ(q->m[r * 8 + g], Bf16ToF32(Bf16Bits(zero_of(r, g))));
    }
  }
  // Element (r, c) = code * scale + zero.
  const std::vector<float> w = q4nx::Dequantize(*q);
  EXPECT_EQ(w[5 * 256 + 70], static_cast<float>(code_of(5, 70)) * q->d[5 * 8 + 2] + q->m[5 * 8 + 2]);
  // Packing the decoded weight gives the hand-built bytes back.
  auto packed = q4nx::PackChunks(*q);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(*packed, chunk);
}

TEST(Q4NXQuantize, NearestCodeAgainstBf16ScaleAndZero) {
  const int64_t rows = 32, cols = 256;
  std::vector<float> w = RandomWeights(rows * cols, 7);
  for (int j = 0; j < 32; ++j) w[static_cast<size_t>(j)] = 0.25f;  // a constant block: scale 0
  auto q = q4nx::QuantizeQ4_1(w.data(), rows, cols);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->d[0], 0.0f);
  EXPECT_EQ(q->m[0], 0.25f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* x = w.data() + r * cols + b * 32;
      float lo = x[0], hi = x[0];
      for (int j = 0; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
      const float d = q->d[r * 8 + b], m = q->m[r * 8 + b];
      EXPECT_EQ(d, Bf16ToF32(F32ToBf16((hi - lo) / 15.0f)));
      EXPECT_EQ(m, Bf16ToF32(F32ToBf16(lo)));
      for (int j = 0; j < 32; ++j) {
        const int code = q->codes[r * cols + b * 32 + j];
        const float err = std::fabs(static_cast<float>(code) * d + m - x[j]);
        for (int other = 0; other < 16; ++other) {
          ASSERT_LE(err, std::fabs(static_cast<float>(other) * d + m - x[j]) + 1e-6f) << r << "," << b * 32 + j;
        }
      }
    }
  }
}

TEST(Q4NXFile, WriterReaderRoundTripIsBitExact) {
  const fs::path dir = testing::TempDir("q4nx_roundtrip");
  const int64_t rows = 64, cols = 512;
  const std::vector<float> w = RandomWeights(rows * cols, 11, 0.05f);
  auto q = q4nx::QuantizeQ4_1(w.data(), rows, cols);
  ASSERT_TRUE(q.ok()) << q.status();
  const std::vector<float> norm = RandomWeights(cols, 12);
  std::vector<SafetensorsOut> ts;
  auto e = q4nx::Q4_1Entry("model.layers.0.mlp.down_proj.weight", *q);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 2, 5120}));
  ts.push_back(*e);
  // The same chunks under the flat [tiles, 5120] spelling.
  ts.push_back({"flat", "U8", {4, 5120}, e->bytes});
  for (const char* dtype : {"BF16", "F32"}) {
    auto p = q4nx::PlainEntry(std::string("norm_") + dtype, dtype, {cols}, norm);
    ASSERT_TRUE(p.ok()) << p.status();
    ts.push_back(*p);
  }
  ASSERT_TRUE(q4nx::WriteQ4NX((dir / "w.q4nx").string(), ts).ok());

  auto f = q4nx::Q4NXFile::Open((dir / "w.q4nx").string());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->container().metadata().at("quant"), "q4_1");
  for (const char* name : {"model.layers.0.mlp.down_proj.weight", "flat"}) {
    auto back = (*f)->ReadQ4_1(name, rows, cols);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->codes, q->codes) << name;
    EXPECT_EQ(back->d, q->d) << name;
    EXPECT_EQ(back->m, q->m) << name;
  }
  auto bf = (*f)->ReadPlain("norm_BF16", {cols});
  auto f32 = (*f)->ReadPlain("norm_F32", {cols});
  ASSERT_TRUE(bf.ok() && f32.ok());
  EXPECT_EQ(*f32, norm);
  for (int64_t i = 0; i < cols; ++i) EXPECT_EQ((*bf)[i], Bf16ToF32(F32ToBf16(norm[i])));
  // Asked with the wrong geometry: named, with both shapes.
  auto wrong = (*f)->FindQ4_1("flat", 32, 512);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'flat' has shape [4, 5120]"), std::string::npos) << wrong.status();
  fs::remove_all(dir);
}

// Writes raw bytes as a file and returns its path.
fs::path WriteBytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}
std::string Container(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  return s + header + std::string(data_bytes, '\0');
}

TEST(Q4NXFile, BadFilesAreClearErrors) {
  const fs::path dir = testing::TempDir("q4nx_bad");
  auto open_err = [&](const std::string& tag, const std::string& bytes) {
    auto f = q4nx::Q4NXFile::Open(WriteBytes(dir / tag, bytes).string());
    return f.ok() ? std::string("ok") : std::string(f.status().message());
  };
  auto find_err = [&](const std::string& tag, const std::string& bytes, int64_t rows, int64_t cols) {
    auto f = q4nx::Q4NXFile::Open(WriteBytes(dir / tag, bytes).string());
    if (!f.ok()) return std::string(f.status().message());
    auto t = (*f)->FindQ4_1("w", rows, cols);
    return t.ok() ? std::string("ok") : std::string(t.status().message());
  };
  // A header that does not parse, and one whose length passes the end of the file.
  EXPECT_NE(open_err("h1", Container("{\"w\": [", 0)).find("bad safetensors header"), std::string::npos);
  std::string long_header = Container("{}", 0);
  long_header[0] = 100;
  EXPECT_NE(open_err("h2", long_header).find("passes the end of the file"), std::string::npos);
  EXPECT_NE(open_err("h3", "abc").find("too short"), std::string::npos);
  // Truncated: data_offsets beyond the file; a size that does not match the shape.
  EXPECT_NE(open_err("t1", Container(R"({"w":{"dtype":"U8","shape":[1,1,5120],"data_offsets":[0,5120]}})", 4000))
                .find("tensor 'w' has data offsets outside the file"),
            std::string::npos);
  EXPECT_NE(open_err("t2", Container(R"({"w":{"dtype":"U8","shape":[1,1,5120],"data_offsets":[0,5000]}})", 5000))
                .find("tensor 'w' holds 5000 bytes but U8 [1, 1, 5120] needs 5120"),
            std::string::npos);
  // Shapes and offsets that are not integers from 0 to 2^64 - 1: a number past 64 bits (which
  // nlohmann reads as a double; the fuzzer's tests/data/fuzz/safetensors/shape_past_64_bits), a
  // float, a negative one; a product past 2^64; a zero dimension after huge ones is empty.
  struct BadHeader {
    const char *name, *header;
    size_t bytes;
    const char* error;
  };
  for (const BadHeader& b : std::initializer_list<BadHeader>{
           {"s1", R"({"w":{"dtype":"I32","shape":[1,155555555555555555555555516],"data_offsets":[0,4]}})", 4, "shape holds 1.55"},
           {"s2", R"({"w":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}})", 2, "shape holds 2.5, not an integer"},
           {"s3", R"({"w":{"dtype":"U8","shape":[-2,-2],"data_offsets":[0,4]}})", 4, "shape holds -2, not an integer"},
           {"s4", R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0.0,4]}})", 4, "data_offsets holds 0.0, not an integer"},
           {"s5", R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})", 0,
            "has a shape whose size passes 2^64"},
           {"s6", R"({"w":{"dtype":"F32","shape":[4611686018427387904,2],"data_offsets":[0,0]}})", 0,
            "needs more than 2^64 bytes"}}) {
    EXPECT_NE(open_err(b.name, Container(b.header, b.bytes)).find(b.error), std::string::npos) << b.name;
  }
  EXPECT_EQ(open_err("s7", Container(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 0)), "ok");
  // Chunk kinds other than q4_1, and a size that is no kind at all.
  EXPECT_NE(find_err("k1", Container(R"({"w":{"dtype":"U8","shape":[1,1,4736],"data_offsets":[0,4736]}})", 4736), 32, 256)
                .find("'w' has Q4_K chunks (4736 bytes); only q4_1 (5120-byte chunks) is supported"),
            std::string::npos);
  EXPECT_NE(find_err("k2", Container(R"({"w":{"dtype":"U8","shape":[1,8704],"data_offsets":[0,8704]}})", 8704), 32, 256)
                .find("'w' has Q8 chunks (8704 bytes)"),
            std::string::npos);
  EXPECT_NE(find_err("k3", Container(R"({"w":{"dtype":"U8","shape":[1,4000],"data_offsets":[0,4000]}})", 4000), 32, 256)
                .find("chunks of 4000 bytes, which is no Q4NX chunk kind"),
            std::string::npos);
  EXPECT_NE(find_err("k4", Container(R"({"w":{"dtype":"BF16","shape":[32,256],"data_offsets":[0,16384]}})", 16384), 32, 256)
                .find("'w' is BF16 [32, 256], not a quantised tensor"),
            std::string::npos);
  // Geometry that is not whole tiles.
  const std::string one_tile = Container(R"({"w":{"dtype":"U8","shape":[1,1,5120],"data_offsets":[0,5120]}})", 5120);
  EXPECT_NE(find_err("g1", one_tile, 30, 256).find("rows % 32 == 0 and cols % 256 == 0"), std::string::npos);
  EXPECT_NE(find_err("g2", one_tile, 32, 200).find("rows % 32 == 0 and cols % 256 == 0"), std::string::npos);
  std::vector<float> w(30 * 256, 1.0f);
  auto q = q4nx::QuantizeQ4_1(w.data(), 30, 256);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("30 x 256"), std::string::npos) << q.status();
  fs::remove_all(dir);
}

// A graph Y = X * W with W a graph input bound from a Q4NX file.
onnx::ModelProto BoundMatMulModel(const std::string& file, int64_t M, int64_t K, int64_t N) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("X", onnx::TensorProto::FLOAT, {M, K});
  *g->add_input() = testing::TensorInfo("proj.weight", onnx::TensorProto::FLOAT, {K, N});
  *g->add_node() = testing::MakeNode("MatMul", {"X", "proj.weight"}, {"Y"}, "proj");
  *g->add_output() = testing::TensorInfo("Y", onnx::TensorProto::FLOAT, {M, N});
  auto* p = m.add_metadata_props();
  p->set_key("oneinfer.q4nx_weights");
  p->set_value(file);
  return m;
}

TEST(Q4NXBinding, SessionBindsTheWeightAndMatchesTheDequantisedProduct) {
  const fs::path dir = testing::TempDir("q4nx_bind");
  const int64_t M = 3, K = 512, N = 64;
  const std::vector<float> w = RandomWeights(N * K, 21, 0.05f);  // [out, in]
  auto q = q4nx::QuantizeQ4_1(w.data(), N, K);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q4nx::WriteQ4NX((dir / "w.q4nx").string(), {*q4nx::Q4_1Entry("proj.weight", *q)}).ok());
  testing::WriteModel(BoundMatMulModel("w.q4nx", M, K, N), dir / "m.onnx");
  auto s = Session::Load((dir / "m.onnx").string(), SessionOptions{.num_threads = 2});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ((*s)->inputs().size(), 1u);  // the weight is not the user's to feed
  EXPECT_EQ((*s)->inputs()[0].name, "X");
  const std::vector<float> x = RandomWeights(M * K, 22);
  auto y = (*s)->Run({{"X", Tensor::FromVector(DType::kFloat32, {M, K}, x)}});
  ASSERT_TRUE(y.ok()) << y.status();
  // Bit-identical to the 4-bit GEMM's oracle on the file's codes, scales and zeros.
  std::vector<float> expect(static_cast<size_t>(M * N));
  gemm_q4_reference(M, K, N, x.data(), q->codes.data(), q->d.data(), q->m.data(), expect.data());
  const float* got = (*y)[0].data<float>();
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(got[i], expect[static_cast<size_t>(i)]) << i;
  // And close to the float product of the dequantised weights (the activations go through
  // per-block int8, so not exact).
  const std::vector<float> deq = q4nx::Dequantize(*q);
  float max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x[i * K + k]) * deq[n * K + k];
      max_err = std::max(max_err, std::fabs(got[i * N + n] - static_cast<float>(ref)));
      max_ref = std::max(max_ref, std::fabs(static_cast<float>(ref)));
    }
  }
  EXPECT_LT(max_err, 1e-2f * max_ref) << max_err << " of " << max_ref;
  // Without load-time packing the kernel packs on its first run, to the same result.
  auto lazy = Session::Load((dir / "m.onnx").string(), SessionOptions{.num_threads = 2, .prepare_weights = false});
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  auto y2 = (*lazy)->Run({{"X", Tensor::FromVector(DType::kFloat32, {M, K}, x)}});
  ASSERT_TRUE(y2.ok()) << y2.status();
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ((*y2)[0].data<float>()[i], got[i]) << i;
  fs::remove_all(dir);
}

TEST(Q4NXBinding, MissingOrWrongWeightIsALoadErrorNamingIt) {
  const fs::path dir = testing::TempDir("q4nx_bind_bad");
  const std::vector<float> w = RandomWeights(64 * 256, 31);
  auto q = q4nx::QuantizeQ4_1(w.data(), 64, 256);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q4nx::WriteQ4NX((dir / "other.q4nx").string(), {*q4nx::Q4_1Entry("other.weight", *q)}).ok());
  testing::WriteModel(BoundMatMulModel("other.q4nx", 1, 256, 64), dir / "missing.onnx");
  auto s = Session::Load((dir / "missing.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("MatMul 'proj': weight 'proj.weight' [256, 64]: Q4NX file"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("no tensor 'proj.weight'"), std::string::npos) << s.status();
  // Right name, wrong size: the graph says [512, 64], the file holds 64 x 256.
  ASSERT_TRUE(q4nx::WriteQ4NX((dir / "small.q4nx").string(), {*q4nx::Q4_1Entry("proj.weight", *q)}).ok());
  testing::WriteModel(BoundMatMulModel("small.q4nx", 1, 512, 64), dir / "small.onnx");
  s = Session::Load((dir / "small.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'proj.weight' has shape [2, 1, 5120]"), std::string::npos) << s.status();
  // No such file; a path that leaves the model folder.
  testing::WriteModel(BoundMatMulModel("nope.q4nx", 1, 256, 64), dir / "nofile.onnx");
  s = Session::Load((dir / "nofile.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("nope.q4nx"), std::string::npos) << s.status();
  testing::WriteModel(BoundMatMulModel("../x.q4nx", 1, 256, 64), dir / "escape.onnx");
  s = Session::Load((dir / "escape.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("inside it"), std::string::npos) << s.status();
  fs::remove_all(dir);
}

// A random Qwen3 checkpoint at widths Q4NX tiles divide (K % 256, N % 32).
void WriteTinyQ4Checkpoint(const fs::path& dir) {
  fs::create_directories(dir);
  const int64_t V = 256, H = 256, I = 512, NH = 4, KVH = 2, D = 64, L = 2;
  nlohmann::json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", V},
                        {"hidden_size", H}, {"intermediate_size", I}, {"num_hidden_layers", L},
                        {"num_attention_heads", NH}, {"num_key_value_heads", KVH}, {"head_dim", D},
                        {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", true},
                        {"max_position_embeddings", 128}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  uint32_t seed = 100;
  std::vector<SafetensorsOut> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float stddev, float mean) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v = RandomWeights(n, seed++, stddev);
    for (float& x : v) x += mean;
    ts.push_back(*q4nx::PlainEntry(name, "F32", shape, v));
  };
  add("model.embed_tokens.weight", {V, H}, 1.0f, 0.0f);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.05f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.05f, 1.0f);
    add(p + "self_attn.q_norm.weight", {D}, 0.05f, 1.0f);
    add(p + "self_attn.k_norm.weight", {D}, 0.05f, 1.0f);
    add(p + "self_attn.q_proj.weight", {NH * D, H}, 0.0625f, 0.0f);
    add(p + "self_attn.k_proj.weight", {KVH * D, H}, 0.0625f, 0.0f);
    add(p + "self_attn.v_proj.weight", {KVH * D, H}, 0.0625f, 0.0f);
    add(p + "self_attn.o_proj.weight", {H, NH * D}, 0.0625f, 0.0f);
    add(p + "mlp.gate_proj.weight", {I, H}, 0.0625f, 0.0f);
    add(p + "mlp.up_proj.weight", {I, H}, 0.0625f, 0.0f);
    add(p + "mlp.down_proj.weight", {H, I}, 0.044f, 0.0f);
  }
  add("model.norm.weight", {H}, 0.05f, 1.0f);
  ASSERT_TRUE(WriteSafetensorsFile((dir / "model.safetensors").string(), ts).ok());
}

std::vector<float> ReadFloats(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

nlohmann::json RunJson(const std::string& args) {
  auto r = RunCli(args);
  EXPECT_EQ(r.code, 0) << r.out;
  const size_t brace = r.out.find('{');
  if (r.code != 0 || brace == std::string::npos) return {};
  return nlohmann::json::parse(r.out.substr(brace), nullptr, false);
}

TEST(Q4NXExport, Qwen3RunsAndAgreesWithAFloatGraphOfTheDequantisedWeights) {
  const fs::path dir = testing::TempDir("q4nx_qwen3");
  WriteTinyQ4Checkpoint(dir / "ckpt");
  auto r = RunCli("export-qwen3 " + (dir / "ckpt").string() + " -o " + (dir / "q" / "model.onnx").string() +
                  " --cached --weights q4nx");
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(fs::exists(dir / "q" / "model.q4nx"));

  // The float twin: the same checkpoint with every projection and the (untied) lm_head
  // replaced by the dequantised q4_1 values the reader gives.
  auto file = q4nx::Q4NXFile::Open((dir / "q" / "model.q4nx").string());
  ASSERT_TRUE(file.ok()) << file.status();
  auto ck = SafetensorsFile::Open((dir / "ckpt" / "model.safetensors").string());
  ASSERT_TRUE(ck.ok());
  std::vector<SafetensorsOut> deq;
  int quantised = 0;
  for (const auto& [name, e] : (*ck)->tensors()) {
    if (e.shape.size() == 2 && name != "model.embed_tokens.weight") {
      auto q = (*file)->ReadQ4_1(name, e.shape[0], e.shape[1]);
      ASSERT_TRUE(q.ok()) << q.status();
      deq.push_back(*q4nx::PlainEntry(name, "F32", e.shape, q4nx::Dequantize(*q)));
      ++quantised;
    } else {
      deq.push_back({name, e.dtype, e.shape, std::vector<unsigned char>(e.data, e.data + e.bytes)});
    }
  }
  EXPECT_EQ(quantised, 14);
  auto head = (*file)->ReadQ4_1("lm_head.weight", 256, 256);
  ASSERT_TRUE(head.ok()) << head.status();
  deq.push_back(*q4nx::PlainEntry("lm_head.weight", "F32", {256, 256}, q4nx::Dequantize(*head)));
  fs::create_directories(dir / "deq");
  ASSERT_TRUE(WriteSafetensorsFile((dir / "deq" / "model.safetensors").string(), deq).ok());
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir / "ckpt" / "config.json"));
  cfg["tie_word_embeddings"] = false;
  std::ofstream(dir / "deq" / "config.json") << cfg.dump();
  r = RunCli("export-qwen3 " + (dir / "deq").string() + " -o " + (dir / "f" / "model.onnx").string() + " --cached");
  ASSERT_EQ(r.code, 0) << r.out;

  const std::string run_args = " --prompt-ids 5,17,200,3,99,42 -n 8 --threads 2 --json --dump-logits ";
  const nlohmann::json jq = RunJson("run " + (dir / "q" / "model.onnx").string() + run_args + (dir / "q.bin").string());
  const nlohmann::json jf = RunJson("run " + (dir / "f" / "model.onnx").string() + run_args + (dir / "f.bin").string());
  ASSERT_TRUE(jq.contains("generated_ids") && jf.contains("generated_ids")) << jq.dump() << jf.dump();
  EXPECT_EQ(jq["generated_ids"].size(), 8u);
  EXPECT_EQ(jq["generated_ids"], jf["generated_ids"]);
  const std::vector<float> lq = ReadFloats(dir / "q.bin"), lf = ReadFloats(dir / "f.bin");
  ASSERT_EQ(lq.size(), lf.size());
  ASSERT_EQ(lq.size(), 8u * 256u);
  float max_err = 0, max_abs = 0;
  for (size_t i = 0; i < lq.size(); ++i) {
    max_err = std::max(max_err, std::fabs(lq[i] - lf[i]));
    max_abs = std::max(max_abs, std::fabs(lf[i]));
  }
  EXPECT_GT(max_abs, 0.1f);
  // The 4-bit GEMM quantises activations per block of 32 to int8, the float twin does not: a
  // fraction of a percent (0.57 % seen); a wrong nibble, row or block would be tens of percent.
  EXPECT_LT(max_err, 2e-2f * max_abs) << max_err << " of " << max_abs;

  // The same file less one projection: run fails at load with one line naming it.
  std::vector<SafetensorsOut> fewer;
  for (const auto& [name, e] : (*file)->container().tensors()) {
    if (name != "model.layers.1.mlp.down_proj.weight") fewer.push_back({name, e.dtype, e.shape, std::vector<unsigned char>(e.data, e.data + e.bytes)});
  }
  ASSERT_TRUE(q4nx::WriteQ4NX((dir / "q" / "model.q4nx").string(), fewer).ok());
  r = RunCli("run " + (dir / "q" / "model.onnx").string() + " --prompt-ids 1,2 -n 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("weight 'model.layers.1.mlp.down_proj.weight' [512, 256]: Q4NX file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no tensor 'model.layers.1.mlp.down_proj.weight'"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Q4NXExport, BadWeightsOptionAndUntileableWidthsAreErrors) {
  const fs::path dir = testing::TempDir("q4nx_export_bad");
  auto r = RunCli("export-qwen3 --random tiny --seed 1 -o " + (dir / "ckpt").string());
  ASSERT_EQ(r.code, 0) << r.out;
  r = RunCli("export-qwen3 " + (dir / "ckpt").string() + " -o " + (dir / "m" / "model.onnx").string() + " --weights int3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--weights takes float, int8, int4 or q4nx, not 'int3'"), std::string::npos) << r.out;
  // The tiny architecture is 64 wide: not whole 32 x 256 tiles.
  r = RunCli("export-qwen3 " + (dir / "ckpt").string() + " -o " + (dir / "m" / "model.onnx").string() + " --weights q4nx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("tensor 'model.layers.0.self_attn.q_proj.weight': the weight is 64 x 64"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace oneinfer
