// Unit tests for the image, signal, random and string op families (cases the ONNX test data lacks).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "tests/op_harness.h"

namespace oneinfer {
namespace {

using testing::FloatAttr;
using testing::FloatsAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::StrAttr;
using testing::StrsAttr;

// A node of these families on two threads, its outputs declared with these element types.
testing::OneNode Node(std::string op, int64_t opset, std::vector<DType> out_types, std::vector<Attribute> attrs = {}) {
  return {.op = std::move(op), .opset = opset, .attrs = std::move(attrs), .output_types = std::move(out_types), .threads = 2};
}

Tensor Floats(Shape s, std::vector<float> v) { return Tensor::FromVector(DType::kFloat32, std::move(s), v); }
Tensor Int64s(Shape s, std::vector<int64_t> v) { return Tensor::FromVector(DType::kInt64, std::move(s), v); }
Tensor Strings(Shape s, std::vector<std::string> v) { return Tensor::FromVector(DType::kString, std::move(s), v); }

std::vector<std::string> StrVec(const Tensor& t) { return {t.data<std::string>(), t.data<std::string>() + t.num_elements()}; }

// ---------------------------------------------------------------- signal

void CheckDft(int64_t n, bool inverse) {
  std::vector<float> x(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < 2 * n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i * i % 101)) + 0.1 * static_cast<double>(i % 7));
  testing::OneNode op = Node("DFT", 17, {DType::kFloat32}, {IntAttr("axis", 1), IntAttr("inverse", inverse)});
  auto r = op.Run({Floats({1, n, 2}, x)});
  ASSERT_TRUE(r.ok()) << r.status();
  const Tensor& y = (*r)[0].tensor;
  ASSERT_EQ(y.shape(), (Shape{1, n, 2}));
  double max_err = 0, max_mag = 0;
  for (int64_t k = 0; k < n; ++k) {
    std::complex<double> acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double ang = (inverse ? 2 : -2) * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      acc += std::complex<double>(x[static_cast<size_t>(2 * j)], x[static_cast<size_t>(2 * j + 1)]) * std::polar(1.0, ang);
    }
    if (inverse) acc /= static_cast<double>(n);
    const std::complex<double> got(y.data<float>()[2 * k], y.data<float>()[2 * k + 1]);
    max_err = std::max(max_err, std::abs(got - acc));
    max_mag = std::max(max_mag, std::abs(acc));
  }
  EXPECT_LT(max_err, 1e-5 * max_mag) << "n=" << n;
}

TEST(SignalOps, DftMatchesNaiveForManyLengths) {
  for (int64_t n : {1, 2, 3, 5, 7, 8, 12, 100, 127, 1000, 1024}) {
    CheckDft(n, false);
    CheckDft(n, true);
  }
}

TEST(SignalOps, DftOpset20AxisInputAndIrfftRoundTrip) {
  const int64_t n = 10;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i * i % 7) - 2.5f;
  testing::OneNode rfft = Node("DFT", 20, {DType::kFloat32}, {IntAttr("onesided", 1)});
  auto spec = rfft.Run({Floats({n, 1}, x), Tensor(), Int64s({}, {0})});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ((*spec)[0].tensor.shape(), (Shape{n / 2 + 1, 2}));
  testing::OneNode irfft = Node("DFT", 20, {DType::kFloat32}, {IntAttr("onesided", 1), IntAttr("inverse", 1)});
  auto back = irfft.Run({(*spec)[0].tensor, Tensor(), Int64s({}, {-2})});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ((*back)[0].tensor.shape(), (Shape{n, 1}));
  testing::ExpectTensorNear((*back)[0].tensor, Floats({n, 1}, x), 1e-4);
}

TEST(SignalOps, DftRejectsBadAxis) {
  testing::OneNode op = Node("DFT", 17, {DType::kFloat32}, {IntAttr("axis", 2)});
  auto r = op.Run({Floats({1, 4, 1}, {1, 2, 3, 4})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- image

TEST(ImageOps, ResizeLinearAntialiasAndAxes) {
  // Resize-18, axes=[1], scale 0.5 with antialias: a 4-tap triangle filter of width 2.
  testing::OneNode op = Node("Resize", 18, {DType::kFloat32}, {StrAttr("mode", "linear"), IntAttr("antialias", 1), IntsAttr("axes", {1})});
  auto r = op.Run({Floats({1, 4}, {1, 2, 3, 4}), Tensor(), Floats({1}, {0.5f})});
  ASSERT_TRUE(r.ok()) << r.status();
  const Tensor& y = (*r)[0].tensor;
  ASSERT_EQ(y.shape(), (Shape{1, 2}));
  testing::ExpectTensorNear(y, Floats({1, 2}, {1.625f, 3.375f}), 1e-5);
}

TEST(ImageOps, ResizeKeepAspectRatioNotLarger) {
  testing::OneNode op = Node("Resize", 18, {DType::kFloat32}, {StrAttr("mode", "nearest"), StrAttr("keep_aspect_ratio_policy", "not_larger"), IntsAttr("axes", {2, 3})});
  auto r = op.Run({Floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), Tensor(), Tensor(), Int64s({2}, {4, 4})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tensor.shape(), (Shape{1, 1, 2, 4}));  // scale min(2, 1) = 1
}

TEST(ImageOps, ResizeRejectsUnknownModesAtLoad) {
  testing::OneNode op = Node("Resize", 13, {DType::kFloat32}, {StrAttr("mode", "area")});
  EXPECT_EQ(op.Load({DType::kFloat32, DType::kUndefined, DType::kFloat32}).status().code(), absl::StatusCode::kUnimplemented);
  testing::OneNode op2 = Node("Resize", 13, {DType::kFloat32}, {StrAttr("coordinate_transformation_mode", "half_pixel_symmetric")});
  EXPECT_EQ(op2.Load({DType::kFloat32, DType::kUndefined, DType::kFloat32}).status().code(), absl::StatusCode::kUnimplemented);  // only from opset 19
}

TEST(ImageOps, ResizeBadScalesIsAnError) {
  testing::OneNode op = Node("Resize", 13, {DType::kFloat32});
  auto r = op.Run({Floats({2, 2}, {1, 2, 3, 4}), Tensor(), Floats({3}, {1, 1, 1})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ImageOps, GridSampleOpset20NamesAnd5DUnimplemented) {
  testing::OneNode op = Node("GridSample", 20, {DType::kFloat32}, {StrAttr("mode", "linear"), IntAttr("align_corners", 1)});
  auto r = op.Run({Floats({1, 1, 2, 2}, {1, 2, 3, 4}), Floats({1, 1, 1, 2}, {0, 0})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR((*r)[0].tensor.data<float>()[0], 2.5f, 1e-6);
  testing::OneNode bad = Node("GridSample", 16, {DType::kFloat32}, {StrAttr("mode", "linear")});
  EXPECT_FALSE(bad.Load({DType::kFloat32, DType::kFloat32}).ok());  // "linear" is the opset-20 name
  auto r5 = op.Run({Floats({1, 1, 1, 1, 1}, {1}), Floats({1, 1, 1, 1, 3}, {0, 0, 0})});
  EXPECT_EQ(r5.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ImageOps, NonMaxSuppressionWithoutOptionalInputsSelectsNothing) {
  testing::OneNode op = Node("NonMaxSuppression", 11, {DType::kInt64});
  auto r = op.Run({Floats({1, 1, 4}, {0, 0, 1, 1}), Floats({1, 1, 1}, {0.9f})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tensor.shape(), (Shape{0, 3}));
}

// ---------------------------------------------------------------- random

TEST(RandomOps, SeededStreamsAreReproducible) {
  testing::OneNode op = Node("RandomUniform", 17, {DType::kFloat64}, {FloatAttr("seed", 7), FloatAttr("low", -2), FloatAttr("high", 3), IntsAttr("shape", {3, 5}), IntAttr("dtype", 11)});
  auto a = op.Run({});
  auto b = op.Run({});
  ASSERT_TRUE(a.ok() && b.ok());
  const Tensor& ta = (*a)[0].tensor;
  ASSERT_EQ(ta.dtype(), DType::kFloat64);
  ASSERT_EQ(ta.shape(), (Shape{3, 5}));
  for (int64_t i = 0; i < 15; ++i) {
    EXPECT_EQ(ta.data<double>()[i], (*b)[0].tensor.data<double>()[i]);
    EXPECT_GE(ta.data<double>()[i], -2.0);
    EXPECT_LT(ta.data<double>()[i], 3.0);
  }
}

TEST(RandomOps, BernoulliAndMultinomialShapes) {
  testing::OneNode bern = Node("Bernoulli", 15, {DType::kInt32}, {IntAttr("dtype", 6), FloatAttr("seed", 1)});
  auto r = bern.Run({Floats({4}, {0, 1, 0, 1})});
  ASSERT_TRUE(r.ok()) << r.status();
  const Tensor& y = (*r)[0].tensor;
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(std::vector<int32_t>(y.data<int32_t>(), y.data<int32_t>() + 4), (std::vector<int32_t>{0, 1, 0, 1}));
  testing::OneNode multi = Node("Multinomial", 7, {DType::kInt64}, {IntAttr("dtype", 7), IntAttr("sample_size", 6)});
  auto m = multi.Run({Floats({2, 3}, {0, -1e9f, -1e9f, -1e9f, -1e9f, 0})});
  ASSERT_TRUE(m.ok()) << m.status();
  const Tensor& t = (*m)[0].tensor;
  ASSERT_EQ(t.shape(), (Shape{2, 6}));
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.data<int64_t>()[i], 0);
    EXPECT_EQ(t.data<int64_t>()[6 + i], 2);
  }
}

// ---------------------------------------------------------------- strings

TEST(StringOps, SplitFollowsPythonSemantics) {
  testing::OneNode ws = Node("StringSplit", 20, {DType::kString, DType::kInt64});
  auto r = ws.Run({Strings({3}, {"  a bb\tc ", "", "x"})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tensor.shape(), (Shape{3, 3}));
  EXPECT_EQ(StrVec((*r)[0].tensor), (std::vector<std::string>{"a", "bb", "c", "", "", "", "x", "", ""}));
  EXPECT_EQ(std::vector<int64_t>((*r)[1].tensor.data<int64_t>(), (*r)[1].tensor.data<int64_t>() + 3), (std::vector<int64_t>{3, 0, 1}));
  testing::OneNode delim = Node("StringSplit", 20, {DType::kString, DType::kInt64}, {StrAttr("delimiter", ","), IntAttr("maxsplit", 1)});
  auto d = delim.Run({Strings({2}, {"a,,b,c", ""})});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(StrVec((*d)[0].tensor), (std::vector<std::string>{"a", ",b,c", "", ""}));
  EXPECT_EQ((*d)[1].tensor.data<int64_t>()[1], 1);
}

TEST(StringOps, ConcatBroadcastsAndRegexFullMatch) {
  testing::OneNode cat = Node("StringConcat", 20, {DType::kString});
  auto r = cat.Run({Strings({2, 1}, {"a", "b"}), Strings({2}, {"x", "y"})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(StrVec((*r)[0].tensor), (std::vector<std::string>{"ax", "ay", "bx", "by"}));
  testing::OneNode re = Node("RegexFullMatch", 20, {DType::kBool}, {StrAttr("pattern", "www\\.[\\w.-]+\\.\\bcom\\b")});
  auto m = re.Run({Strings({3}, {"www.google.com", "www.facebook.com", "www.bbc.co.uk"})});
  ASSERT_TRUE(m.ok()) << m.status();
  const bool* b = (*m)[0].tensor.data<bool>();
  EXPECT_TRUE(b[0]);
  EXPECT_TRUE(b[1]);
  EXPECT_FALSE(b[2]);
  testing::OneNode bad = Node("RegexFullMatch", 20, {DType::kBool}, {StrAttr("pattern", "(")});
  EXPECT_FALSE(bad.Load({DType::kString}).ok());
  testing::OneNode backref = Node("RegexFullMatch", 20, {DType::kBool}, {StrAttr("pattern", "(a)\\1")});
  EXPECT_FALSE(backref.Load({DType::kString}).ok());  // RE2 has no back-references either
  // A long input must not exhaust the stack.
  testing::OneNode star = Node("RegexFullMatch", 20, {DType::kBool}, {StrAttr("pattern", "(a|b)*c")});
  auto big = star.Run({Strings({1}, {std::string(1000000, 'a') + "c"})});
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_TRUE((*big)[0].tensor.data<bool>()[0]);
}

TEST(StringOps, NormalizerCaseFoldsUtf8AndRejectsOtherLocales) {
  testing::OneNode up = Node("StringNormalizer", 10, {DType::kString}, {StrAttr("case_change_action", "UPPER"), StrsAttr("stopwords", {"ÉTÉ"})});
  auto r = up.Run({Strings({3}, {"été", "straße", "ça"})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(StrVec((*r)[0].tensor), (std::vector<std::string>{"STRAßE", "ÇA"}));
  testing::OneNode fr = Node("StringNormalizer", 10, {DType::kString}, {StrAttr("locale", "fr_FR")});
  EXPECT_EQ(fr.Load({DType::kString}).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(StringOps, TfIdfStringsWithWeights) {
  const Attribute pool = StrsAttr("pool_strings", {"a", "b", "a", "b"});
  const Attribute w = FloatsAttr("weights", {2, 3, 5});
  testing::OneNode op = Node("TfIdfVectorizer", 9, {DType::kFloat32}, {StrAttr("mode", "TFIDF"), IntAttr("min_gram_length", 1), IntAttr("max_gram_length", 2), IntAttr("max_skip_count", 0),
              IntsAttr("ngram_counts", {0, 2}), IntsAttr("ngram_indexes", {0, 1, 2}), pool, w});
  auto r = op.Run({Strings({5}, {"a", "b", "a", "b", "c"})});
  ASSERT_TRUE(r.ok()) << r.status();
  const float* y = (*r)[0].tensor.data<float>();
  EXPECT_FLOAT_EQ(y[0], 4);   // "a" twice * 2
  EXPECT_FLOAT_EQ(y[1], 6);   // "b" twice * 3
  EXPECT_FLOAT_EQ(y[2], 10);  // "a b" twice * 5
}

}  // namespace
}  // namespace oneinfer
