// A float16 model's MatMul with a constant weight: the weight stays in float16 panels
// (PackedMatrixB::PackHalf), A is widened, the product taken in float32 and rounded once: the
// double-accumulated product of the same values, rounded to float16, within one unit in the last
// place; the same for --matmul int8 within the int8 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

onnx::TensorProto HalfTensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<uint16_t>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT16);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2));
  return t;
}

TEST(Float16MatMul, ConstantWeightIsTheWidenedProductRoundedOnce) {
  const int64_t K = 300, N = 70;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> b(K * N);
  for (uint16_t& v : b) v = F32ToF16(u(rng) * 0.1f);
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("a", onnx::TensorProto::FLOAT16, {-1, K});
  *g->add_initializer() = HalfTensor("b", {K, N}, b);
  *g->add_node() = MakeNode("MatMul", {"a", "b"}, {"y"});
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT16, {-1, N});
  const std::string bytes = m.SerializeAsString();
  for (MatMulPrecision precision : {MatMulPrecision::kFloat32, MatMulPrecision::kInt8}) {
    SessionOptions o;
    o.num_threads = 2;
    o.matmul = precision;
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    for (int64_t M : {1, 3, 9}) {
      Tensor a = Tensor::Empty(DType::kFloat16, {M, K});
      for (int64_t i = 0; i < M * K; ++i) a.data<uint16_t>()[i] = F32ToF16(u(rng));
      auto y = (*s)->Run({{"a", a}});
      ASSERT_TRUE(y.ok()) << y.status();
      ASSERT_EQ((*y)[0].dtype(), DType::kFloat16);
      for (int64_t r = 0; r < M; ++r)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = double{F16ToF32(a.data<uint16_t>()[r * K + k])} * F16ToF32(b[k * N + n]);
            want += p;
            mag += std::fabs(p);
          }
          const double got = F16ToF32((*y)[0].data<uint16_t>()[r * N + n]);
          // One float16 unit of the result, plus float32 accumulation; int8: the per-row and
          // per-column quantisation (about 1 % of the magnitudes).
          const double tol = std::ldexp(std::fabs(want), -10) + (precision == MatMulPrecision::kInt8 ? 0.02 * mag : 1e-5 * mag);
          ASSERT_NEAR(got, want, tol) << "M=" << M << " r=" << r << " n=" << n;
        }
    }
  }
}

// Both operands computed (attention's q x k^T and probs x v in a float16 graph): widened in bulk,
// multiplied in float32 head by head over the broadcast batch, rounded once. Integer values
// small enough that every float32 sum is exact, so the rounded result is known exactly.
TEST(Float16MatMul, TwoActivationsBroadcastOverTheBatchRoundedOnce) {
  struct Case { std::vector<int64_t> a, b, y; };
  const Case cases[] = {{{2, 3, 5}, {2, 5, 4}, {2, 3, 4}},       // batch by batch
                        {{3, 5}, {2, 5, 4}, {2, 3, 4}},          // A broadcast over B's batch
                        {{1, 2, 3, 5}, {2, 1, 5, 4}, {2, 2, 3, 4}},  // both broadcast
                        {{2, 1, 5}, {5, 9}, {2, 1, 9}}};         // B one matrix: batch folded into M
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> u(-40, 40);
  for (const Case& c : cases) {
    const std::string bytes = BinaryModel("MatMul", onnx::TensorProto::FLOAT16, c.a, c.b, c.y).SerializeAsString();
    SessionOptions o;
    o.num_threads = 2;
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    Tensor a = Tensor::Empty(DType::kFloat16, c.a), b = Tensor::Empty(DType::kFloat16, c.b);
    for (int64_t i = 0; i < a.num_elements(); ++i) a.data<uint16_t>()[i] = F32ToF16(static_cast<float>(u(rng)));
    for (int64_t i = 0; i < b.num_elements(); ++i) b.data<uint16_t>()[i] = F32ToF16(static_cast<float>(u(rng)) / 8);
    auto y = (*s)->Run({{"a", a}, {"b", b}});
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ((*y)[0].shape(), Shape(c.y.begin(), c.y.end()));
    // The reference: index A and B through the broadcast batch by hand.
    const int64_t K = c.a.back(), N = c.b.back(), M = c.a[c.a.size() - 2];
    const size_t rank = c.y.size();
    auto offset = [&](const std::vector<int64_t>& dims, const std::vector<int64_t>& idx) {  // batch dims only
      int64_t off = 0;
      const size_t lead = rank - dims.size();
      for (size_t d = lead; d + 2 < rank; ++d) off = off * dims[d - lead] + (dims[d - lead] == 1 ? 0 : idx[d]);
      return off;
    };
    const int64_t batches = (*y)[0].num_elements() / (M * N);
    for (int64_t bi = 0; bi < batches; ++bi) {
      std::vector<int64_t> idx(rank, 0);
      for (int64_t r = bi, d = static_cast<int64_t>(rank) - 3; d >= 0; --d) {
        idx[static_cast<size_t>(d)] = r % c.y[static_cast<size_t>(d)];
        r /= c.y[static_cast<size_t>(d)];
      }
      const int64_t oa = offset(c.a, idx) * M * K, ob = offset(c.b, idx) * K * N;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float want = 0;
          for (int64_t k = 0; k < K; ++k)
            want += F16ToF32(a.data<uint16_t>()[oa + i * K + k]) * F16ToF32(b.data<uint16_t>()[ob + k * N + j]);
          ASSERT_EQ((*y)[0].data<uint16_t>()[(bi * M + i) * N + j], F32ToF16(want)) << bi << " " << i << " " << j;
        }
    }
  }
}

TEST(Float16Gemm, TransposesAndTheBiasGiveTheFloat32ResultRoundedOnce) {
  const int64_t M = 5, K = 7, N = 6;
  // Multiples of 1/8 below 2: every product and sum is exact in float32, so the one rounding to
  // float16 at the end is the only one.
  auto value = [](int64_t i, int mod) { return static_cast<float>(i * 7 % mod - mod / 2) / 8; };
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      onnx::ModelProto m = MakeModel();
      auto* g = m.mutable_graph();
      *g->add_input() = TensorInfo("a", onnx::TensorProto::FLOAT16, ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K});
      *g->add_input() = TensorInfo("b", onnx::TensorProto::FLOAT16, tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
      *g->add_input() = TensorInfo("c", onnx::TensorProto::FLOAT16, {N});
      onnx::NodeProto n = MakeNode("Gemm", {"a", "b", "c"}, {"y"});
      auto attr = [&](const char* name, onnx::AttributeProto::AttributeType type, float f, int64_t i) {
        auto* at = n.add_attribute();
        at->set_name(name);
        at->set_type(type);
        if (type == onnx::AttributeProto::FLOAT) at->set_f(f); else at->set_i(i);
      };
      attr("alpha", onnx::AttributeProto::FLOAT, 0.5f, 0);
      attr("beta", onnx::AttributeProto::FLOAT, 2.f, 0);
      attr("transA", onnx::AttributeProto::INT, 0, ta);
      attr("transB", onnx::AttributeProto::INT, 0, tb);
      *g->add_node() = n;
      *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT16, {M, N});
      const std::string bytes = m.SerializeAsString();
      auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
      ASSERT_TRUE(s.ok()) << s.status();
      Tensor a = Tensor::Empty(DType::kFloat16, ta ? Shape{K, M} : Shape{M, K});
      Tensor b = Tensor::Empty(DType::kFloat16, tb ? Shape{N, K} : Shape{K, N});
      Tensor c = Tensor::Empty(DType::kFloat16, {N});
      for (int64_t i = 0; i < M * K; ++i) a.data<uint16_t>()[i] = F32ToF16(value(i, 29));
      for (int64_t i = 0; i < K * N; ++i) b.data<uint16_t>()[i] = F32ToF16(value(i, 23));
      for (int64_t i = 0; i < N; ++i) c.data<uint16_t>()[i] = F32ToF16(value(i, 13));
      auto y = (*s)->Run({{"a", a}, {"b", b}, {"c", c}});
      ASSERT_TRUE(y.ok()) << y.status();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            const float av = F16ToF32(a.data<uint16_t>()[ta ? k * M + i : i * K + k]);
            const float bv = F16ToF32(b.data<uint16_t>()[tb ? j * K + k : k * N + j]);
            sum += av * bv;
          }
          const uint16_t want = F32ToF16(0.5f * sum + 2.f * F16ToF32(c.data<uint16_t>()[j]));
          ASSERT_EQ((*y)[0].data<uint16_t>()[i * N + j], want) << "transA " << ta << " transB " << tb << " at " << i << "," << j;
        }
    }
  }
}

}  // namespace
}  // namespace oneinfer
