// Shape operators: Shape, Size, Identity, the views (Reshape, Flatten, Squeeze, Unsqueeze) and
// the layout changes (Transpose, DepthToSpace, SpaceToDepth).
#include <algorithm>
#include <optional>
#include <vector>

#include "ops/families.h"
#include "base/checked_math.h"
#include "ops/kernel.h"
#include "ops/movement.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

using namespace movement;  // NOLINT: the family's shared data-movement helpers

// ---------------------------------------------------------------------------------------------
// Shape, Size, Identity and the view ops.

absl::Status ShapeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(ctx.node().GetInt("start", 0));
  const int64_t end = clamp(ctx.node().GetInt("end", rank));
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor& out = ctx.AllocateOutput(0, DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = s[static_cast<size_t>(start + i)];
  return absl::OkStatus();
}

absl::Status SizeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  ctx.AllocateOutput(0, DType::kInt64, {}).data<int64_t>()[0] = ctx.input(0).num_elements();
  return absl::OkStatus();
}

absl::Status IdentityKernel(OpContext& ctx) {
  const Value* v = ctx.input_value(0);
  if (v == nullptr) return InvalidArgument(ctx, "required input 0 is missing");
  ctx.SetOutputValue(0, *v);
  return absl::OkStatus();
}

absl::Status ReshapeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> spec;
  if (ctx.opset() < 5) {
    spec = ctx.node().GetInts("shape");
  } else {
    OI_RETURN_IF_ERROR(RequireInputs(ctx, {1}));
    OI_ASSIGN(v, IntsInput(ctx, 1));
    spec = std::move(v);
  }
  const bool allow_zero = ctx.opset() >= 14 && ctx.node().GetInt("allowzero", 0) != 0;
  Shape out(spec.size());
  int64_t infer = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allow_zero) {
      if (static_cast<int64_t>(i) >= in.rank()) {
        return InvalidArgument(ctx, "shape ", i, " is 0 (copy) but the input has rank ", in.rank());
      }
      d = in.shape()[i];
    } else if (d == -1) {
      if (infer >= 0) return InvalidArgument(ctx, "shape has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    } else if (d < 0) {
      return InvalidArgument(ctx, "shape has invalid dimension ", d);
    }
    out[i] = d;
  }
  // Checked: dims from data whose product wraps (2^40 x 2^40) must not pass for the input's count.
  Shape known_dims = out;
  if (infer >= 0) known_dims[static_cast<size_t>(infer)] = 1;
  const absl::StatusOr<int64_t> counted = CheckedElementCount(known_dims, "the new shape");
  if (!counted.ok()) return InvalidArgument(ctx, "cannot reshape ", ShapeToString(in.shape()), " to ", ShapeToString(spec), ": ", counted.status().message());
  const int64_t known = *counted;
  const int64_t n = in.num_elements();
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      return InvalidArgument(ctx, "cannot reshape ", ShapeToString(in.shape()), " to ", ShapeToString(spec));
    }
    out[static_cast<size_t>(infer)] = n / known;
  } else if (known != n) {
    return InvalidArgument(ctx, "cannot reshape ", ShapeToString(in.shape()), " to ", ShapeToString(spec));
  }
  ctx.SetOutput(0, in.Reshaped(std::move(out)));
  return absl::OkStatus();
}

absl::Status FlattenKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  int64_t axis = ctx.node().GetInt("axis", 1);
  if (axis < 0) axis += in.rank();
  if (axis < 0 || axis > in.rank()) return InvalidArgument(ctx, "axis ", ctx.node().GetInt("axis", 1), " is out of range for rank ", in.rank());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < in.rank(); ++i) (i < axis ? outer : inner) *= in.shape()[static_cast<size_t>(i)];
  ctx.SetOutput(0, in.Reshaped({outer, inner}));
  return absl::OkStatus();
}

// Axes of Squeeze/Unsqueeze: attribute before opset 13, optional input from 13.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesAttrOrInput(OpContext& ctx, size_t input) {
  if (ctx.opset() < 13) {
    if (!ctx.node().HasAttr("axes")) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(ctx.node().GetInts("axes"));
  }
  if (!ctx.has_input(input)) return std::optional<std::vector<int64_t>>();
  OI_ASSIGN(v, IntsInput(ctx, input));
  return std::optional<std::vector<int64_t>>(std::move(v));
}

absl::Status SqueezeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  OI_ASSIGN(axes, AxesAttrOrInput(ctx, 1));
  std::vector<bool> drop(static_cast<size_t>(in.rank()), false);
  if (axes) {
    OI_ASSIGN(norm, NormalizeAxes(ctx, *axes, in.rank()));
    for (int64_t a : norm) {
      if (in.shape()[static_cast<size_t>(a)] != 1) {
        return InvalidArgument(ctx, "cannot squeeze axis ", a, " of size ", in.shape()[static_cast<size_t>(a)]);
      }
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = in.shape()[i] == 1;
  }
  Shape out;
  for (size_t i = 0; i < drop.size(); ++i) if (!drop[i]) out.push_back(in.shape()[i]);
  ctx.SetOutput(0, in.Reshaped(std::move(out)));
  return absl::OkStatus();
}

absl::Status UnsqueezeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  OI_ASSIGN(axes, AxesAttrOrInput(ctx, 1));
  if (!axes) return InvalidArgument(ctx, "axes are required");
  const int64_t rank = in.rank() + static_cast<int64_t>(axes->size());
  OI_ASSIGN(norm, NormalizeAxes(ctx, *axes, rank));
  std::vector<bool> ins(static_cast<size_t>(rank), false);
  for (int64_t a : norm) ins[static_cast<size_t>(a)] = true;
  Shape out;
  size_t k = 0;
  for (size_t i = 0; i < ins.size(); ++i) out.push_back(ins[i] ? 1 : in.shape()[k++]);
  ctx.SetOutput(0, in.Reshaped(std::move(out)));
  return absl::OkStatus();
}
// ---------------------------------------------------------------------------------------------
// Transpose, DepthToSpace, SpaceToDepth.

absl::Status TransposeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  std::vector<int64_t> perm = ctx.node().GetInts("perm");
  if (perm.empty()) {
    perm.resize(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return InvalidArgument(ctx, "perm has ", perm.size(), " entries for an input of rank ", rank);
  }
  OI_ASSIGN(p, NormalizeAxes(ctx, perm, rank));
  const std::vector<int64_t> in_strides = Strides(in.shape());
  Shape out_shape(p.size());
  std::vector<int64_t> strides(p.size());
  bool ordered = true;  // the non-unit dims keep their order: the result is a view
  int64_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const size_t a = static_cast<size_t>(p[i]);
    out_shape[i] = in.shape()[a];
    strides[i] = in_strides[a];
    if (out_shape[i] != 1) {
      if (p[i] < last) ordered = false;
      last = p[i];
    }
  }
  if (ordered) {
    ctx.SetOutput(0, in.Reshaped(std::move(out_shape)));
    return absl::OkStatus();
  }
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  return StridedCopyTensor(ctx, in, 0, out_shape, strides, out);
}
absl::Status DepthToSpaceKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t b = ctx.node().GetInt("blocksize", 0);
  if (in.rank() != 4) return InvalidArgument(ctx, "input must be 4-D, got ", ShapeToString(in.shape()));
  const int64_t N = in.dim(0), C = in.dim(1), H = in.dim(2), W = in.dim(3);
  if (b <= 0 || C % (b * b) != 0) return InvalidArgument(ctx, "channels ", C, " are not divisible by blocksize^2 (", b, ")");
  const int64_t c = C / (b * b);
  const bool crd = ctx.opset() >= 11 && ctx.node().GetString("mode", "DCR") == "CRD";
  // Output viewed as [N, c, H, b1, W, b2]; the input as [N, b1, b2, c, H, W] (DCR) or [N, c, b1, b2, H, W] (CRD).
  const int64_t sN = C * H * W, sHW = H * W;
  std::vector<int64_t> strides = crd ? std::vector<int64_t>{sN, b * b * sHW, W, b * sHW, 1, sHW}
                                     : std::vector<int64_t>{sN, sHW, W, b * c * sHW, 1, c * sHW};
  const Shape view = {N, c, H, b, W, b};
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), {N, c, H * b, W * b});
  return StridedCopyTensor(ctx, in, 0, view, strides, out);
}

absl::Status SpaceToDepthKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t b = ctx.node().GetInt("blocksize", 0);
  if (in.rank() != 4) return InvalidArgument(ctx, "input must be 4-D, got ", ShapeToString(in.shape()));
  const int64_t N = in.dim(0), C = in.dim(1), H = in.dim(2), W = in.dim(3);
  if (b <= 0 || H % b != 0 || W % b != 0) return InvalidArgument(ctx, "spatial dims are not divisible by blocksize ", b);
  // Output viewed as [N, b1, b2, C, H/b, W/b]; the input as [N, C, H/b, b1, W/b, b2].
  const Shape view = {N, b, b, C, H / b, W / b};
  const std::vector<int64_t> strides = {C * H * W, W, 1, H * W, b * W, b};
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), {N, C * b * b, H / b, W / b});
  return StridedCopyTensor(ctx, in, 0, view, strides, out);
}

}  // namespace

void RegisterShapeOps(KernelRegistry& r) {
  AddVersions(r, "Shape", {1, 13, 15, 19, 21, 23}, ShapeKernel);
  AddVersions(r, "Size", {1, 13, 19, 21, 23}, SizeKernel);
  AddVersions(r, "Identity", {1, 13, 14, 16, 19, 21, 23}, MakeFnKernel(IdentityKernel), /*non_tensors=*/true);
  AddVersions(r, "Reshape", {1, 5, 13, 14, 19, 21, 23}, ReshapeKernel);
  AddVersions(r, "Flatten", {1, 9, 11, 13, 21, 23}, FlattenKernel);
  AddVersions(r, "Squeeze", {1, 11, 13, 21, 23}, SqueezeKernel);
  AddVersions(r, "Unsqueeze", {1, 11, 13, 21, 23}, UnsqueezeKernel);
  AddVersions(r, "Transpose", {1, 13, 21, 23}, TransposeKernel);
  AddVersions(r, "DepthToSpace", {1, 11, 13},
              Checked([](const KernelInit& i) { return i.opset() >= 11 ? CheckOneOf(i, "mode", "DCR", {"DCR", "CRD"}) : absl::OkStatus(); },
                      DepthToSpaceKernel));
  AddVersions(r, "SpaceToDepth", {1, 13}, SpaceToDepthKernel);
}

}  // namespace oneinfer
