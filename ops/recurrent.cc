// Recurrent operators: RNN, GRU, LSTM (forward / reverse / bidirectional, sequence_lens, initial states,
// the full ONNX activation list with activation_alpha/beta, clip, layout, every optional output).
// float16/bfloat16 compute in float, double in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "absl/strings/ascii.h"
#include "ops/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

enum class ActKind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                     kSoftsign, kSoftplus };

struct Act {
  ActKind kind = ActKind::kTanh;
  float alpha = 0, beta = 0;
  template <typename T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    switch (kind) {
      case ActKind::kRelu: return std::max(x, T(0));
      case ActKind::kTanh: return std::tanh(x);
      case ActKind::kSigmoid: return T(1) / (T(1) + std::exp(-x));
      case ActKind::kAffine: return a * x + b;
      case ActKind::kLeakyRelu: return x >= T(0) ? x : a * x;
      case ActKind::kThresholdedRelu: return x >= a ? x : T(0);  // RNN spec: x if x >= alpha
      case ActKind::kScaledTanh: return a * std::tanh(b * x);
      case ActKind::kHardSigmoid: return std::min(std::max(a * x + b, T(0)), T(1));
      case ActKind::kElu: return x >= T(0) ? x : a * (std::exp(x) - T(1));
      case ActKind::kSoftsign: return x / (T(1) + std::abs(x));
      case ActKind::kSoftplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

// Name -> kind with the default alpha/beta of the matching ONNX operator; flags say which it consumes.
bool LookupAct(const std::string& name, Act* act, bool* uses_alpha, bool* uses_beta) {
  struct Def { const char* name; ActKind kind; float alpha, beta; bool ua, ub; };
  static const Def defs[] = {
      {"relu", ActKind::kRelu, 0, 0, false, false},
      {"tanh", ActKind::kTanh, 0, 0, false, false},
      {"sigmoid", ActKind::kSigmoid, 0, 0, false, false},
      {"affine", ActKind::kAffine, 1.0f, 0.0f, true, true},
      {"leakyrelu", ActKind::kLeakyRelu, 0.01f, 0, true, false},
      {"thresholdedrelu", ActKind::kThresholdedRelu, 1.0f, 0, true, false},
      {"scaledtanh", ActKind::kScaledTanh, 1.0f, 1.0f, true, true},
      {"hardsigmoid", ActKind::kHardSigmoid, 0.2f, 0.5f, true, true},
      {"elu", ActKind::kElu, 1.0f, 0, true, false},
      {"softsign", ActKind::kSoftsign, 0, 0, false, false},
      {"softplus", ActKind::kSoftplus, 0, 0, false, false},
  };
  const std::string lower = absl::AsciiStrToLower(name);
  for (const Def& d : defs) {
    if (lower == d.name) {
      *act = Act{d.kind, d.alpha, d.beta};
      *uses_alpha = d.ua;
      *uses_beta = d.ub;
      return true;
    }
  }
  return false;
}

enum class Cell { kRNN, kGRU, kLSTM };

struct RnnAttrs {
  Cell cell = Cell::kRNN;
  int64_t gates = 1;        // G: 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c)
  int64_t hidden = -1;      // hidden_size attribute (-1: from R)
  int64_t dirs = 1;
  bool reverse = false;     // direction == "reverse"
  int64_t per_dir = 1;      // activations per direction
  std::vector<Act> acts;    // dirs * per_dir
  float clip = std::numeric_limits<float>::infinity();
  bool linear_before_reset = false;
  bool input_forget = false;
  int64_t layout = 0;
};

absl::StatusOr<RnnAttrs> ReadAttrs(const KernelInit& init, Cell cell) {
  const Node& n = init.node();
  RnnAttrs a;
  a.cell = cell;
  a.gates = cell == Cell::kRNN ? 1 : cell == Cell::kGRU ? 3 : 4;
  a.per_dir = cell == Cell::kRNN ? 1 : cell == Cell::kGRU ? 2 : 3;
  a.hidden = n.GetInt("hidden_size", -1);
  if (n.HasAttr("hidden_size") && a.hidden <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": hidden_size must be positive, got ", a.hidden));
  }
  const std::string dir = n.GetString("direction", "forward");
  if (dir == "bidirectional") {
    a.dirs = 2;
  } else if (dir == "reverse") {
    a.reverse = true;
  } else if (dir != "forward") {
    return Unimplemented(n, "unsupported direction '", dir, "'");
  }
  std::vector<std::string> names = n.GetStrings("activations");
  std::vector<std::string> defaults = cell == Cell::kRNN    ? std::vector<std::string>{"Tanh"}
                                      : cell == Cell::kGRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (names.empty()) names = defaults;
  // One direction's list is shared by both directions of a bidirectional op.
  if (a.dirs == 2 && static_cast<int64_t>(names.size()) == a.per_dir) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (static_cast<int64_t>(names.size()) != a.dirs * a.per_dir) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": expected ", a.dirs * a.per_dir, " activations, got ",
                                                   names.size()));
  }
  // activation_alpha/beta are consumed in order by the activations that take them.
  const std::vector<float> alphas = n.GetFloats("activation_alpha"), betas = n.GetFloats("activation_beta");
  size_t ai = 0, bi = 0;
  for (const std::string& name : names) {
    Act act;
    bool ua = false, ub = false;
    if (!LookupAct(name, &act, &ua, &ub)) return Unimplemented(n, "unsupported activation '", name, "'");
    if (ua && ai < alphas.size()) act.alpha = alphas[ai++];
    if (ub && bi < betas.size()) act.beta = betas[bi++];
    a.acts.push_back(act);
  }
  if (n.HasAttr("clip")) {
    a.clip = n.GetFloat("clip", 0);
    if (!(a.clip > 0)) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": clip must be positive, got ", a.clip));
  }
  if (cell == Cell::kGRU) {
    const int64_t lbr = n.GetInt("linear_before_reset", 0);
    if (lbr != 0 && lbr != 1) return Unimplemented(n, "linear_before_reset must be 0 or 1, got ", lbr);
    a.linear_before_reset = lbr == 1;
  }
  if (cell == Cell::kLSTM) a.input_forget = n.GetInt("input_forget", 0) != 0;
  if (init.opset() >= 14) a.layout = n.GetInt("layout", 0);
  if (a.layout != 0 && a.layout != 1) return Unimplemented(n, "unsupported layout ", a.layout);
  return a;
}

template <typename T>
std::vector<T> ToVec(const Tensor& t) {
  Tensor c = *CastTensor(t, DTypeOf<T>());
  return std::vector<T>(c.data<T>(), c.data<T>() + c.num_elements());
}

template <typename T>
void Emit(OpContext& ctx, size_t i, DType dtype, const Shape& shape, const std::vector<T>& v) {
  Tensor& out = ctx.AllocateOutput(i, dtype, shape);
  (void)VisitNumeric(dtype, [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U* o = out.data<U>();
    for (size_t k = 0; k < v.size(); ++k) {
      if constexpr (std::is_same_v<U, double>) o[k] = static_cast<double>(v[k]);
      else o[k] = static_cast<U>(static_cast<float>(v[k]));
    }
    return absl::OkStatus();
  });
}

template <typename T>
absl::Status RunRnn(OpContext& ctx, const RnnAttrs& a) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat>;
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor& R = ctx.input(2);
  const DType dt = X.dtype();
  if (W.dtype() != dt || R.dtype() != dt) return InvalidArgument(ctx, "X, W and R must share one type");
  if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3) return InvalidArgument(ctx, "X, W and R must have rank 3");
  const int64_t S = a.layout == 0 ? X.dim(0) : X.dim(1), B = a.layout == 0 ? X.dim(1) : X.dim(0), I = X.dim(2);
  const int64_t D = a.dirs, G = a.gates;
  const int64_t H = a.hidden > 0 ? a.hidden : R.dim(2);
  const int64_t GH = G * H;
  if (W.shape() != Shape{D, GH, I}) {
    return InvalidArgument(ctx, "W has shape ", ShapeToString(W.shape()), ", expected ", ShapeToString({D, GH, I}));
  }
  if (R.shape() != Shape{D, GH, H}) {
    return InvalidArgument(ctx, "R has shape ", ShapeToString(R.shape()), ", expected ", ShapeToString({D, GH, H}));
  }
  auto opt = [&](size_t i, const Shape& want, const char* what, std::vector<T>* out) -> absl::Status {
    if (!ctx.has_input(i)) return absl::OkStatus();
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dt) return InvalidArgument(ctx, what, " has type ", DTypeName(t.dtype()), ", expected ", DTypeName(dt));
    if (t.shape() != want) {
      return InvalidArgument(ctx, what, " has shape ", ShapeToString(t.shape()), ", expected ", ShapeToString(want));
    }
    *out = ToVec<T>(t);
    return absl::OkStatus();
  };
  const Shape state_shape = a.layout == 0 ? Shape{D, B, H} : Shape{B, D, H};
  std::vector<T> bias(static_cast<size_t>(D * 2 * GH), T(0)), h0, c0, peep;
  if (auto s = opt(3, {D, 2 * GH}, "B", &bias); !s.ok()) return s;
  if (auto s = opt(5, state_shape, "initial_h", &h0); !s.ok()) return s;
  if (a.cell == Cell::kLSTM) {
    if (auto s = opt(6, state_shape, "initial_c", &c0); !s.ok()) return s;
    if (auto s = opt(7, {D, 3 * H}, "P", &peep); !s.ok()) return s;
  }
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.input(4);
    auto v = ReadInts(sl);
    if (!v.ok() || sl.rank() != 1 || sl.dim(0) != B) return InvalidArgument(ctx, "sequence_lens must be a 1-D int32 tensor of length ", B);
    for (int64_t l : *v) if (l < 0 || l > S) return InvalidArgument(ctx, "sequence_lens value ", l, " is outside [0, ", S, "]");
    lens = *v;
  }
  // X in [S, B, I] order.
  std::vector<T> xs = ToVec<T>(X);
  if (a.layout == 1) {
    std::vector<T> t(xs.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        std::copy_n(&xs[static_cast<size_t>((b * S + s) * I)], I, &t[static_cast<size_t>((s * B + b) * I)]);
    xs.swap(t);
  }
  const std::vector<T> wv = ToVec<T>(W), rv = ToVec<T>(R);
  std::vector<T> Y(static_cast<size_t>(S * D * B * H), T(0)), Yh(static_cast<size_t>(D * B * H)), Yc(Yh.size());
  const T clip = static_cast<T>(a.clip);
  auto cl = [clip](T v) { return std::min(std::max(v, -clip), clip); };
  auto state_at = [&](int64_t d, int64_t b) { return a.layout == 0 ? (d * B + b) * H : (b * D + d) * H; };

  for (int64_t d = 0; d < D; ++d) {
    const bool rev = a.reverse || d == 1;
    const Act* act = &a.acts[static_cast<size_t>(d * a.per_dir)];
    CMap Wd(&wv[static_cast<size_t>(d * GH * I)], GH, I), Rd(&rv[static_cast<size_t>(d * GH * H)], GH, H);
    const T* wb = &bias[static_cast<size_t>(d * 2 * GH)];
    const T* rb = wb + GH;
    // Input projections of every step at once: XW[s*B + b] = X[s, b] W^T + Wb.
    Mat XW = CMap(xs.data(), S * B, I) * Wd.transpose();
    for (int64_t r = 0; r < S * B; ++r)
      for (int64_t k = 0; k < GH; ++k) XW(r, k) += wb[k];
    Mat h = Mat::Zero(B, H), c = Mat::Zero(B, H);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        if (!h0.empty()) h(b, j) = h0[static_cast<size_t>(state_at(d, b) + j)];
        if (!c0.empty()) c(b, j) = c0[static_cast<size_t>(state_at(d, b) + j)];
      }
    const T* p = peep.empty() ? nullptr : &peep[static_cast<size_t>(d * 3 * H)];
    Mat z(B, H), r(B, H);
    for (int64_t s = 0; s < S; ++s) {
      auto time_of = [&](int64_t b) { return rev ? lens[static_cast<size_t>(b)] - 1 - s : s; };
      auto valid = [&](int64_t b) { return s < lens[static_cast<size_t>(b)]; };
      if (a.cell == Cell::kRNN || a.cell == Cell::kLSTM) {
        const Mat HR = h * Rd.transpose();
        for (int64_t b = 0; b < B; ++b) {
          if (!valid(b)) continue;
          const T* xw = &XW(time_of(b) * B + b, 0);
          if (a.cell == Cell::kRNN) {
            for (int64_t j = 0; j < H; ++j) h(b, j) = act[0](cl(xw[j] + HR(b, j) + rb[j]));
            continue;
          }
          auto gate = [&](int64_t g, int64_t j) { return xw[g * H + j] + HR(b, g * H + j) + rb[g * H + j]; };
          for (int64_t j = 0; j < H; ++j) {
            const T cp = c(b, j);
            const T i = act[0](cl(gate(0, j) + (p ? p[j] * cp : T(0))));
            const T f = a.input_forget ? T(1) - i : act[0](cl(gate(2, j) + (p ? p[2 * H + j] * cp : T(0))));
            const T cc = act[1](cl(gate(3, j)));
            const T cn = f * cp + i * cc;
            const T o = act[0](cl(gate(1, j) + (p ? p[H + j] * cn : T(0))));
            c(b, j) = cn;
            h(b, j) = o * act[2](cn);
          }
        }
      } else {  // GRU
        const Mat HR = h * Rd.topRows(a.linear_before_reset ? 3 * H : 2 * H).transpose();
        z.setZero();
        r.setZero();
        for (int64_t b = 0; b < B; ++b) {
          if (!valid(b)) continue;
          const T* xw = &XW(time_of(b) * B + b, 0);
          for (int64_t j = 0; j < H; ++j) {
            z(b, j) = act[0](cl(xw[j] + HR(b, j) + rb[j]));
            r(b, j) = act[0](cl(xw[H + j] + HR(b, H + j) + rb[H + j]));
          }
        }
        // Recurrent part of the candidate: (r . h) Rh^T + Rbh, or r . (h Rh^T + Rbh) with linear_before_reset.
        Mat RH;
        if (a.linear_before_reset) {
          RH = HR.rightCols(H);
          for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < H; ++j) RH(b, j) = r(b, j) * (RH(b, j) + rb[2 * H + j]);
        } else {
          RH = (r.array() * h.array()).matrix() * Rd.bottomRows(H).transpose();
          for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < H; ++j) RH(b, j) += rb[2 * H + j];
        }
        for (int64_t b = 0; b < B; ++b) {
          if (!valid(b)) continue;
          const T* xw = &XW(time_of(b) * B + b, 0);
          for (int64_t j = 0; j < H; ++j) {
            const T hh = act[1](cl(xw[2 * H + j] + RH(b, j)));
            h(b, j) = (T(1) - z(b, j)) * hh + z(b, j) * h(b, j);
          }
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        if (!valid(b)) continue;
        const int64_t t = time_of(b);
        const int64_t at = a.layout == 0 ? ((t * D + d) * B + b) * H : ((b * S + t) * D + d) * H;
        for (int64_t j = 0; j < H; ++j) Y[static_cast<size_t>(at + j)] = h(b, j);
      }
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        Yh[static_cast<size_t>(state_at(d, b) + j)] = h(b, j);
        Yc[static_cast<size_t>(state_at(d, b) + j)] = c(b, j);
      }
  }
  if (ctx.has_output(0)) Emit(ctx, 0, dt, a.layout == 0 ? Shape{S, D, B, H} : Shape{B, S, D, H}, Y);
  if (ctx.has_output(1)) Emit(ctx, 1, dt, state_shape, Yh);
  if (a.cell == Cell::kLSTM && ctx.has_output(2)) Emit(ctx, 2, dt, state_shape, Yc);
  return absl::OkStatus();
}

class RnnKernel : public OpKernel {
 public:
  explicit RnnKernel(RnnAttrs a) : a_(std::move(a)) {}
  absl::Status Compute(OpContext& ctx) const override {
    for (size_t i : {0, 1, 2}) if (!ctx.has_input(i)) return InvalidArgument(ctx, "inputs X, W and R are required");
    switch (ctx.input(0).dtype()) {
      case DType::kFloat32: case DType::kFloat16: case DType::kBFloat16: return RunRnn<float>(ctx, a_);
      case DType::kFloat64: return RunRnn<double>(ctx, a_);
      default: return InvalidArgument(ctx, "unsupported input type ", DTypeName(ctx.input(0).dtype()));
    }
  }

 private:
  RnnAttrs a_;
};

KernelFactory RnnFactory(Cell cell) {
  return [cell](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    auto a = ReadAttrs(init, cell);
    if (!a.ok()) return a.status();
    return std::unique_ptr<OpKernel>(new RnnKernel(std::move(*a)));
  };
}

}  // namespace

void RegisterRecurrentOps(KernelRegistry& r) {
  AddVersions(r, "RNN", {1, 7, 14, 22}, RnnFactory(Cell::kRNN));
  AddVersions(r, "GRU", {1, 3, 7, 14, 22}, RnnFactory(Cell::kGRU));
  AddVersions(r, "LSTM", {1, 7, 14, 22}, RnnFactory(Cell::kLSTM));
}

}  // namespace oneinfer
