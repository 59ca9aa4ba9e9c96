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

}  // namespace
}  // namespace oneinfer
