// The fused QDQ MatMul kernels: oneinfer.internal QdqMatMul (written by the qdq_fusion pass) and the
// constant-weight QLinearMatMul / MatMulInteger bindings, all on quant/qdq_gemm.h.
//
// Inputs of QdqMatMul, in QLinearMatMul's order: x_q, x_scale, x_zero_point?, w_q, w_scale,
// w_zero_point?, y_scale?, y_zero_point?; attributes `out` ("float32", "int8", "uint8") and
// `y_axis` (0 per tensor, 1 per row, 2 per column); "int8_as_float32" / "uint8_as_float32" quantise
// the output and return it dequantised with the same y_scale and y_zero_point (a folded Q -> DQ).
// Everything but x_q is a constant.
//
// Rows run in blocks so the int32 products never need more than one block of scratch (from the
// session's allocator, so it counts in peak_intermediate_bytes). int8 activations with int8
// weights go through the session's offload (KernelConfig::int8_offload, the NPU router) when it
// has one, which decides what leaves the host; uint8 weights go through it without a device
// operand (always the host); uint8 activations never do (the device contract is int8 x int8).
#include "ops/qdq_matmul.h"

#include <atomic>
#include <map>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "base/gemm_offload.h"
#include "base/mapped_file.h"
#include "graph/internal_ops.h"
#include "ops/op_util.h"
#include "quant/qdq_gemm.h"

namespace oneinfer {

namespace {

// Scratch budget for one block of int32 products (rows x N).
constexpr int64_t kBlockScratchBytes = int64_t{256} << 10;
// At least this many rows per block, so a 32-token prefill streams each weight once, whatever N.
constexpr int64_t kMinBlockRows = 32;
// Rows per block when a device design serves the shape: fewer, longer launches.
constexpr int64_t kDeviceBlockRows = 256;
// The most K for which |sum_k (a - za)(b - zb)| < 2^31: MatMulInteger and QLinearMatMul then need
// no int32 wrap-around to match their reference.
constexpr int64_t kNoWrapMaxK = 33025;

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

std::vector<int32_t> Ints(const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::kUInt8 ? int32_t{t.data<uint8_t>()[i]} : int32_t{t.data<int8_t>()[i]};
  }
  return v;
}

std::vector<float> Floats(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.num_elements()}; }

bool Scalar(const Tensor& t) { return t.num_elements() == 1 && t.rank() <= 1; }
bool ScalarOrVector(const Tensor& t) { return Scalar(t) || t.rank() == 1; }

class QdqMatMulKernel : public OpKernel {
 public:
  // offload: the session's (null: host only); it outlives this kernel.
  QdqMatMulKernel(std::unique_ptr<QdqGemm> gemm, Tensor w, bool runtime_zp_x, Int8GemmOffload* offload)
      : gemm_(std::move(gemm)), w_(std::move(w)), runtime_zp_x_(runtime_zp_x),
        offload_(offload != nullptr && offload->configured() ? offload : nullptr) {}

  ~QdqMatMulKernel() override {
    // The offload caches device images by weight pointer; this weight goes away with the session.
    if (routed_.load(std::memory_order_relaxed) && gemm_->weight_s8() != nullptr) {
      offload_->ForgetWeight(gemm_->weight_s8());
    }
  }

  // Row-wise when no parameter is periodic over rows (per-row activation or output scales index
  // rows by their position in the whole input) and the zero point is not a run-time input.
  int RowwiseInput() const override {
    const QdqGemmParams& p = gemm_->params();
    const bool row_params = p.s_x.size() > 1 || p.zp_x.size() > 1 ||
                            (p.y_axis == QdqYAxis::kRow && (p.s_y.size() > 1 || p.zp_y.size() > 1));
    return row_params || runtime_zp_x_ ? -1 : 0;
  }

  absl::Status PrepareWeights(ThreadPool* /*pool*/) const override {
    std::call_once(released_once_, [&] {
      gemm_->Prepare();
      // The packed copy serves the host; the graph's own row-major weight stays resident only
      // when the device will take this shape (it is the device's upload source).
      const bool device =
          gemm_->weight_s8() != nullptr && offload_ != nullptr && offload_->PrepareDesign(gemm_->K(), gemm_->N());
      if (!device) ReleaseMappedPages(w_);
    });
    return absl::OkStatus();
  }

  absl::Status Compute(OpContext& ctx) const override {
    const QdqGemmParams& p = gemm_->params();
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "the activation input is required");
    const Tensor& x = ctx.input(0);
    if (!Is8Bit(x.dtype())) return InvalidArgument(ctx, "x must be int8 or uint8, got ", DTypeName(x.dtype()));
    const bool a_unsigned = x.dtype() == DType::kUInt8;
    if (!p.zp_x.empty() && a_unsigned != p.x_unsigned) {
      return InvalidArgument(ctx, "x_zero_point type ", p.x_unsigned ? "uint8" : "int8", " differs from x type ",
                             DTypeName(x.dtype()));
    }
    if (x.rank() < 1 || x.dim(-1) != p.K) {
      return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(x.shape()), " x [", p.K, ", ", p.N, "]");
    }
    const int64_t row_dim = x.rank() >= 2 ? x.dim(-2) : 1;
    auto check_rows = [&](size_t len, const char* what) -> absl::Status {
      if (len > 1 && static_cast<int64_t>(len) != row_dim) {
        return InvalidArgument(ctx, what, " has ", len, " values but x ", ShapeToString(x.shape()), " has ", row_dim,
                               " rows");
      }
      return absl::OkStatus();
    };
    if (auto s = check_rows(p.s_x.size(), "x_scale"); !s.ok()) return s;
    if (p.y_axis == QdqYAxis::kRow) {
      if (auto s = check_rows(p.s_y.size(), "y_scale"); !s.ok()) return s;
    }
    std::vector<int32_t> zp_x;
    if (runtime_zp_x_ && ctx.has_input(2)) {
      const Tensor& z = ctx.input(2);
      if (z.dtype() != x.dtype()) {
        return InvalidArgument(ctx, "a_zero_point type ", DTypeName(z.dtype()), " differs from its input's type ",
                               DTypeName(x.dtype()));
      }
      if (!(Scalar(z) || (z.rank() == 1 && z.dim(0) == row_dim))) {
        return InvalidArgument(ctx, "a_zero_point must be a scalar or 1-D of length ", row_dim, ", got shape ",
                               ShapeToString(z.shape()));
      }
      zp_x = Ints(z);
    }
    Shape out = x.shape();
    out.back() = p.N;
    const DType out_type = p.out == QdqOut::kInt8    ? DType::kInt8
                           : p.out == QdqOut::kUInt8 ? DType::kUInt8
                           : p.out == QdqOut::kInt32 ? DType::kInt32
                                                     : DType::kFloat32;  // float, or dequantised again
    Tensor& y = ctx.AllocateOutputUninitialized(0, out_type, out);
    const int64_t rows = x.num_elements() / p.K;
    if (rows == 0) return absl::OkStatus();
    PrepareWeights(nullptr).IgnoreError();  // a no-op after the session's load-time call

    // int8 x int8 goes through the offload when the session has one (none: no lock, no trace
    // line); uint8 weights pass no device operand (host, traced).
    Int8GemmOffload* offload = a_unsigned ? nullptr : offload_;
    int64_t block = std::max<int64_t>(kMinBlockRows, kBlockScratchBytes / (4 * p.N) / 16 * 16);
    if (offload != nullptr && offload->HasDesign(p.K, p.N)) block = std::max(block, kDeviceBlockRows);
    // A tail too short to leave the host joins the block before it.
    const int64_t min_tail = offload != nullptr ? offload->min_offload_rows() : 1;
    const int64_t max_block = std::min(rows, block + min_tail - 1);
    Tensor scratch = ctx.AllocateTemp(DType::kInt32, {max_block, p.N}, /*zero=*/false);
    int32_t* c = scratch.data<int32_t>();
    const size_t esize = DTypeSize(x.dtype()), ysize = DTypeSize(out_type);
    ThreadPool* pool = ctx.thread_pool();
    for (int64_t r0 = 0; r0 < rows;) {
      int64_t len = std::min(block, rows - r0);
      if (rows - r0 - len < min_tail) len = rows - r0;
      const char* a = static_cast<const char*>(x.raw_data()) + static_cast<size_t>(r0 * p.K) * esize;
      bool offloaded = false;
      if (offload != nullptr) {
        routed_.store(true, std::memory_order_relaxed);
        auto host = [&](int64_t m, int64_t, int64_t, const int8_t* am, const int8_t*, int32_t* cm) {
          gemm_->HostProducts(m, am, false, cm, pool);
        };
        absl::Status st = offload->RunGemmS8(len, p.K, p.N, reinterpret_cast<const int8_t*>(a), gemm_->weight_s8(), c,
                                             host, &offloaded);
        if (!st.ok()) return InvalidArgument(ctx, st.message());  // only for invalid arguments
      } else {
        gemm_->HostProducts(len, a, a_unsigned, c, pool);
      }
      const auto t0 = std::chrono::steady_clock::now();
      gemm_->Epilogue(len, r0, a, a_unsigned, c, static_cast<char*>(y.raw_data()) + static_cast<size_t>(r0 * p.N) * ysize,
                      pool, runtime_zp_x_ ? zp_x.data() : nullptr, zp_x.size());
      if (offloaded) {
        offload->AddEpilogueNs(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
      }
      r0 += len;
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<QdqGemm> gemm_;
  Tensor w_;  // keeps the weight the gemm (and the offload's identity) points at alive
  bool runtime_zp_x_;
  Int8GemmOffload* offload_;  // null when the session has none with designs
  mutable std::atomic<bool> routed_{false};
  mutable std::once_flag released_once_;
};

// Reads a constant scale (float32 only) or returns false.
bool ConstScale(const KernelInit& init, size_t i, std::vector<float>* out) {
  const Tensor* t = init.ConstantInput(i);
  if (t == nullptr || t->dtype() != DType::kFloat32 || !ScalarOrVector(*t) || t->num_elements() < 1) return false;
  *out = Floats(*t);
  return true;
}

// Reads an optional constant zero point of type `type` with `count` values (0 = absent).
bool ConstZeroPoint(const KernelInit& init, size_t i, DType type, size_t count, std::vector<int32_t>* out) {
  if (!init.node().HasInput(i)) return true;
  const Tensor* t = init.ConstantInput(i);
  if (t == nullptr || t->dtype() != type || !ScalarOrVector(*t) || static_cast<size_t>(t->num_elements()) != count) {
    return false;
  }
  *out = Ints(*t);
  return true;
}

std::unique_ptr<OpKernel> Finish(const KernelInit& init, QdqGemmParams p, const Tensor& w, bool runtime_zp_x) {
  p.trace = init.config().qdq_trace;
  auto gemm = QdqGemm::Create(std::move(p));
  if (!gemm.ok()) return nullptr;
  return std::make_unique<QdqMatMulKernel>(std::move(*gemm), w, runtime_zp_x, init.config().int8_offload);
}

// The activation type of input 0 when the graph declares it, else kUndefined.
DType DeclaredType(const KernelInit& init, size_t i) {
  const TypeInfo* t = init.InputType(i);
  return t != nullptr && t->kind == TypeInfo::Kind::kTensor ? t->elem : DType::kUndefined;
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeQdqMatMul(const KernelInit& init) {
  const Node& n = init.node();
  const Tensor* w = init.ConstantInput(3);
  if (w == nullptr || !Is8Bit(w->dtype()) || w->rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": the fused QDQ MatMul needs a constant 2-D int8 or uint8 weight"));
  }
  QdqGemmParams p;
  p.K = w->dim(0);
  p.N = w->dim(1);
  p.w = w->raw_data();
  p.w_unsigned = w->dtype() == DType::kUInt8;
  const std::string out = n.GetString(internal_ops::QdqMatMul::kOut, "float32");
  static const std::map<std::string, QdqOut> kOuts = {{"float32", QdqOut::kFloat32},
                                                      {"int8", QdqOut::kInt8},
                                                      {"uint8", QdqOut::kUInt8},
                                                      {"int8_as_float32", QdqOut::kInt8AsFloat32},
                                                      {"uint8_as_float32", QdqOut::kUInt8AsFloat32}};
  const auto known = kOuts.find(out);
  if (known == kOuts.end()) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": out '", out,
                                                   "' is not one of float32, int8, uint8, int8_as_float32, uint8_as_float32"));
  }
  p.out = known->second;
  const int64_t y_axis = n.GetInt(internal_ops::QdqMatMul::kYAxis, 0);
  if (y_axis < 0 || y_axis > 2) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": y_axis ", y_axis, " is not 0 (tensor), 1 (row) or 2 (column)"));
  }
  p.y_axis = y_axis == 1 ? QdqYAxis::kRow : y_axis == 2 ? QdqYAxis::kColumn : QdqYAxis::kTensor;
  const Tensor* zx = n.HasInput(2) ? init.ConstantInput(2) : nullptr;
  p.x_unsigned = zx != nullptr ? zx->dtype() == DType::kUInt8 : DeclaredType(init, 0) == DType::kUInt8;
  bool ok = ConstScale(init, 1, &p.s_x) && ConstScale(init, 4, &p.s_w) &&
            ConstZeroPoint(init, 2, p.x_unsigned ? DType::kUInt8 : DType::kInt8, p.s_x.size(), &p.zp_x) &&
            ConstZeroPoint(init, 5, w->dtype(), p.s_w.size(), &p.zp_w);
  if (ok && p.out != QdqOut::kFloat32) {
    ok = ConstScale(init, 6, &p.s_y) &&
         ConstZeroPoint(init, 7, QdqOutputUnsigned(p.out) ? DType::kUInt8 : DType::kInt8, p.s_y.size(), &p.zp_y);
  }
  if (!ok) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": scales and zero points must be constants of matching shapes and types"));
  p.trace = init.config().qdq_trace;
  auto gemm = QdqGemm::Create(std::move(p));
  if (!gemm.ok()) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": ", gemm.status().message()));
  return std::unique_ptr<OpKernel>(
      std::make_unique<QdqMatMulKernel>(std::move(*gemm), *w, false, init.config().int8_offload));
}

}  // namespace

std::unique_ptr<OpKernel> MakeFusedQLinearMatMul(const KernelInit& init) {
  const Node& n = init.node();
  for (size_t i : {1, 3, 4, 6}) {
    if (!n.HasInput(i) || init.ConstantInput(i) == nullptr) return nullptr;
  }
  const Tensor& b = *init.ConstantInput(3);
  if (!Is8Bit(b.dtype()) || b.rank() != 2 || b.dim(0) < 1 || b.dim(0) > kNoWrapMaxK || b.dim(1) < 1) return nullptr;
  QdqGemmParams p;
  p.K = b.dim(0);
  p.N = b.dim(1);
  p.w = b.raw_data();
  p.w_unsigned = b.dtype() == DType::kUInt8;
  // The activation type: a_zero_point's, else the declared one.
  const Tensor* za = n.HasInput(2) ? init.ConstantInput(2) : nullptr;
  if (n.HasInput(2) && za == nullptr) return nullptr;
  DType at = za != nullptr ? za->dtype() : DeclaredType(init, 0);
  if (!Is8Bit(at)) return nullptr;
  p.x_unsigned = at == DType::kUInt8;
  if (!ConstScale(init, 1, &p.s_x) || !ConstScale(init, 4, &p.s_w) || !ConstScale(init, 6, &p.s_y)) return nullptr;
  if (p.s_w.size() != 1 && static_cast<int64_t>(p.s_w.size()) != p.N) return nullptr;
  if (!ConstZeroPoint(init, 2, at, p.s_x.size(), &p.zp_x) || !ConstZeroPoint(init, 5, b.dtype(), p.s_w.size(), &p.zp_w)) {
    return nullptr;
  }
  // The output type is y_zero_point's, a's when absent.
  DType yt = at;
  if (n.HasInput(7)) {
    const Tensor* zy = init.ConstantInput(7);
    if (zy == nullptr || !Is8Bit(zy->dtype())) return nullptr;
    yt = zy->dtype();
    if (!ConstZeroPoint(init, 7, yt, p.s_y.size(), &p.zp_y)) return nullptr;
  }
  p.out = yt == DType::kUInt8 ? QdqOut::kUInt8 : QdqOut::kInt8;
  p.y_axis = QdqYAxis::kRow;  // QLinearMatMul's y_scale is per tensor or per row of a
  return Finish(init, std::move(p), b, false);
}

std::unique_ptr<OpKernel> MakeFusedMatMulInteger(const KernelInit& init) {
  const Node& n = init.node();
  const Tensor* b = init.ConstantInput(1);
  if (b == nullptr || !Is8Bit(b->dtype()) || b->rank() != 2 || b->dim(0) < 1 || b->dim(0) > kNoWrapMaxK || b->dim(1) < 1) {
    return nullptr;
  }
  QdqGemmParams p;
  p.K = b->dim(0);
  p.N = b->dim(1);
  p.w = b->raw_data();
  p.w_unsigned = b->dtype() == DType::kUInt8;
  p.out = QdqOut::kInt32;
  if (n.HasInput(3)) {
    const Tensor* zb = init.ConstantInput(3);
    if (zb == nullptr || zb->dtype() != b->dtype() || !(Scalar(*zb) || (zb->rank() == 1 && zb->dim(0) == p.N))) {
      return nullptr;
    }
    p.zp_w = Ints(*zb);
    p.s_w.assign(p.zp_w.size(), 1.0f);
  }
  // a_zero_point is read each run (DynamicQuantizeLinear computes it), checked there.
  return Finish(init, std::move(p), *b, true);
}

void RegisterQdqMatMulOps(KernelRegistry& r) {
  using internal_ops::kDomain, internal_ops::kOpset;
  r.Add(kDomain, internal_ops::QdqMatMul::kName, kOpset, kOpset, MakeQdqMatMul);
}

}  // namespace oneinfer
