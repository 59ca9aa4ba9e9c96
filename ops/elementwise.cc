// The non-template elementwise helpers declared in ops/elementwise.h.
#include "ops/elementwise.h"

namespace oneinfer::elementwise {

absl::Status NeedInputs(const OpContext& ctx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "input ", i, " is missing");
  }
  return absl::OkStatus();
}

Bcast MakeBcast(const Shape& out, std::initializer_list<const Shape*> ins) {
  Bcast b;
  b.total = NumElements(out);
  std::vector<std::vector<int64_t>> s;
  for (const Shape* in : ins) s.push_back(BroadcastStrides(*in, out));
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::array<int64_t, 3> cur{};
    for (size_t k = 0; k < s.size(); ++k) cur[k] = s[k][d];
    if (!b.dims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < s.size(); ++k) merge = merge && b.st.back()[k] == cur[k] * out[d];
      if (merge) {
        b.dims.back() *= out[d];
        b.st.back() = cur;
        continue;
      }
    }
    b.dims.push_back(out[d]);
    b.st.push_back(cur);
  }
  return b;
}

absl::StatusOr<Tensor> LegacyAlign(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7 || ctx.node().GetInt("broadcast", 0) == 0) return b;
  const int64_t ra = a.rank(), rb = b.rank();
  int64_t axis = ctx.node().GetInt("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (rb > ra || axis < 0 || axis + rb > ra) {
    return InvalidArgument(ctx, "cannot broadcast ", ShapeToString(b.shape()), " onto ", ShapeToString(a.shape()),
                           " at axis ", ctx.node().GetInt("axis", ra - rb));
  }
  Shape s(static_cast<size_t>(ra), 1);
  for (int64_t i = 0; i < rb; ++i) s[axis + i] = b.dim(i);
  return b.Reshaped(s);
}

// Output shape of a broadcasting op, as an error naming the node.
absl::StatusOr<Shape> OutShape(const OpContext& ctx, const std::vector<Shape>& shapes) {
  absl::StatusOr<Shape> s = BroadcastShapes(shapes);
  if (!s.ok()) return InvalidArgument(ctx, s.status().message());
  return s;
}

}  // namespace oneinfer::elementwise
