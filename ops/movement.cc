// The data-movement helpers declared in ops/movement.h.
#include "ops/movement.h"

#include <algorithm>

#include "base/thread_pool.h"

namespace oneinfer::movement {

namespace {

// Elements per parallel task for plain copies: below this, threading costs more than it saves.
constexpr int64_t kCopyGrain = 1 << 15;

// dst (contiguous, `shape`) [i...] = src[sum i_k * strides_k]; strides may be 0 or negative.
// Dims are coalesced first, so a row-contiguous source becomes block copies (this covers
// the [B,S,H,D] <-> [B,H,S,D] attention transposes) and a swapped last pair becomes a
// blocked 2-D transpose.
template <typename T>
void StridedCopy(OpContext& ctx, const T* src, const Shape& shape, const std::vector<int64_t>& strides, T* dst) {
  if (NumElements(shape) == 0) return;
  Shape d;
  std::vector<int64_t> s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!d.empty() && s.back() == strides[i] * shape[i]) {
      d.back() *= shape[i];
      s.back() = strides[i];
    } else {
      d.push_back(shape[i]);
      s.push_back(strides[i]);
    }
  }
  if (d.empty()) {
    dst[0] = src[0];
    return;
  }
  const size_t r = d.size() - 1;
  const int64_t inner = d.back(), is = s.back();
  // Offset of outer row `row` (over dims [0, r)).
  auto row_offset = [&](int64_t row, std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = r; k-- > 0;) {
      idx[k] = row % d[k];
      row /= d[k];
      off += idx[k] * s[k];
    }
    return off;
  };
  if (is != 1 && r >= 1 && s[r - 1] == 1 && inner >= 8 && d[r - 1] >= 8) {
    // Batched transpose: out block [R, C] with src(i, j) = base + i + j * is.
    constexpr int64_t kB = 32;
    const int64_t R = d[r - 1], C = inner, nb = (R + kB - 1) / kB;
    const int64_t batches = NumElements(d) / (R * C);
    ParallelRows(ctx, batches * nb, kB * C, [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(r);
      for (int64_t t = b; t < e; ++t) {
        const int64_t batch = t / nb, i0 = (t % nb) * kB, i1 = std::min(R, i0 + kB);
        const int64_t base = row_offset(batch * R, idx);
        T* out = dst + batch * R * C;
        for (int64_t j0 = 0; j0 < C; j0 += kB) {
          const int64_t j1 = std::min(C, j0 + kB);
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = j0; j < j1; ++j) out[i * C + j] = src[base + i + j * is];
        }
      }
    });
    return;
  }
  const int64_t rows = NumElements(d) / inner;
  ParallelRows(ctx, rows, inner, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r);
    int64_t off = row_offset(b, idx);
    for (int64_t row = b; row < e; ++row) {
      T* o = dst + row * inner;
      const T* p = src + off;
      if (is == 1) {
        CopyN(o, p, inner);
      } else if (is == 0) {
        std::fill(o, o + inner, *p);
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j] = p[j * is];
      }
      for (size_t k = r; k-- > 0;) {
        off += s[k];
        if (++idx[k] < d[k]) break;
        off -= d[k] * s[k];
        idx[k] = 0;
      }
    }
  });
}

}  // namespace

void ParallelRows(OpContext& ctx, int64_t n, int64_t item_elems, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t grain = std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(1, item_elems));
  ParallelFor(ctx.thread_pool(), n, grain, fn);
}

absl::Status StridedCopyTensor(OpContext& ctx, const Tensor& in, int64_t offset, const Shape& shape,
                               const std::vector<int64_t>& strides, Tensor& out) {
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    StridedCopy<U>(ctx, in.data<U>() + offset, shape, strides, out.data<U>());
    return absl::OkStatus();
  });
}

Tensor SubView(const Tensor& in, int64_t offset, Shape shape) {
  char* base = static_cast<char*>(const_cast<void*>(in.raw_data()));
  return Tensor::Wrap(in.dtype(), std::move(shape), in.holder(), base + offset * static_cast<int64_t>(DTypeSize(in.dtype())));
}

bool IsDense(const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t expect = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    if (shape[a] == 1) continue;
    if (strides[a] != expect) return false;
    expect *= shape[a];
  }
  return true;
}

absl::StatusOr<std::vector<int64_t>> IntsInput(const OpContext& ctx, size_t i) {
  auto v = ReadInts(ctx.input(i));
  if (!v.ok()) return InvalidArgument(ctx, "input ", i, ": ", v.status().message());
  return v;
}

absl::StatusOr<int64_t> Axis(const OpContext& ctx, int64_t axis, int64_t rank) {
  auto a = NormalizeAxis(axis, rank);
  if (!a.ok()) return InvalidArgument(ctx, a.status().message());
  return *a;
}

absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx, std::vector<int64_t> axes, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    OI_ASSIGN(n, Axis(ctx, a, rank));
    if (seen[static_cast<size_t>(n)]) return InvalidArgument(ctx, "axis ", a, " is repeated");
    seen[static_cast<size_t>(n)] = true;
    a = n;
  }
  return axes;
}

absl::Status RequireInputs(const OpContext& ctx, std::initializer_list<size_t> required) {
  for (size_t i : required) {
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "required input ", i, " is missing");
  }
  return absl::OkStatus();
}

}  // namespace oneinfer::movement
