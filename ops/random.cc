// Random generators: RandomUniform/Normal(+Like), Bernoulli, Multinomial.
//
// With a `seed` attribute a kernel owns a std::mt19937 seeded from it, so a session replays the
// same stream run after run; without one the engine is seeded from std::random_device. Values
// do not match other runtimes' streams (ONNX leaves the generator unspecified).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "ops/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16; }

// The seed attribute is a float. One past int64's range, or NaN, seeds from its bits: converting
// it would be undefined behaviour (found by fuzz_model).
uint32_t SeedFrom(float f) {
  if (std::isfinite(f) && std::fabs(f) < 9.2e18f) return static_cast<uint32_t>(static_cast<int64_t>(f));
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

class RandomKernel : public OpKernel {
 public:
  enum class Kind { kUniform, kNormal, kUniformLike, kNormalLike, kBernoulli, kMultinomial };

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInit& init, Kind kind) {
    const Node& n = init.node();
    std::unique_ptr<RandomKernel> k(new RandomKernel());
    k->kind_ = kind;
    if (const Attribute* s = n.FindAttr("seed")) {
      k->engine_.seed(SeedFrom(s->f));
    } else {
      std::random_device rd;
      k->engine_.seed(rd());
    }
    k->a_ = n.GetFloat(kind == Kind::kNormal || kind == Kind::kNormalLike ? "mean" : "low", 0.0f);
    k->b_ = n.GetFloat(kind == Kind::kNormal || kind == Kind::kNormalLike ? "scale" : "high", 1.0f);
    const int64_t def_dtype = kind == Kind::kMultinomial ? 6 : kind == Kind::kUniform || kind == Kind::kNormal ? 1 : 0;
    k->dtype_ = static_cast<DType>(n.GetInt("dtype", def_dtype));  // 0: follow the input
    switch (kind) {
      case Kind::kUniform:
      case Kind::kNormal:
        if (!n.HasAttr("shape")) return absl::InvalidArgumentError("the shape attribute is required");
        k->shape_ = n.GetInts("shape");
        for (int64_t d : k->shape_) if (d < 0) return absl::InvalidArgumentError("shape has a negative dimension");
        [[fallthrough]];
      case Kind::kUniformLike:
      case Kind::kNormalLike:
        if (k->dtype_ != DType::kUndefined && !IsFloat(k->dtype_)) {
          return Unimplemented(n, "unsupported dtype ", DTypeName(k->dtype_), " (float types only)");
        }
        break;
      case Kind::kBernoulli:
        if (k->dtype_ != DType::kUndefined) {
          auto s = VisitNumeric(k->dtype_, [](auto) { return absl::OkStatus(); });
          if (!s.ok()) return Unimplemented(n, "unsupported dtype ", DTypeName(k->dtype_));
        }
        break;
      case Kind::kMultinomial:
        if (k->dtype_ != DType::kInt32 && k->dtype_ != DType::kInt64) return Unimplemented(n, "dtype must be int32 or int64");
        k->samples_ = n.GetInt("sample_size", 1);
        if (k->samples_ < 0) return absl::InvalidArgumentError("sample_size must be non-negative");
        break;
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  absl::Status Compute(OpContext& ctx) const override {
    std::lock_guard<std::mutex> lock(mu_);  // one stream per kernel, shared by concurrent runs
    switch (kind_) {
      case Kind::kUniform:
      case Kind::kNormal:
        return Fill(ctx, dtype_, shape_);
      case Kind::kUniformLike:
      case Kind::kNormalLike: {
        if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
        const DType dt = dtype_ != DType::kUndefined ? dtype_ : ctx.input(0).dtype();
        if (!IsFloat(dt)) return InvalidArgument(ctx, "output dtype must be a float type, got ", DTypeName(dt), " (set dtype)");
        return Fill(ctx, dt, ctx.input(0).shape());
      }
      case Kind::kBernoulli:
        return Bernoulli(ctx);
      case Kind::kMultinomial:
        return Multinomial(ctx);
    }
    return absl::InternalError("unreachable");
  }

 private:
  absl::Status Fill(OpContext& ctx, DType dt, const Shape& shape) const {
    Tensor& y = ctx.AllocateOutput(0, dt, shape);
    const int64_t n = y.num_elements();
    const bool normal = kind_ == Kind::kNormal || kind_ == Kind::kNormalLike;
    return VisitNumeric(dt, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      T* o = y.data<T>();
      std::uniform_real_distribution<double> uni(0.0, 1.0);
      std::normal_distribution<double> norm(0.0, 1.0);
      for (int64_t i = 0; i < n; ++i) {
        const double v = normal ? a_ + b_ * norm(engine_) : a_ + (b_ - a_) * uni(engine_);
        if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) o[i] = static_cast<T>(static_cast<float>(v));
        else o[i] = static_cast<T>(v);
      }
      return absl::OkStatus();
    });
  }

  absl::Status Bernoulli(OpContext& ctx) const {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
    const Tensor& x = ctx.input(0);
    if (!IsFloat(x.dtype())) return InvalidArgument(ctx, "input must be a float tensor, got ", DTypeName(x.dtype()));
    const DType dt = dtype_ != DType::kUndefined ? dtype_ : x.dtype();
    Tensor& y = ctx.AllocateOutput(0, dt, x.shape());
    const int64_t n = x.num_elements();
    std::vector<double> p(static_cast<size_t>(n));
    absl::Status s = VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<double>(static_cast<float>(x.data<T>()[i]));
      if constexpr (std::is_same_v<T, double>) for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = x.data<double>()[i];
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    for (double v : p) if (!(v >= 0 && v <= 1)) return InvalidArgument(ctx, "probabilities must lie in [0, 1], got ", v);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    return VisitNumeric(dt, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      T* o = y.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const bool one = uni(engine_) < p[static_cast<size_t>(i)];
        if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) o[i] = static_cast<T>(one ? 1.0f : 0.0f);
        else o[i] = static_cast<T>(one ? 1 : 0);
      }
      return absl::OkStatus();
    });
  }

  absl::Status Multinomial(OpContext& ctx) const {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
    const Tensor& x = ctx.input(0);
    if (!IsFloat(x.dtype())) return InvalidArgument(ctx, "input must be a float tensor, got ", DTypeName(x.dtype()));
    if (x.rank() != 2) return InvalidArgument(ctx, "input must be (batch, class_size), got ", ShapeToString(x.shape()));
    const int64_t B = x.dim(0), K = x.dim(1);
    if (K < 1 && samples_ > 0) return InvalidArgument(ctx, "class_size must be positive");
    std::vector<double> logits(static_cast<size_t>(B * K));
    absl::Status s = VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<double>(static_cast<float>(x.data<T>()[i]));
      if constexpr (std::is_same_v<T, double>) for (size_t i = 0; i < logits.size(); ++i) logits[i] = x.data<double>()[i];
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    Tensor& y = ctx.AllocateOutput(0, dtype_, {B, samples_});
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    std::vector<double> cdf(static_cast<size_t>(K));
    for (int64_t b = 0; b < B; ++b) {
      // The input holds unnormalised log-probabilities: a softmax gives the CDF.
      const double* l = &logits[static_cast<size_t>(b * K)];
      double mx = -INFINITY;
      for (int64_t k = 0; k < K; ++k) mx = std::max(mx, l[k]);
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) cdf[static_cast<size_t>(k)] = acc += std::exp(l[k] - mx);
      for (int64_t j = 0; j < samples_; ++j) {
        const double u = uni(engine_) * acc;
        int64_t k = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
        k = std::min(k, K - 1);
        if (dtype_ == DType::kInt32) y.data<int32_t>()[b * samples_ + j] = static_cast<int32_t>(k);
        else y.data<int64_t>()[b * samples_ + j] = k;
      }
    }
    return absl::OkStatus();
  }

  Kind kind_ = Kind::kUniform;
  double a_ = 0, b_ = 1;
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t samples_ = 1;
  mutable std::mutex mu_;
  mutable std::mt19937 engine_;
};

KernelFactory RandomFactory(RandomKernel::Kind kind) {
  return [kind](const KernelInit& init) { return RandomKernel::Create(init, kind); };
}

}  // namespace

void RegisterRandomOps(KernelRegistry& r) {
  using K = RandomKernel::Kind;
  AddVersions(r, "RandomUniform", {1, 22}, RandomFactory(K::kUniform));
  AddVersions(r, "RandomNormal", {1, 22}, RandomFactory(K::kNormal));
  AddVersions(r, "RandomUniformLike", {1, 22}, RandomFactory(K::kUniformLike));
  AddVersions(r, "RandomNormalLike", {1, 22}, RandomFactory(K::kNormalLike));
  AddVersions(r, "Bernoulli", {15, 22}, RandomFactory(K::kBernoulli));
  AddVersions(r, "Multinomial", {7, 22}, RandomFactory(K::kMultinomial));
}

}  // namespace oneinfer
