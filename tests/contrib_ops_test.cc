// com.microsoft operators of optimum / onnxruntime-genai LLM files, through the real session.
// ONNX Runtime parity of the same operators: tests/contrib_ort_parity.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/kernel_tier.h"
#include "ops/contrib_attention.h"
#include "ops/contrib_matmul_nbits.h"
#include "quant/gemm_q4.h"
#include "tests/op_harness.h"

namespace oneinfer::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kMs[] = "com.microsoft";

// A model of one node `n` whose inputs listed in `inits` are initializers and the others graph
// inputs of the types in `feeds`; outputs are declared with `out_types`.
absl::StatusOr<std::unique_ptr<SessionImpl>> LoadNode(Node n, const std::vector<std::pair<std::string, Tensor>>& inits,
                                                      const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                      const std::vector<DType>& out_types, int threads = 1) {
  auto model = std::make_unique<Model>();
  Graph& g = model->graph;
  g.name = "test";
  g.opsets[""] = kNewestOpset;
  g.opsets[kMs] = 1;
  for (const auto& [name, t] : inits) g.initializers[name] = t;
  for (const auto& [name, t] : feeds) {
    TypeInfo ti;
    ti.kind = TypeInfo::Kind::kTensor;
    ti.elem = t.dtype();
    g.inputs.push_back(ValueInfo{name, ti});
  }
  for (size_t i = 0; i < out_types.size(); ++i) {
    n.outputs.push_back("out" + std::to_string(i));
    TypeInfo ti;
    ti.kind = TypeInfo::Kind::kTensor;
    ti.elem = out_types[i];
    g.outputs.push_back(ValueInfo{n.outputs.back(), ti});
  }
  g.nodes.push_back(std::move(n));
  SessionOptions opts;
  opts.num_threads = threads;
  return SessionImpl::Create(std::move(model), opts);
}

absl::StatusOr<std::vector<Tensor>> RunNode(const Node& n, const std::vector<std::pair<std::string, Tensor>>& inits,
                                            const std::vector<std::pair<std::string, Tensor>>& feeds,
                                            const std::vector<DType>& out_types, int threads = 1) {
  auto s = LoadNode(n, inits, feeds, out_types, threads);
  if (!s.ok()) return s.status();
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [name, t] : feeds) values.emplace_back(name, Value::FromTensor(t));
  auto r = (*s)->RunValues(values);
  if (!r.ok()) return r.status();
  std::vector<Tensor> out;
  for (Value& v : *r) out.push_back(std::move(v.tensor));
  return out;
}


// ---------------------------------------------------------------------------------------------
// MatMulNBits

enum class Zp { kNone, kPacked, kFloat };

// A MatMulNBits node with random codes, scales and zero points in the operator's layouts.
struct NBitsCase {
  int64_t M = 3, K = 64, N = 16, bits = 4, bs = 32;
  Zp zp = Zp::kNone;
  bool two_d = false, bias = false;
  uint32_t seed = 1;

  int64_t blocks() const { return (K + bs - 1) / bs; }
  int64_t zp_row() const { return (blocks() * bits + 7) / 8; }

  // codes N x blocks*bs (0 past K), scales and float zero points N x blocks, packed zero points.
  std::vector<uint8_t> q, zq;
  std::vector<float> s, zf, a, b;

  Tensor blob, scales, zero_points, A, bias_t;
  int64_t level = -1;  // accuracy_level (-1: absent, as 0)

  void Make() {
    std::mt19937 rng(seed);
    const int64_t nb = blocks(), kb = nb * bs;
    q.assign(N * kb, 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) q[n * kb + k] = static_cast<uint8_t>(rng() % (1u << bits));
    s.resize(N * nb);
    zq.resize(N * nb);
    zf.resize(N * nb);
    std::uniform_real_distribution<float> us(0.002f, 0.02f), ua(-1.f, 1.f), uh(-0.5f, 0.5f);
    for (int64_t i = 0; i < N * nb; ++i) {
      s[i] = us(rng);
      zq[i] = static_cast<uint8_t>(rng() % (1u << bits));
      zf[i] = zq[i] + uh(rng);
    }
    const int64_t blob_bytes = bs * bits / 8;
    blob = Tensor::Empty(DType::kUInt8, {N, nb, blob_bytes});
    uint8_t* bp = blob.data<uint8_t>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < kb; ++k) {
        if (bits == 8) bp[n * kb + k] = q[n * kb + k];
        else if (k % 2 == 0) bp[(n * kb + k) / 2] = q[n * kb + k];
        else bp[(n * kb + k) / 2] |= static_cast<uint8_t>(q[n * kb + k] << 4);
      }
    Shape sshape = two_d ? Shape{N, nb} : Shape{N * nb};
    scales = Tensor::FromVector(DType::kFloat32, sshape, s);
    if (zp == Zp::kFloat) zero_points = Tensor::FromVector(DType::kFloat32, sshape, zf);
    if (zp == Zp::kPacked) {
      const int64_t row = zp_row();
      zero_points = Tensor::Empty(DType::kUInt8, two_d ? Shape{N, row} : Shape{N * row});
      std::memset(zero_points.raw_data(), 0, N * row);
      uint8_t* zp8 = zero_points.data<uint8_t>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t blk = 0; blk < nb; ++blk) {
          const int64_t bit = blk * bits;
          zp8[n * row + bit / 8] |= static_cast<uint8_t>(zq[n * nb + blk] << (bit % 8));
        }
    }
    a.resize(M * K);
    for (float& v : a) v = ua(rng);
    A = Tensor::FromVector(DType::kFloat32, {M, K}, a);
    b.resize(N);
    for (float& v : b) v = ua(rng);
    bias_t = Tensor::FromVector(DType::kFloat32, {N}, b);
  }

  float ZeroPoint(int64_t n, int64_t blk) const {
    if (zp == Zp::kNone) return static_cast<float>(1 << (bits - 1));
    return zp == Zp::kFloat ? zf[n * blocks() + blk] : static_cast<float>(zq[n * blocks() + blk]);
  }

  Node MakeNode(int64_t accuracy_level = -1) const {
    Node n;
    n.name = "mmnb";
    n.op_type = "MatMulNBits";
    n.domain = kMs;
    for (const Attribute& at : {IntAttr("K", K), IntAttr("N", N), IntAttr("bits", bits), IntAttr("block_size", bs)})
      n.attrs[at.name] = at;
    if (accuracy_level >= 0) n.attrs["accuracy_level"] = IntAttr("accuracy_level", accuracy_level);
    n.inputs = {"A", "B", "scales", zp == Zp::kNone ? "" : "zero_points"};
    if (bias) n.inputs.insert(n.inputs.end(), {"", "bias"});
    return n;
  }
  std::vector<std::pair<std::string, Tensor>> Inits() const {
    std::vector<std::pair<std::string, Tensor>> v = {{"B", blob}, {"scales", scales}};
    if (zp != Zp::kNone) v.emplace_back("zero_points", zero_points);
    return v;
  }
  std::vector<std::pair<std::string, Tensor>> Feeds() const {
    std::vector<std::pair<std::string, Tensor>> v = {{"A", A}};
    if (bias) v.emplace_back("bias", bias_t);
    return v;
  }
  absl::StatusOr<std::vector<Tensor>> Run(int threads = 1) const {
    return RunNode(MakeNode(level), Inits(), Feeds(), {A.dtype()}, threads);
  }

  // The expected fast-path output: gemm_q4_reference (accuracy_level 4: int8 activations) or
  // gemm_q4_float_reference (levels 0-3) on the codes laid out on the GEMM's K axis (a 16-block
  // alone in a 32-block; K padded to 32) with d = s, m = -zp * s, A spread the same way.
  std::vector<float> Q4GemmExpected(bool int8_activations) const {
    const int64_t nb = blocks(), kb = nb * bs;
    const int64_t kp = bs == 16 ? nb * 32 : (K + 31) / 32 * 32, gb = kp / 32;
    auto pos = [&](int64_t k) { return bs == 16 ? k / 16 * 32 + k % 16 : k; };
    std::vector<uint8_t> codes(N * kp, 0);
    std::vector<float> d(N * gb), m(N * gb), ax(M * kp, 0.f), y(M * N);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) codes[n * kp + pos(k)] = q[n * kb + k];
      for (int64_t j = 0; j < gb; ++j) {
        const int64_t src = bs == 16 ? j : j * 32 / bs;
        d[n * gb + j] = s[n * nb + src];
        m[n * gb + j] = -ZeroPoint(n, src) * s[n * nb + src];
      }
    }
    for (int64_t r = 0; r < M; ++r)
      for (int64_t k = 0; k < K; ++k) ax[r * kp + pos(k)] = a[r * K + k];
    if (int8_activations)
      gemm_q4_reference(M, kp, N, ax.data(), codes.data(), d.data(), m.data(), y.data());
    else
      gemm_q4_float_reference(M, kp, N, ax.data(), codes.data(), d.data(), m.data(), y.data());
    if (bias)
      for (int64_t r = 0; r < M; ++r)
        for (int64_t n = 0; n < N; ++n) y[r * N + n] += b[n];
    return y;
  }
};

TEST(ContribMatMulNBits, FourBitIsTheQ4GemmBitForBitAtEveryBlockSizeAndTileEdge) {
  int cases = 0;
  for (int64_t level : {-1, 4})
  for (int64_t bs : {16, 32, 64, 128, 256})
    for (int64_t K : {int64_t{256}, int64_t{72}, int64_t{40}})
      for (int64_t N : {1, 15, 16, 17, 33})
        for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat}) {
          NBitsCase c;
          c.M = (N % 2) ? 1 : 5;
          c.K = K;
          c.N = N;
          c.bs = bs;
          c.zp = zp;
          c.two_d = N == 17;
          c.bias = N == 33;
          c.seed = static_cast<uint32_t>(bs * 1000 + K * 10 + N + static_cast<int>(zp));
          c.level = level;
          c.Make();
          auto y = c.Run(N == 16 ? 3 : 1);
          ASSERT_TRUE(y.ok()) << y.status();
          const std::vector<float> want = c.Q4GemmExpected(level == 4);
          ASSERT_EQ((*y)[0].num_elements(), static_cast<int64_t>(want.size()));
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ((*y)[0].data<float>()[i], want[i]) << "level " << level << " bs " << bs << " K " << K
                                                         << " N " << N << " zp " << static_cast<int>(zp) << " at " << i;
          ++cases;
        }
  EXPECT_EQ(cases, 450);
}

TEST(ContribMatMulNBits, EveryQ4TierGivesTheSameBits) {
  NBitsCase c;
  c.M = 7;
  c.K = 200;
  c.N = 40;
  c.bs = 16;
  c.zp = Zp::kPacked;
  c.Make();
  for (int64_t level : {0, 4}) {
    c.level = level;
    const std::vector<float> want = c.Q4GemmExpected(level == 4);
    for (const std::string& tier : SupportedKernelTiers(KernelFamily::kQ4)) {
      ASSERT_TRUE(SetKernelTier(KernelFamily::kQ4, tier));
      auto y = c.Run(2);
      ASSERT_TRUE(y.ok()) << y.status();
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ((*y)[0].data<float>()[i], want[i]) << tier << " level " << level << " at " << i;
    }
  }
  ResetKernelTier(KernelFamily::kQ4);
}

// The fast path against the float reference: at accuracy_level 4 within the int8 activation
// rounding, sum_k |w_k| * amax(block of k) / 254, plus float accumulation; below it float
// accumulation alone.
TEST(ContribMatMulNBits, FastPathIsWithinTheActivationRoundingOfTheFloatReference) {
  for (int64_t level : {0, 4})
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 64, 256})
      for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat}) {
        NBitsCase c;
        c.M = 4;
        c.K = 300;
        c.N = 24;
        c.bits = bits;
        c.bs = bs;
        c.zp = zp;
        c.bias = true;
        c.seed = static_cast<uint32_t>(bits * 7 + bs + static_cast<int>(zp));
        c.level = level;
        c.Make();
        auto w = CheckNBitsWeights("test", c.K, c.N, bits, bs, c.blob, c.scales,
                                   zp == Zp::kNone ? nullptr : &c.zero_points);
        ASSERT_TRUE(w.ok()) << w.status();
        std::vector<float> ref(c.M * c.N);
        MatMulNBitsReference(c.M, c.a.data(), *w, c.b.data(), ref.data());
        auto y = c.Run();
        ASSERT_TRUE(y.ok()) << y.status();
        const int64_t qb = bs == 16 ? 16 : 32;
        for (int64_t r = 0; r < c.M; ++r)
          for (int64_t n = 0; n < c.N; ++n) {
            double bound = 0, mag = 0;
            for (int64_t k = 0; k < c.K; ++k) {
              const int64_t blk = k / bs;
              const double wk = (static_cast<double>(w->Code(n, k)) - w->ZeroPoint(n, blk)) * w->Scale(n, blk);
              double amax = 0;
              for (int64_t j = k / qb * qb; j < std::min(c.K, k / qb * qb + qb); ++j)
                amax = std::max(amax, std::fabs(static_cast<double>(c.a[r * c.K + j])));
              if (bits == 4 && level == 4) bound += std::fabs(wk) * amax / 254;
              mag += std::fabs(c.a[r * c.K + k]) * (w->Code(n, k) + std::fabs(w->ZeroPoint(n, blk))) * w->Scale(n, blk);
            }
            bound += 1e-6 * mag + 1e-6;
            EXPECT_NEAR((*y)[0].data<float>()[r * c.N + n], ref[r * c.N + n], bound)
                << "level " << level << " bits " << bits << " bs " << bs << " zp " << static_cast<int>(zp) << " r " << r
                << " n " << n;
          }
      }
}

// float16 A and scales: the float32 computation on the same (widened) values, rounded once.
TEST(ContribMatMulNBits, Float16IsTheFloat32ResultRoundedOnce) {
  for (int64_t bits : {4, 8})
    for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat}) {
      NBitsCase c;
      c.M = 3;
      c.K = 96;
      c.N = 20;
      c.bits = bits;
      c.bs = 32;
      c.zp = zp;
      c.bias = true;
      c.seed = static_cast<uint32_t>(bits + 11 * static_cast<int>(zp));
      c.Make();
      NBitsCase h = c;
      h.A = ToF16(c.A);
      h.scales = ToF16(c.scales);
      h.bias_t = ToF16(c.bias_t);
      if (zp == Zp::kFloat) h.zero_points = ToF16(c.zero_points);
      NBitsCase f = c;  // float32 on the float16 values
      f.A = ToF32(h.A);
      f.scales = ToF32(h.scales);
      f.bias_t = ToF32(h.bias_t);
      if (zp == Zp::kFloat) f.zero_points = ToF32(h.zero_points);
      auto yh = h.Run();
      auto yf = f.Run();
      ASSERT_TRUE(yh.ok()) << yh.status();
      ASSERT_TRUE(yf.ok()) << yf.status();
      ASSERT_EQ((*yh)[0].dtype(), DType::kFloat16);
      for (int64_t i = 0; i < (*yf)[0].num_elements(); ++i)
        ASSERT_EQ((*yh)[0].data<uint16_t>()[i], F32ToF16((*yf)[0].data<float>()[i])) << "bits " << bits << " at " << i;
    }
}

TEST(ContribMatMulNBits, ThreeDimensionalAAndAccuracyLevels) {
  NBitsCase c;
  c.M = 6;
  c.K = 64;
  c.N = 8;
  c.zp = Zp::kPacked;
  c.Make();
  NBitsCase c3 = c;
  c3.A = Tensor::FromVector(DType::kFloat32, {2, 3, 64}, c.a);
  for (int64_t level : {0, 1, 2, 3, 4}) {
    const std::vector<float> want = c.Q4GemmExpected(level == 4);
    auto y = RunNode(c3.MakeNode(level), c3.Inits(), c3.Feeds(), {DType::kFloat32});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ((*y)[0].shape(), (Shape{2, 3, 8}));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ((*y)[0].data<float>()[i], want[i]) << "level " << level;
  }
}

absl::Status LoadStatus(const NBitsCase& c, Node n, std::vector<std::pair<std::string, Tensor>> inits) {
  return LoadNode(std::move(n), inits, c.Feeds(), {DType::kFloat32}).status();
}

TEST(ContribMatMulNBits, BadWeightsAreRefusedAtLoadNamingTheNode) {
  NBitsCase c;
  c.K = 96;
  c.N = 8;
  c.zp = Zp::kPacked;
  c.Make();
  ASSERT_TRUE(LoadStatus(c, c.MakeNode(), c.Inits()).ok());
  auto expect_error = [&](Node n, std::vector<std::pair<std::string, Tensor>> inits, const std::string& what) {
    absl::Status st = LoadStatus(c, std::move(n), std::move(inits));
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_THAT(std::string(st.message()), HasSubstr("com.microsoft.MatMulNBits 'mmnb'")) << what;
    EXPECT_THAT(std::string(st.message()), HasSubstr(what));
  };
  // A blob one byte per block short, and a blob for another K.
  Tensor short_blob = Tensor::Empty(DType::kUInt8, {8, 3, 15});
  expect_error(c.MakeNode(), {{"B", short_blob}, {"scales", c.scales}, {"zero_points", c.zero_points}}, "needs uint8 [8, 3, 16]");
  Node wrong_k = c.MakeNode();
  wrong_k.attrs["K"] = IntAttr("K", 128);
  expect_error(wrong_k, c.Inits(), "K = 128");
  Node bits3 = c.MakeNode();
  bits3.attrs["bits"] = IntAttr("bits", 3);
  expect_error(bits3, c.Inits(), "bits 3 is not supported");
  Node bs24 = c.MakeNode();
  bs24.attrs["block_size"] = IntAttr("block_size", 24);
  expect_error(bs24, c.Inits(), "power of two >= 16");
  Node bs8 = c.MakeNode();
  bs8.attrs["block_size"] = IntAttr("block_size", 8);
  expect_error(bs8, c.Inits(), "power of two >= 16");
  expect_error(c.MakeNode(7), c.Inits(), "accuracy_level must be 0 to 4, got 7");
  Node no_k = c.MakeNode();
  no_k.attrs.erase("K");
  expect_error(no_k, c.Inits(), "K and N are required");
  expect_error(c.MakeNode(), {{"B", c.blob}, {"scales", Tensor::FromVector(DType::kFloat32, {23}, std::vector<float>(23, 1))},
                              {"zero_points", c.zero_points}}, "scales [23]");
  // 3 blocks of 4 bits: 2 bytes per column, so 16 bytes; 24 (one per block) is wrong.
  expect_error(c.MakeNode(), {{"B", c.blob}, {"scales", c.scales}, {"zero_points", Tensor::Empty(DType::kUInt8, {24})}},
               "packed zero_points [24]");
  expect_error(c.MakeNode(), {{"B", c.blob}, {"scales", c.scales}, {"zero_points", Tensor::Empty(DType::kInt8, {16})}},
               "zero_points must be uint8 or the scales' type");
  Node g = c.MakeNode();
  g.inputs = {"A", "B", "scales", "zero_points", "g_idx"};
  std::vector<int32_t> gi(96);
  for (int i = 0; i < 96; ++i) gi[i] = i / 32;
  absl::Status st = LoadStatus(c, g, {{"B", c.blob}, {"scales", c.scales}, {"zero_points", c.zero_points},
                                      {"g_idx", Tensor::FromVector(DType::kInt32, {96}, gi)}});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(st.message()), HasSubstr("g_idx"));
  // B fed at run time instead of an initializer.
  st = LoadNode(c.MakeNode(), {{"scales", c.scales}, {"zero_points", c.zero_points}}, {{"A", c.A}, {"B", c.blob}},
                {DType::kFloat32}).status();
  EXPECT_THAT(std::string(st.message()), HasSubstr("must be initializers"));
}

TEST(ContribMatMulNBits, BadRunInputsAreErrors) {
  NBitsCase c;
  c.K = 64;
  c.N = 8;
  c.Make();
  auto y = RunNode(c.MakeNode(), c.Inits(), {{"A", Tensor::FromVector(DType::kFloat32, {2, 32}, std::vector<float>(64))}},
                   {DType::kFloat32});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("does not end in K = 64"));
  c.bias = true;
  auto yb = RunNode(c.MakeNode(), c.Inits(), {{"A", c.A}, {"bias", Tensor::FromVector(DType::kFloat32, {7}, std::vector<float>(7))}},
                    {DType::kFloat32});
  ASSERT_FALSE(yb.ok());
  EXPECT_THAT(std::string(yb.status().message()), HasSubstr("bias must be float32 [8]"));
}


// ---------------------------------------------------------------------------------------------
// SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, SkipLayerNormalization

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

Node MakeOp(const std::string& op, const std::string& domain, std::vector<std::string> inputs,
            std::vector<Attribute> attrs = {}) {
  Node n;
  n.name = "n";
  n.op_type = op;
  n.domain = domain;
  n.inputs = std::move(inputs);
  for (const Attribute& a : attrs) n.attrs[a.name] = a;
  return n;
}

TEST(ContribNorm, SimplifiedLayerNormalizationMatchesTheDoubleFormula) {
  for (int64_t axis : {-1, 1}) {
    const Shape xs = {2, 3, 8};
    const int64_t h = axis == -1 ? 8 : 24, rows = 48 / h;
    Tensor x = Tensor::FromVector(DType::kFloat32, xs, Random(48, 1));
    Tensor g = Tensor::FromVector(DType::kFloat32, axis == -1 ? Shape{8} : Shape{3, 8}, Random(h, 2, 0.5f, 1.5f));
    auto y = RunNode(MakeOp("SimplifiedLayerNormalization", "", {"x", "g"}, {IntAttr("axis", axis), FloatAttr("epsilon", 1e-3f)}),
                     {}, {{"x", x}, {"g", g}}, {DType::kFloat32, DType::kFloat32});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ((*y)[1].shape(), axis == -1 ? (Shape{2, 3, 1}) : (Shape{2, 1, 1}));
    for (int64_t r = 0; r < rows; ++r) {
      double sq = 0;
      for (int64_t i = 0; i < h; ++i) sq += double(x.data<float>()[r * h + i]) * x.data<float>()[r * h + i];
      const double inv = 1.0 / std::sqrt(sq / h + 1e-3);
      EXPECT_NEAR((*y)[1].data<float>()[r], inv, 1e-6 * inv);
      for (int64_t i = 0; i < h; ++i) {
        const double want = x.data<float>()[r * h + i] * inv * g.data<float>()[i];
        EXPECT_NEAR((*y)[0].data<float>()[r * h + i], want, 1e-6 * (1 + std::fabs(want)));
      }
    }
  }
  Tensor x = Tensor::FromVector(DType::kFloat32, {2, 8}, Random(16, 3));
  auto bad = RunNode(MakeOp("SimplifiedLayerNormalization", "", {"x", "g"}), {},
                     {{"x", x}, {"g", Tensor::FromVector(DType::kFloat32, {7}, Random(7, 4))}}, {DType::kFloat32});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("scale [7] does not match"));
}

// Both skip forms: every output against the double formula; float16 = the float32 result rounded once.
TEST(ContribNorm, SkipNormalizationsGiveEveryOutput) {
  for (bool simplified : {true, false}) {
    const std::string op = simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization";
    const int64_t B = 2, S = 3, H = 16;
    Tensor x = Tensor::FromVector(DType::kFloat32, {B, S, H}, Random(B * S * H, 5));
    Tensor skip = Tensor::FromVector(DType::kFloat32, {S, H}, Random(S * H, 6));  // shared by the batch
    Tensor g = Tensor::FromVector(DType::kFloat32, {H}, Random(H, 7, 0.5f, 1.5f));
    Tensor beta = Tensor::FromVector(DType::kFloat32, {H}, Random(H, 8));
    Tensor bias = Tensor::FromVector(DType::kFloat32, {H}, Random(H, 9));
    std::vector<std::string> ins = {"x", "skip", "g"};
    std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"skip", skip}, {"g", g}};
    if (!simplified) {
      ins.push_back("beta");
      feeds.emplace_back("beta", beta);
    }
    ins.push_back("bias");
    feeds.emplace_back("bias", bias);
    const std::vector<DType> outs = {DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32};
    auto y = RunNode(MakeOp(op, kMs, ins, {FloatAttr("epsilon", 1e-5f)}), {}, feeds, outs);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ((*y)[1].shape(), (Shape{B, S, 1}));
    for (int64_t r = 0; r < B * S; ++r) {
      std::vector<double> s(H);
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < H; ++i) {
        s[i] = double(x.data<float>()[r * H + i]) + skip.data<float>()[(r % S) * H + i] + bias.data<float>()[i];
        sum += s[i];
        EXPECT_NEAR((*y)[3].data<float>()[r * H + i], s[i], 1e-6 * (1 + std::fabs(s[i])));
      }
      const double mean = sum / H;
      for (int64_t i = 0; i < H; ++i) sq += simplified ? s[i] * s[i] : (s[i] - mean) * (s[i] - mean);
      const double inv = 1.0 / std::sqrt(sq / H + 1e-5);
      EXPECT_NEAR((*y)[1].data<float>()[r], simplified ? 0.0 : mean, 1e-6);
      EXPECT_NEAR((*y)[2].data<float>()[r], inv, 1e-6 * inv);
      for (int64_t i = 0; i < H; ++i) {
        const double want = simplified ? s[i] * inv * g.data<float>()[i]
                                       : (s[i] - mean) * inv * g.data<float>()[i] + beta.data<float>()[i];
        EXPECT_NEAR((*y)[0].data<float>()[r * H + i], want, 1e-5 * (1 + std::fabs(want))) << op;
      }
    }
    // float16: the same computation on the widened values, each output rounded once.
    std::vector<std::pair<std::string, Tensor>> feeds16, feeds32;
    for (const auto& [name, t] : feeds) {
      feeds16.emplace_back(name, ToF16(t));
      feeds32.emplace_back(name, ToF32(ToF16(t)));
    }
    auto y16 = RunNode(MakeOp(op, kMs, ins, {FloatAttr("epsilon", 1e-5f)}), {}, feeds16,
                       {DType::kFloat16, DType::kFloat32, DType::kFloat32, DType::kFloat16});
    auto y32 = RunNode(MakeOp(op, kMs, ins, {FloatAttr("epsilon", 1e-5f)}), {}, feeds32, outs);
    ASSERT_TRUE(y16.ok()) << y16.status();
    ASSERT_TRUE(y32.ok()) << y32.status();
    for (int o : {0, 3})
      for (int64_t i = 0; i < x.num_elements(); ++i)
        ASSERT_EQ((*y16)[o].data<uint16_t>()[i], F32ToF16((*y32)[o].data<float>()[i])) << op << " output " << o;
    // A skip that fits neither the input nor its last two dimensions.
    feeds[1].second = Tensor::FromVector(DType::kFloat32, {2, H}, Random(2 * H, 10));
    auto bad = RunNode(MakeOp(op, kMs, ins), {}, feeds, {DType::kFloat32});
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("does not fit input [2, 3, 16]"));
  }
}

// ---------------------------------------------------------------------------------------------
// Gelu, BiasGelu, FastGelu, QuickGelu, FusedMatMul

TEST(ContribActivation, EachMatchesItsFormula) {
  const std::vector<float> xv = Random(2 * 24, 11, -5.f, 5.f), bv = Random(24, 12, -1.f, 1.f);
  Tensor x = Tensor::FromVector(DType::kFloat32, {2, 24}, xv), b = Tensor::FromVector(DType::kFloat32, {24}, bv);
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  auto fast = [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); };
  struct Case {
    std::string op;
    bool bias;
    std::vector<Attribute> attrs;
    std::function<double(double)> f;
  };
  const std::vector<Case> cases = {
      {"Gelu", false, {}, gelu},
      {"BiasGelu", true, {}, gelu},
      {"FastGelu", false, {}, fast},
      {"FastGelu", true, {}, fast},
      {"QuickGelu", false, {}, [](double v) { return v / (1 + std::exp(-1.702 * v)); }},
      {"QuickGelu", false, {FloatAttr("alpha", 0.75f)}, [](double v) { return v / (1 + std::exp(-0.75 * v)); }},
  };
  for (const Case& c : cases) {
    std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}};
    std::vector<std::string> ins = {"x"};
    if (c.bias) {
      feeds.emplace_back("b", b);
      ins.push_back("b");
    }
    auto y = RunNode(MakeOp(c.op, kMs, ins, c.attrs), {}, feeds, {DType::kFloat32});
    ASSERT_TRUE(y.ok()) << c.op << ": " << y.status();
    for (int64_t i = 0; i < 48; ++i) {
      const double want = c.f(double(xv[i]) + (c.bias ? bv[i % 24] : 0.0));
      EXPECT_NEAR((*y)[0].data<float>()[i], want, 1e-6 * (1 + std::fabs(want))) << c.op << " at " << i;
    }
  }
  auto no_bias = RunNode(MakeOp("BiasGelu", kMs, {"x"}), {}, {{"x", x}}, {DType::kFloat32});
  ASSERT_FALSE(no_bias.ok());
  EXPECT_THAT(std::string(no_bias.status().message()), HasSubstr("bias"));
}

TEST(ContribFusedMatMul, TransposesScalesAndBroadcastsBatches) {
  // A [2, 1, K, M] transposed, B [3, N, K] transposed: Y [2, 3, M, N] = alpha * A^T B^T.
  const int64_t M = 5, K = 7, N = 4;
  const std::vector<float> av = Random(2 * K * M, 13), bv = Random(3 * N * K, 14);
  Tensor a = Tensor::FromVector(DType::kFloat32, {2, 1, K, M}, av), b = Tensor::FromVector(DType::kFloat32, {3, N, K}, bv);
  auto y = RunNode(MakeOp("FusedMatMul", kMs, {"a", "b"}, {IntAttr("transA", 1), IntAttr("transB", 1), FloatAttr("alpha", 0.5f)}),
                   {}, {{"a", a}, {"b", b}}, {DType::kFloat32});
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ((*y)[0].shape(), (Shape{2, 3, M, N}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0;
          for (int64_t k = 0; k < K; ++k) want += double(av[i * K * M + k * M + m]) * bv[j * N * K + n * K + k];
          want *= 0.5;
          EXPECT_NEAR((*y)[0].data<float>()[((i * 3 + j) * M + m) * N + n], want, 1e-5);
        }
  auto tb = RunNode(MakeOp("FusedMatMul", kMs, {"a", "b"}, {IntAttr("transBatchA", 1)}), {}, {{"a", a}, {"b", b}},
                    {DType::kFloat32});
  ASSERT_FALSE(tb.ok());
  EXPECT_THAT(std::string(tb.status().message()), HasSubstr("transBatchA"));
  // Mixed or unsupported element types are named, not computed.
  Tensor ah = Tensor::Empty(DType::kFloat16, {2, 1, K, M});
  Tensor ad = Tensor::Empty(DType::kFloat64, {2, 1, K, M}), bd = Tensor::Empty(DType::kFloat64, {3, N, K});
  for (auto [x, w] : {std::pair<Tensor*, Tensor*>{&ah, &b}, {&ad, &bd}}) {
    auto bad = RunNode(MakeOp("FusedMatMul", kMs, {"a", "b"}, {IntAttr("transA", 1), IntAttr("transB", 1)}), {},
                       {{"a", *x}, {"b", *w}}, {x->dtype()});
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("must both be float32 or both float16"));
  }
}

// ---------------------------------------------------------------------------------------------
// GroupQueryAttention, RotaryEmbedding

// One GroupQueryAttention node with random float32 inputs; the fields are its forms.
struct GqaCase {
  int64_t B = 1, S = 4, H = 4, KVH = 2, D = 16;
  int64_t P = -1;             // past length; -1: no past inputs
  int64_t total = -1;         // -1: S (no past) or P + S
  std::vector<int32_t> seqlens;  // empty: total - 1 for every batch row
  bool packed = false;
  int rotary = 0;             // 0 none, 1 halves, 2 interleaved
  int64_t rot_half = -1;      // cos_cache's last dim; -1: D / 2
  int64_t cache_rows = -1;    // -1: total + 3
  float scale = 0, softcap = 0;
  int64_t window = -1;
  bool smooth = false, sink = false, bias = false;
  std::vector<int64_t> pos_ids;  // B * S position ids, or empty
  uint32_t seed = 1;

  GqaAttrs attrs;
  Tensor q, k, v, pk, pv, sk, ts, cos, sin, pos, ab, hs;

  void Make() {
    if (total < 0) total = P < 0 ? S : P + S;
    if (seqlens.empty()) seqlens.assign(B, static_cast<int32_t>(total - 1));
    const int64_t qw = packed ? (H + 2 * KVH) * D : H * D;
    q = Tensor::FromVector(DType::kFloat32, {B, S, qw}, Random(B * S * qw, seed));
    if (!packed) {
      k = Tensor::FromVector(DType::kFloat32, {B, S, KVH * D}, Random(B * S * KVH * D, seed + 1));
      v = Tensor::FromVector(DType::kFloat32, {B, S, KVH * D}, Random(B * S * KVH * D, seed + 2));
    }
    if (P >= 0) {
      pk = Tensor::FromVector(DType::kFloat32, {B, KVH, P, D}, Random(B * KVH * P * D, seed + 3));
      pv = Tensor::FromVector(DType::kFloat32, {B, KVH, P, D}, Random(B * KVH * P * D, seed + 4));
    }
    sk = Tensor::FromVector(DType::kInt32, {B}, seqlens);
    ts = Tensor::FromVector(DType::kInt32, {}, std::vector<int32_t>{static_cast<int32_t>(total)});
    if (rotary) {
      const int64_t half = rot_half > 0 ? rot_half : D / 2, rows = cache_rows > 0 ? cache_rows : total + 3;
      std::vector<float> c(rows * half), sn(rows * half);
      for (int64_t p = 0; p < rows; ++p)
        for (int64_t i = 0; i < half; ++i) {
          const double ang = p / std::pow(10000.0, double(i) / half);
          c[p * half + i] = static_cast<float>(std::cos(ang));
          sn[p * half + i] = static_cast<float>(std::sin(ang));
        }
      cos = Tensor::FromVector(DType::kFloat32, {rows, half}, c);
      sin = Tensor::FromVector(DType::kFloat32, {rows, half}, sn);
    }
    if (!pos_ids.empty()) pos = Tensor::FromVector(DType::kInt64, {B, S}, pos_ids);
    if (bias) ab = Tensor::FromVector(DType::kFloat32, {B, 1, S, total}, Random(B * S * total, seed + 5));
    if (sink) hs = Tensor::FromVector(DType::kFloat32, {H}, Random(H, seed + 6));
    attrs = GqaAttrs{H, KVH, scale, softcap, window, rotary != 0, rotary == 2, smooth};
  }
  std::vector<Attribute> NodeAttrs() const {
    std::vector<Attribute> a = {IntAttr("num_heads", H), IntAttr("kv_num_heads", KVH)};
    if (scale != 0) a.push_back(FloatAttr("scale", scale));
    if (softcap != 0) a.push_back(FloatAttr("softcap", softcap));
    if (window != -1) a.push_back(IntAttr("local_window_size", window));
    if (rotary) a.insert(a.end(), {IntAttr("do_rotary", 1), IntAttr("rotary_interleaved", rotary == 2)});
    if (smooth) a.push_back(IntAttr("smooth_softmax", 1));
    return a;
  }
  // (name, tensor) per input slot; an undefined tensor is an absent input.
  std::vector<std::pair<std::string, Tensor>> Slots(DType t = DType::kFloat32) const {
    auto cv = [&](const Tensor& x) { return t == DType::kFloat16 && x.defined() && x.dtype() == DType::kFloat32 ? ToF16(x) : x; };
    return {{"query", cv(q)}, {"key", cv(k)}, {"value", cv(v)}, {"past_key", cv(pk)}, {"past_value", cv(pv)},
            {"seqlens_k", sk}, {"total_sequence_length", ts}, {"cos_cache", cv(cos)}, {"sin_cache", cv(sin)},
            {"position_ids", pos}, {"attention_bias", cv(ab)}, {"head_sink", cv(hs)}};
  }
  Node MakeNode(DType t = DType::kFloat32) const {
    std::vector<std::string> ins;
    for (const auto& [name, x] : Slots(t)) ins.push_back(x.defined() ? name : "");
    while (!ins.empty() && ins.back().empty()) ins.pop_back();
    Node n = MakeOp("GroupQueryAttention", kMs, ins, NodeAttrs());
    n.name = "gqa";
    return n;
  }
  absl::StatusOr<std::vector<Tensor>> Run(int threads = 1, DType t = DType::kFloat32) const {
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (const auto& [name, x] : Slots(t))
      if (x.defined()) feeds.emplace_back(name, x);
    return RunNode(MakeNode(t), {}, feeds, {t, t, t}, threads);
  }
  std::vector<Tensor> Reference() const {
    GqaInputs in;
    auto opt = [](const Tensor& x) { return x.defined() ? &x : nullptr; };
    in.query = &q;
    in.key = opt(k);
    in.value = opt(v);
    in.past_key = opt(pk);
    in.past_value = opt(pv);
    in.seqlens_k = &sk;
    in.total_sequence_length = &ts;
    in.cos_cache = opt(cos);
    in.sin_cache = opt(sin);
    in.position_ids = opt(pos);
    in.attention_bias = opt(ab);
    in.head_sink = opt(hs);
    return GqaReference(attrs, in);
  }
};

// Every form against the float64 reference. The kernel accumulates dot products and value sums
// in float32 over at most D = 128 terms of magnitude <= 4: 2e-5 absolute plus 2e-5 of |y| holds
// that (the largest difference seen is printed by ExpectTensorNear on failure).
TEST(ContribGqa, KernelMatchesTheReferenceInEveryForm) {
  std::vector<std::pair<std::string, GqaCase>> cases;
  auto add = [&](std::string name, GqaCase c) { cases.emplace_back(std::move(name), std::move(c)); };
  { GqaCase c; add("prompt h4 kv2 d16", c); }
  { GqaCase c; c.H = 2; c.KVH = 2; c.D = 8; c.P = 0; add("prompt, empty past, h/kvh 1, d8", c); }
  { GqaCase c; c.H = 4; c.KVH = 1; c.D = 64; c.S = 6; c.packed = true; c.rotary = 1; c.B = 2; c.seqlens = {5, 2};
    add("prompt packed rotary, batch 2 right-padded, h/kvh 4, d64", c); }
  { GqaCase c; c.B = 2; c.S = 1; c.H = 8; c.KVH = 2; c.D = 128; c.P = 6; c.total = 7; c.seqlens = {6, 3}; c.rotary = 1;
    add("decode d128 rotary, batch 2 ragged", c); }
  { GqaCase c; c.B = 2; c.S = 1; c.H = 4; c.KVH = 2; c.D = 32; c.P = 5; c.total = 6; c.seqlens = {5, 2}; c.packed = true;
    c.rotary = 2; add("decode packed interleaved", c); }
  { GqaCase c; c.S = 1; c.H = 2; c.KVH = 1; c.D = 32; c.P = 4; c.rotary = 1; c.rot_half = 8; add("partial rotary", c); }
  { GqaCase c; c.B = 2; c.S = 1; c.P = 10; c.total = 6; c.seqlens = {5, 3}; c.rotary = 2; add("share-buffer decode", c); }
  { GqaCase c; c.S = 4; c.H = 2; c.KVH = 1; c.P = 12; c.total = 4; c.seqlens = {3}; add("share-buffer prompt", c); }
  { GqaCase c; c.S = 3; c.P = 4; c.total = 7; c.rotary = 1; add("subsequent prompt", c); }
  { GqaCase c; c.S = 8; c.H = 2; c.KVH = 1; c.window = 3; add("window 3 prompt", c); }
  { GqaCase c; c.B = 2; c.S = 1; c.H = 2; c.KVH = 2; c.P = 9; c.total = 10; c.seqlens = {9, 5}; c.window = 4;
    add("window 4 decode", c); }
  { GqaCase c; c.S = 6; c.H = 4; c.KVH = 4; c.softcap = 1.5f; c.scale = 0.6f; add("softcap and scale", c); }
  { GqaCase c; c.S = 1; c.P = 5; c.smooth = true; add("smooth softmax decode", c); }
  { GqaCase c; c.S = 5; c.sink = true; add("head_sink", c); }
  { GqaCase c; c.B = 2; c.S = 4; c.bias = true; c.seqlens = {3, 2}; add("attention_bias, batch 2", c); }
  { GqaCase c; c.B = 2; c.S = 1; c.H = 2; c.KVH = 1; c.D = 32; c.P = 4; c.rotary = 1; c.pos_ids = {7, 2}; c.cache_rows = 12;
    add("position_ids decode", c); }
  { GqaCase c; c.S = 5; c.rotary = 1; c.pos_ids = {3, 0, 0, 0, 0}; c.cache_rows = 12; add("position_ids prompt offset", c); }
  for (auto& [name, c] : cases) {
    c.Make();
    const std::vector<Tensor> want = c.Reference();
    for (int threads : {1, 3}) {
      auto got = c.Run(threads);
      ASSERT_TRUE(got.ok()) << name << ": " << got.status();
      for (int o = 0; o < 3; ++o) {
        SCOPED_TRACE(name + ", output " + std::to_string(o) + ", threads " + std::to_string(threads));
        ExpectTensorNear((*got)[o], want[o], 2e-5, 2e-5);
      }
    }
  }
}

// The reference itself on a case small enough to work out: one head, D = 8, two keys. Row 0 sees
// key 0 alone (output = v0); row 1 softmaxes [q1.k0, q1.k1] / sqrt(8).
TEST(ContribGqa, ReferenceMatchesAHandComputedCase) {
  GqaCase c;
  c.S = 2, c.H = 1, c.KVH = 1, c.D = 8;
  c.Make();
  const std::vector<Tensor> r = c.Reference();
  const float* q = c.q.data<float>();
  const float* k = c.k.data<float>();
  const float* v = c.v.data<float>();
  double s0 = 0, s1 = 0;
  for (int d = 0; d < 8; ++d) s0 += double(q[8 + d]) * k[d], s1 += double(q[8 + d]) * k[8 + d];
  s0 /= std::sqrt(8.0), s1 /= std::sqrt(8.0);
  const double p0 = 1 / (1 + std::exp(s1 - s0));
  for (int d = 0; d < 8; ++d) {
    EXPECT_FLOAT_EQ(r[0].data<float>()[d], v[d]);
    EXPECT_NEAR(r[0].data<float>()[8 + d], p0 * v[d] + (1 - p0) * v[8 + d], 1e-6);
  }
}

// float16: inputs widened, output rounded once; rotated q / k are rounded to float16 first (as
// ONNX Runtime keeps them), which moves logits by a few float16 units: 4e-3 of |y| + 4e-3.
TEST(ContribGqa, Float16IsTheFloat32ComputationRounded) {
  std::vector<GqaCase> cases(3);
  cases[0].B = 2, cases[0].S = 5, cases[0].rotary = 1, cases[0].D = 32, cases[0].seqlens = {4, 3};
  cases[1].B = 2, cases[1].S = 1, cases[1].P = 7, cases[1].total = 8, cases[1].seqlens = {7, 4}, cases[1].packed = true,
  cases[1].rotary = 2, cases[1].D = 64;
  cases[2].S = 1, cases[2].P = 3, cases[2].H = 2, cases[2].KVH = 2;
  for (GqaCase& c : cases) {
    c.Make();
    // The reference runs on the float16-rounded inputs, widened.
    for (Tensor* t : {&c.q, &c.k, &c.v, &c.pk, &c.pv, &c.cos, &c.sin})
      if (t->defined()) *t = ToF32(ToF16(*t));
    const std::vector<Tensor> want = c.Reference();
    auto got = c.Run(2, DType::kFloat16);
    ASSERT_TRUE(got.ok()) << got.status();
    for (int o = 0; o < 3; ++o) {
      ASSERT_EQ((*got)[o].dtype(), DType::kFloat16);
      ExpectTensorNear(ToF32((*got)[o]), want[o], 4e-3, 4e-3);
    }
    // Without rotary the present outputs are the inputs' own float16 values.
    if (!c.rotary) ExpectTensorEq(ToF32((*got)[1]), want[1]);
  }
}

// A donated float32 past with spare rows (ONNX Runtime's past_present_share_buffer form) is
// appended to in place: the present outputs are the past's own storage, holding the bits the
// copying path gives in every valid row (the rows after are left as they were), and the attention
// output is the same bits. Undonated, the present is a new tensor.
TEST(ContribGqa, DonatedShareBufferPastIsAppendedInPlace) {
  std::vector<std::pair<std::string, GqaCase>> cases;
  { GqaCase c; c.B = 2; c.S = 1; c.P = 10; c.total = 6; c.seqlens = {5, 3}; c.rotary = 2; cases.emplace_back("decode, batch 2 ragged", c); }
  { GqaCase c; c.S = 3; c.P = 12; c.total = 7; c.rotary = 1; cases.emplace_back("continued prompt", c); }
  { GqaCase c; c.S = 4; c.H = 2; c.KVH = 1; c.P = 12; c.total = 4; c.seqlens = {3}; cases.emplace_back("first prompt", c); }
  for (auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    c.Make();
    auto copied = c.Run(2);
    ASSERT_TRUE(copied.ok()) << copied.status();
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (const auto& [slot, x] : c.Slots()) if (x.defined()) feeds.emplace_back(slot, x);
    auto s = LoadNode(c.MakeNode(), {}, feeds, {DType::kFloat32, DType::kFloat32, DType::kFloat32}, 2);
    ASSERT_TRUE(s.ok()) << s.status();
    for (const IOInfo& in : (*s)->inputs()) {
      EXPECT_EQ(in.kv_share_buffer, in.name == "past_key" || in.name == "past_value") << in.name;
    }
    // The run gets its own copies of the pasts to overwrite.
    const Tensor pk = c.pk.Clone(), pv = c.pv.Clone();
    for (auto& [slot, x] : feeds) {
      if (slot == "past_key") x = pk;
      if (slot == "past_value") x = pv;
    }
    RunOptions donate;
    donate.donated_inputs = {"past_key", "past_value"};
    auto in_place = (*s)->Run(feeds, {}, &donate);
    ASSERT_TRUE(in_place.ok()) << in_place.status();
    EXPECT_EQ((*in_place)[1].raw_data(), pk.raw_data());
    EXPECT_EQ((*in_place)[2].raw_data(), pv.raw_data());
    ExpectTensorEq((*in_place)[0], (*copied)[0]);
    const int64_t L = c.P, D = c.D;
    for (int o : {1, 2}) {
      const Tensor& original = o == 1 ? c.pk : c.pv;
      for (int64_t u = 0; u < c.B * c.KVH; ++u) {
        const int64_t valid = c.seqlens[static_cast<size_t>(u / c.KVH)] + 1;
        for (int64_t r = 0; r < L; ++r) {
          const float* got = (*in_place)[o].data<float>() + (u * L + r) * D;
          const float* want = (r < valid ? (*copied)[o] : original).data<float>() + (u * L + r) * D;
          ASSERT_EQ(std::memcmp(got, want, static_cast<size_t>(D) * sizeof(float)), 0)
              << "output " << o << ", block " << u << ", row " << r << (r < valid ? " (valid)" : " (spare)");
        }
      }
    }
    // Not donated: the same run copies, and the fed pasts are untouched.
    auto fresh = (*s)->Run(feeds, {}, nullptr);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_NE((*fresh)[1].raw_data(), pk.raw_data());
  }
  // An unknown donated name is an error naming it.
  GqaCase c;
  c.S = 1;
  c.P = 4;
  c.Make();
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const auto& [slot, x] : c.Slots()) if (x.defined()) feeds.emplace_back(slot, x);
  auto s = LoadNode(c.MakeNode(), {}, feeds, {DType::kFloat32, DType::kFloat32, DType::kFloat32}, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  RunOptions bad;
  bad.donated_inputs = {"past_keys"};
  auto r = (*s)->Run(feeds, {}, &bad);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("donated_inputs: unknown input 'past_keys'"));
}

absl::Status LoadStatus(const std::vector<Attribute>& attrs, const std::vector<TypeInfo>& ins) {
  OneNode n{"GroupQueryAttention", 1, kMs, attrs, 3};
  return n.Load(ins).status();
}
TypeInfo F32(std::vector<int64_t> dims) {
  TypeInfo t;
  t.kind = TypeInfo::Kind::kTensor;
  t.elem = DType::kFloat32;
  t.shape.emplace();
  for (int64_t d : dims) t.shape->push_back(Dim{d, ""});
  return t;
}
TypeInfo I32() {
  TypeInfo t;
  t.kind = TypeInfo::Kind::kTensor;
  t.elem = DType::kInt32;
  return t;
}

TEST(ContribGqa, LoadErrorsNameTheNode) {
  const std::vector<Attribute> ok = {IntAttr("num_heads", 4), IntAttr("kv_num_heads", 2)};
  const std::vector<TypeInfo> ins = {F32({1, 3, 64}), F32({1, 3, 32}), F32({1, 3, 32}), {}, {}, I32(), I32()};
  ASSERT_TRUE(LoadStatus(ok, ins).ok()) << LoadStatus(ok, ins);
  struct Bad {
    std::vector<Attribute> attrs;
    std::vector<TypeInfo> ins;
    std::string want;
  };
  auto with = [&](std::vector<Attribute> extra) {
    std::vector<Attribute> a = ok;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto rot_ins = [&](int64_t half) {
    std::vector<TypeInfo> r = ins;
    r.push_back(F32({16, half}));
    r.push_back(F32({16, half}));
    return r;
  };
  const std::vector<Bad> bad = {
      {{IntAttr("num_heads", 6), IntAttr("kv_num_heads", 4)}, ins, "not a multiple of kv_num_heads"},
      {ok, {F32({1, 3, 62}), F32({1, 3, 32}), F32({1, 3, 32}), {}, {}, I32(), I32()}, "query hidden size 62"},
      {ok, {F32({1, 3, 64}), F32({1, 3, 48}), F32({1, 3, 32}), {}, {}, I32(), I32()}, "key hidden size 48"},
      {with({IntAttr("do_rotary", 1)}), rot_ins(16), "cos_cache last dimension 16"},
      {with({IntAttr("do_rotary", 1)}), ins, "needs cos_cache and sin_cache"},
      {with({IntAttr("causal", 0)}), ins, "causal = 0"},
      {with({IntAttr("qk_output", 1)}), ins, "qk_output"},
      {with({IntAttr("sliding_window_cache", 1)}), ins, "sliding_window_cache"},
      {with({StrAttr("k_quant_type", "PER_TENSOR")}), ins, "quantised KV cache"},
      {with({IntAttr("local_window_size", 0)}), ins, "local_window_size 0"},
      {with({FloatAttr("softcap", -1.f)}), ins, "softcap"},
  };
  for (const Bad& b : bad) {
    const absl::Status s = LoadStatus(b.attrs, b.ins);
    ASSERT_FALSE(s.ok()) << b.want;
    EXPECT_THAT(std::string(s.message()), HasSubstr(b.want));
    EXPECT_THAT(std::string(s.message()), HasSubstr("GroupQueryAttention"));
  }
  // A half rotary width is accepted: 8 of head_size 16's 8.
  EXPECT_TRUE(LoadStatus(with({IntAttr("do_rotary", 1)}), rot_ins(8)).ok());
}

TEST(ContribGqa, RunErrorsAreClearNotReadsPastTheEnd) {
  auto expect_error = [](GqaCase c, const std::string& want) {
    c.Make();
    auto r = c.Run();
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(want));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("gqa"));
  };
  { GqaCase c; c.rotary = 1; c.cache_rows = 3; expect_error(c, "cos_cache has 3 positions, fewer than total_sequence_length 4"); }
  { GqaCase c; c.S = 1; c.P = 4; c.rotary = 1; c.pos_ids = {9}; c.cache_rows = 8; expect_error(c, "rotary position 9"); }
  { GqaCase c; c.S = 1; c.P = 4; c.seqlens = {5}; expect_error(c, "seqlens_k[0] = 5 is out of range [0, 5)"); }
  { GqaCase c; c.seqlens = {-1}; expect_error(c, "seqlens_k[0] = -1"); }
  { GqaCase c; c.S = 1; c.P = 2; c.total = 6; c.seqlens = {5}; expect_error(c, "needs 5 past rows, past_key has 2"); }
  { GqaCase c; c.B = 2; c.S = 2; c.P = 3; expect_error(c, "batch_size must be 1"); }
  { GqaCase c; c.D = 12; expect_error(c, "head_size 12 must be a positive multiple of 8"); }
  { GqaCase c; c.rotary = 1; c.rot_half = 12; c.D = 32; expect_error(c, "cos_cache last dimension 12"); }
  { GqaCase c; c.S = 2; c.H = 2; c.KVH = 1; c.D = 16; c.smooth = true; c.sink = true; expect_error(c, "head_sink must not be given"); }
  {  // past with the wrong kv head count
    GqaCase c;
    c.S = 1;
    c.P = 3;
    c.Make();
    c.pk = Tensor::FromVector(DType::kFloat32, {1, 4, 3, 16}, Random(4 * 3 * 16, 9));
    c.pv = c.pk;
    auto r = c.Run();
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("past_key [1, 4, 3, 16]"));
  }
  {  // key hidden size that is not kv_num_heads * head_size, shapes undeclared until run time
    GqaCase c;
    c.Make();
    c.k = Tensor::FromVector(DType::kFloat32, {1, 4, 48}, Random(4 * 48, 10));
    auto r = c.Run();
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("kv_num_heads * head_size"));
  }
}

// RotaryEmbedding against the formula in double: halves (x_i, x_{i+R/2}) or interleaved pairs,
// the dims past rotary_embedding_dim copied. float32 products: 1e-6.
TEST(ContribRotaryEmbedding, MatchesTheFormulaInEveryLayout) {
  struct Case {
    Shape shape;
    int64_t heads, rot;  // attributes (0: absent)
    bool interleaved, offset;
  };
  const std::vector<Case> cases = {{{2, 5, 64}, 2, 0, false, false}, {{2, 4, 96}, 3, 0, true, true},
                                   {{2, 3, 5, 32}, 0, 0, false, false}, {{1, 2, 4, 16}, 0, 0, true, true},
                                   {{2, 3, 128}, 2, 32, false, false}, {{2, 3, 64}, 0, 0, false, false}};
  const int64_t rows = 16;
  for (const Case& c : cases) {
    const bool four = c.shape.size() == 4;
    const int64_t B = c.shape[0], S = four ? c.shape[2] : c.shape[1];
    const int64_t hidden = four ? c.shape[1] * c.shape[3] : c.shape[2];
    const int64_t head = four ? c.shape[3] : c.heads ? hidden / c.heads : 32;
    const int64_t N = hidden / head, R = c.rot ? c.rot : head, half = R / 2;
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    const std::vector<float> xv = Random(n, 21);
    std::vector<float> cv(rows * half), sv(rows * half);
    for (int64_t i = 0; i < rows * half; ++i) cv[i] = std::cos(0.1f * i), sv[i] = std::sin(0.1f * i);
    std::vector<int64_t> pv;
    if (c.offset) pv = {3};
    else for (int64_t i = 0; i < B * S; ++i) pv.push_back((i * 7) % rows);
    Tensor pos = c.offset ? Tensor::FromVector(DType::kInt64, {1}, pv) : Tensor::FromVector(DType::kInt64, {B, S}, pv);
    std::vector<Attribute> attrs = {IntAttr("interleaved", c.interleaved)};
    if (c.heads) attrs.push_back(IntAttr("num_heads", c.heads));
    if (c.rot) attrs.push_back(IntAttr("rotary_embedding_dim", c.rot));
    Node node = MakeOp("RotaryEmbedding", kMs, {"x", "pos", "cos", "sin"}, attrs);
    auto y = RunNode(node, {}, {{"x", Tensor::FromVector(DType::kFloat32, c.shape, xv)}, {"pos", pos},
                                {"cos", Tensor::FromVector(DType::kFloat32, {rows, half}, cv)},
                                {"sin", Tensor::FromVector(DType::kFloat32, {rows, half}, sv)}},
                     {DType::kFloat32}, 2);
    ASSERT_TRUE(y.ok()) << y.status();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < N; ++h) {
          const int64_t at = four ? ((b * N + h) * S + s) * head : ((b * S + s) * N + h) * head;
          const int64_t p = c.offset ? 3 + s : pv[b * S + s];
          for (int64_t d = 0; d < head; ++d) {
            double want = xv[at + d];
            if (d < R) {
              const int64_t i = c.interleaved ? d / 2 : d % half;
              const int64_t other = c.interleaved ? (d % 2 ? d - 1 : d + 1) : (d < half ? d + half : d - half);
              const double sign = c.interleaved ? (d % 2 ? 1 : -1) : (d < half ? -1 : 1);
              want = xv[at + d] * double(cv[p * half + i]) + sign * xv[at + other] * double(sv[p * half + i]);
            }
            EXPECT_NEAR((*y)[0].data<float>()[at + d], want, 1e-6 * (1 + std::fabs(want))) << ShapeToString(c.shape) << " d " << d;
          }
        }
  }
}

TEST(ContribRotaryEmbedding, BadInputsAreErrors) {
  Tensor x = Tensor::FromVector(DType::kFloat32, {1, 2, 32}, Random(64, 22));
  Tensor cos = Tensor::FromVector(DType::kFloat32, {4, 16}, Random(64, 23));
  auto run = [&](const Tensor& pos, const Tensor& c, std::vector<Attribute> attrs) {
    return RunNode(MakeOp("RotaryEmbedding", kMs, {"x", "pos", "cos", "sin"}, attrs), {},
                   {{"x", x}, {"pos", pos}, {"cos", c}, {"sin", c}}, {DType::kFloat32});
  };
  auto expect = [](const absl::StatusOr<std::vector<Tensor>>& r, const std::string& want) {
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(want));
  };
  Tensor pos_ok = Tensor::FromVector(DType::kInt64, {1, 2}, std::vector<int64_t>{0, 3});
  ASSERT_TRUE(run(pos_ok, cos, {}).ok());
  expect(run(Tensor::FromVector(DType::kInt64, {1, 2}, std::vector<int64_t>{0, 4}), cos, {}), "position 4");
  expect(run(Tensor::FromVector(DType::kInt64, {1}, std::vector<int64_t>{3}), cos, {}), "position 4");
  expect(run(pos_ok, Tensor::FromVector(DType::kFloat32, {4, 8}, Random(32, 24)),
             {IntAttr("num_heads", 1), IntAttr("rotary_embedding_dim", 32)}),
         "cos_cache last dimension 8");
  expect(run(pos_ok, cos, {IntAttr("is_packed_batching", 1)}), "is_packed_batching");
  expect(run(pos_ok, cos, {IntAttr("rotary_embedding_dim", 16)}), "num_heads must be given");
  expect(run(Tensor::FromVector(DType::kInt64, {2, 2}, std::vector<int64_t>{0, 1, 2, 3}), cos, {}), "position_ids must be");
}

}  // namespace
}  // namespace oneinfer::testing
