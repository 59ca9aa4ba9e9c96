// Comparisons and logic (bool results: Equal, Less, Greater, ..., And, Or, Xor, Not) and Where.
#include <cstdint>
#include <string>

#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

using namespace elementwise;  // NOLINT: the family's shared dispatch and broadcasting helpers

// ---- Where

absl::Status WhereKernel(OpContext& ctx) {
  if (absl::Status s = NeedInputs(ctx, 3); !s.ok()) return s;
  const Tensor &c = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
  if (c.dtype() != DType::kBool) return InvalidArgument(ctx, "condition must be bool, got ", DTypeName(c.dtype()));
  if (x.dtype() != y.dtype()) {
    return InvalidArgument(ctx, "X and Y types differ: ", DTypeName(x.dtype()), " and ", DTypeName(y.dtype()));
  }
  absl::StatusOr<Shape> shape = OutShape(ctx, {c.shape(), x.shape(), y.shape()});
  if (!shape.ok()) return shape.status();
  return Dispatch(AllTypes{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    Tensor& o = ctx.AllocateOutput(0, x.dtype(), *shape);
    const Bcast bc = MakeBcast(*shape, {&c.shape(), &x.shape(), &y.shape()});
    const bool* pc = c.data<bool>();
    const T *px = x.data<T>(), *py = y.data<T>();
    T* po = o.data<T>();
    ForEachRun(bc, ctx.thread_pool(), [&](int64_t oo, const Offs& io, int64_t n, const Offs& s) {
      for (int64_t i = 0; i < n; ++i) {
        po[oo + i] = pc[io[0] + i * s[0]] ? px[io[1] + i * s[1]] : py[io[2] + i * s[2]];
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterLogicOps(KernelRegistry& r) {
  // ---- comparisons and logic (bool results)
  using EqTypes = decltype(NumTypes{} + BoolType{} + Types<std::string>{});
  AddVersions(r, "Equal", {1, 7, 11, 13, 19}, BinaryOp<EqTypes, true>([](const auto& x, const auto& y) { return x == y; }));
  AddVersions(r, "Less", {1, 7, 9, 13}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x < y; }));
  AddVersions(r, "Greater", {1, 7, 9, 13}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x > y; }));
  AddVersions(r, "LessOrEqual", {12, 16}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x <= y; }));
  AddVersions(r, "GreaterOrEqual", {12, 16}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x >= y; }));
  AddVersions(r, "And", {1, 7}, BinaryOp<BoolType, true>([](bool x, bool y) { return x && y; }));
  AddVersions(r, "Or", {1, 7}, BinaryOp<BoolType, true>([](bool x, bool y) { return x || y; }));
  AddVersions(r, "Xor", {1, 7}, BinaryOp<BoolType, true>([](bool x, bool y) { return x != y; }));

  AddVersions(r, "Not", {1}, UnaryOp<BoolType>([](bool x) { return !x; }));

  AddVersions(r, "Where", {9, 16}, WhereKernel);
}

}  // namespace oneinfer
