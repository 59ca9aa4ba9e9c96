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

Tensor ToF16(const Tensor& t) {
  Tensor r = Tensor::Empty(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) r.data<uint16_t>()[i] = F32ToF16(t.data<float>()[i]);
  return r;
}
Tensor ToF32(const Tensor& t) {
  Tensor r = Tensor::Empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) r.data<float>()[i] = F16ToF32(t.data<uint16_t>()[i]);
  return r;
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
}

}  // namespace
}  // namespace oneinfer::testing
