// Shape and type inference rules: one per op family, keyed by op_type. A rule sets what follows
// from its inputs and nothing more.
#include "graph/passes/shape_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/checked_math.h"
#include "graph/internal_ops.h"

namespace oneinfer::shape_rules {

namespace {


bool IsOne(const Dim& d) { return d.is_fixed() && d.value == 1; }
bool SameDim(const Dim& a, const Dim& b) {
  return a.is_fixed() ? b.is_fixed() && a.value == b.value : !a.param.empty() && a.param == b.param;
}

constexpr size_t kMaxValueElems = 64;

// The largest rank a rule builds from a dim (a shape input's length): past it the rank is left
// unknown, so a declared dim of 2^40 does not become a vector of 2^40 dims at load.
constexpr int64_t kMaxInferredRank = 1024;

// a * b and a + b for dims from a model: false on a negative factor or an int64 overflow (the
// dim is then unknown).
bool MulDims(int64_t a, int64_t b, int64_t* out) { return CheckedMul(a, b, out); }
bool AddDims(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

std::optional<Elems> ValueOf(const Tensor& t) {
  if (t.rank() > 1 || t.num_elements() > static_cast<int64_t>(kMaxValueElems)) return std::nullopt;
  Elems e;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (t.dtype() == DType::kInt64) e.push_back(Elem::Num(t.data<int64_t>()[i]));
    else if (t.dtype() == DType::kInt32) e.push_back(Elem::Num(t.data<int32_t>()[i]));
    else return std::nullopt;
  }
  return e;
}

}  // namespace

Known FromTensor(const Tensor& t) {
  Known k;
  k.elem = t.dtype();
  k.shape.emplace();
  for (int64_t d : t.shape()) k.shape->push_back(Fixed(d));
  k.value = ValueOf(t);
  k.constant = &t;
  return k;
}

Known FromType(const TypeInfo& t) {
  Known k;
  if (t.kind != TypeInfo::Kind::kTensor) return k;
  k.elem = t.elem;
  k.shape = t.shape;
  return k;
}

namespace {

bool NormAxis(int64_t& axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis >= 0 && axis < r;
}

// Broadcasts shapes numpy-style; nullopt when a rank is unknown or fixed dims disagree.
std::optional<Dims> Broadcast(const std::vector<const Dims*>& shapes) {
  size_t rank = 0;
  for (const Dims* s : shapes) {
    if (!s) return std::nullopt;
    rank = std::max(rank, s->size());
  }
  Dims out(rank, Fixed(1));
  for (const Dims* s : shapes) {
    for (size_t i = 0; i < s->size(); ++i) {
      Dim& o = out[rank - s->size() + i];
      const Dim& d = (*s)[i];
      if (IsOne(d)) continue;
      if (IsOne(o)) o = d;
      else if (o.is_fixed() && d.is_fixed() && o.value != d.value) return std::nullopt;
      else if (o.is_fixed()) continue;                  // a symbol meeting n > 1 must be n or 1
      else if (d.is_fixed()) o = d;
      else if (!SameDim(o, d)) o = Dim();               // two different symbols: unknown
    }
  }
  return out;
}

// k times a symbol, named "k*sym" (grouped-query attention folds heads into the sequence).
Dim Scaled(int64_t k, const std::string& sym) {
  return k == 0 ? Fixed(0) : k == 1 ? Sym(sym) : Sym(absl::StrCat(k, "*", sym));
}

// Product of dims as (number, symbols); `unknown` when an unknown dim takes part.
struct Product {
  int64_t num = 1;
  std::multiset<std::string> syms;
  bool unknown = false;
  void Add(const Dim& d) {
    if (d.is_fixed()) {
      if (!MulDims(num, d.value, &num)) unknown = true;
      return;
    }
    if (d.param.empty()) {
      unknown = true;
      return;
    }
    const size_t star = d.param.find('*');  // "k*sym" from Scaled
    int64_t k = 0;
    if (star != std::string::npos && star > 0 && absl::SimpleAtoi(d.param.substr(0, star), &k) && k > 0) {
      if (!MulDims(num, k, &num)) unknown = true;
      syms.insert(d.param.substr(star + 1));
    } else {
      syms.insert(d.param);
    }
  }
  // The dim that times `other` makes this product, when one exists and is nameable.
  Dim DivideBy(const Product& o) const {
    if (unknown || o.unknown || o.num == 0 || num % o.num != 0) return Dim();
    std::multiset<std::string> rest = syms;
    for (const std::string& s : o.syms) {
      auto it = rest.find(s);
      if (it == rest.end()) return Dim();
      rest.erase(it);
    }
    if (rest.empty()) return Fixed(num / o.num);
    if (rest.size() == 1) return Scaled(num / o.num, *rest.begin());
    return Dim();
  }
};


// --- Same type as input 0 -------------------------------------------------------------------

void Unary(Ctx& c) { c.Set(0, c.Elem(0), c.Shape(0) ? std::optional<Dims>(*c.Shape(0)) : std::nullopt); }

// ONNX Runtime's SimplifiedLayerNormalization: Y has X's shape and the scale's type (V).
void SimplifiedLayerNorm(Ctx& c) {
  if (c.Elem(1) == DType::kUndefined) return;
  c.Set(0, c.Elem(1), c.Shape(0) ? std::optional<Dims>(*c.Shape(0)) : std::nullopt);
}

void IdentityRule(Ctx& c) {
  c.Set(0, c.Elem(0), c.Shape(0) ? std::optional<Dims>(*c.Shape(0)) : std::nullopt,
        c.Value(0) ? std::optional<Elems>(*c.Value(0)) : std::nullopt);
}

void ToBool(Ctx& c) {  // Not, IsNaN, IsInf
  if (c.In(0)) c.Set(0, DType::kBool, c.In(0)->shape);
}

void Dropout(Ctx& c) {
  Unary(c);
  if (c.In(0) && c.opset >= 12) c.Set(1, DType::kBool, c.In(0)->shape);  // before 12 the mask had X's type
}

void Cast(Ctx& c) {
  if (!c.In(0)) return;
  const DType to = c.n.op_type == "CastLike" ? c.Elem(1) : static_cast<DType>(c.n.GetInt("to", 0));
  c.Set(0, to, c.In(0)->shape, IsInteger(c.Elem(0)) ? c.In(0)->value : std::nullopt);
}

// --- Elementwise with broadcasting ------------------------------------------------------------

// A sum of dims: a number when all are fixed, else a symbol naming the sum ("past + seq").
Dim SumDims(const Dims& ds) {
  int64_t num = 0;
  std::vector<std::string> syms;
  for (const Dim& d : ds) {
    if (d.is_fixed()) {
      if (!AddDims(num, d.value, &num)) return Dim();
    } else if (d.param.empty()) {
      return Dim();
    } else {
      syms.push_back(d.param);
    }
  }
  if (syms.empty()) return Fixed(num);
  if (num != 0) syms.push_back(std::to_string(num));
  return Sym(absl::StrJoin(syms, " + "));
}

// The terms of a dim named by SumDims ("past + seq" -> past, seq).
std::multiset<std::string> Terms(const std::string& sym) {
  std::multiset<std::string> t;
  size_t start = 0;
  for (size_t at; (at = sym.find(" + ", start)) != std::string::npos; start = at + 3) t.insert(sym.substr(start, at - start));
  t.insert(sym.substr(start));
  return t;
}

// Integer arithmetic on known shape elements (broadcast of a scalar against a vector).
std::optional<Elems> Arith(const std::string& op, const Elems& a, const Elems& b) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  Elems r;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const Elem& x = a[a.size() == 1 ? 0 : i];
    const Elem& y = b[b.size() == 1 ? 0 : i];
    const bool xn = x.k == Elem::K::kNum, yn = y.k == Elem::K::kNum;
    Elem e;
    if (xn && yn) {
      int64_t v = 0;  // an overflowing result stays unknown
      if (op == "Add" && AddDims(x.num, y.num, &v)) e = Elem::Num(v);
      else if (op == "Sub" && !__builtin_sub_overflow(x.num, y.num, &v)) e = Elem::Num(v);
      else if (op == "Mul" && MulDims(x.num, y.num, &v)) e = Elem::Num(v);
      else if (op == "Div" && y.num != 0 && x.num % y.num == 0) e = Elem::Num(x.num / y.num);
    } else if (yn && ((y.num == 0 && (op == "Add" || op == "Sub")) || (y.num == 1 && (op == "Mul" || op == "Div")))) {
      e = x;
    } else if (xn && ((x.num == 0 && op == "Add") || (x.num == 1 && op == "Mul"))) {
      e = y;
    } else if (op == "Add") {
      e = Elem::Of(SumDims({x.ToDim(), y.ToDim()}));
    }
    r.push_back(e);
  }
  return r;
}

void Elementwise(Ctx& c) {
  std::vector<const Dims*> shapes;
  for (size_t i = 0; i < c.in.size(); ++i) shapes.push_back(c.Shape(i));
  const std::string& op = c.n.op_type;
  DType elem = c.Elem(0);
  static const std::set<std::string> kCompare = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
  if (kCompare.count(op)) elem = DType::kBool;
  if (op == "Where") elem = c.Elem(1) != DType::kUndefined ? c.Elem(1) : c.Elem(2);
  std::optional<Elems> value;
  if (c.in.size() == 2 && c.Value(0) && c.Value(1) && IsInteger(elem)) value = Arith(op, *c.Value(0), *c.Value(1));
  c.Set(0, elem, Broadcast(shapes), value);
}

// --- Matrix products ----------------------------------------------------------------------------

void MatMul(Ctx& c) {
  const DType elem = c.n.op_type == "MatMulInteger" ? DType::kInt32 : c.Elem(0);
  const Dims* a = c.Shape(0);
  const Dims* b = c.Shape(1);
  if (!a || !b || a->empty() || b->empty()) return c.Set(0, elem, std::nullopt);
  Dims x = *a, y = *b;
  const bool vec_a = x.size() == 1, vec_b = y.size() == 1;
  if (vec_a) x.insert(x.begin(), Fixed(1));
  if (vec_b) y.push_back(Fixed(1));
  const Dims xb(x.begin(), x.end() - 2), yb(y.begin(), y.end() - 2);
  auto batch = Broadcast({&xb, &yb});
  if (!batch) return c.Set(0, elem, std::nullopt);
  if (!vec_a) batch->push_back(x[x.size() - 2]);
  if (!vec_b) batch->push_back(y.back());
  c.Set(0, elem, batch);
}

void Gemm(Ctx& c) {
  const Dims* a = c.Shape(0);
  const Dims* b = c.Shape(1);
  if (!a || !b || a->size() != 2 || b->size() != 2) return c.Set(0, c.Elem(0), std::nullopt);
  const bool ta = c.n.GetInt("transA", 0) != 0, tb = c.n.GetInt("transB", 0) != 0;
  c.Set(0, c.Elem(0), Dims{(*a)[ta ? 1 : 0], (*b)[tb ? 0 : 1]});
}

// --- Shape manipulation -------------------------------------------------------------------------

void Transpose(Ctx& c) {
  const Dims* s = c.Shape(0);
  if (!s) return c.Set(0, c.Elem(0), std::nullopt);
  std::vector<int64_t> perm = c.n.GetInts("perm");
  if (perm.empty()) for (size_t i = s->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != s->size()) return;
  Dims out;
  for (int64_t p : perm) {
    if (!NormAxis(p, s->size())) return;
    out.push_back((*s)[static_cast<size_t>(p)]);
  }
  c.Set(0, c.Elem(0), out);
}

void Reshape(Ctx& c) {
  const Elems* target = c.Value(1);
  if (!target) {  // the rank still follows from a fixed-length shape input
    const Dims* ts = c.Shape(1);
    if (ts && ts->size() == 1 && (*ts)[0].is_fixed() && (*ts)[0].value >= 0 && (*ts)[0].value <= kMaxInferredRank) {
      return c.Set(0, c.Elem(0), Dims(static_cast<size_t>((*ts)[0].value)));
    }
    return c.Set(0, c.Elem(0), std::nullopt);
  }
  const Dims* in = c.Shape(0);
  const bool allow_zero = c.n.GetInt("allowzero", 0) != 0;
  Dims out;
  int infer = -1;
  Product known;
  for (size_t i = 0; i < target->size(); ++i) {
    const Elem& e = (*target)[i];
    Dim d = e.ToDim();
    if (e.k == Elem::K::kNum && e.num == 0 && !allow_zero) d = in && i < in->size() ? (*in)[i] : Dim();
    if (e.k == Elem::K::kNum && e.num == -1) infer = static_cast<int>(i);
    else known.Add(d);
    out.push_back(d);
  }
  if (infer >= 0) {
    Product total;
    if (in) for (const Dim& d : *in) total.Add(d);
    else total.unknown = true;
    out[static_cast<size_t>(infer)] = total.DivideBy(known);
  }
  c.Set(0, c.Elem(0), out, c.Value(0) && out.size() <= 1 ? std::optional<Elems>(*c.Value(0)) : std::nullopt);
}

void Flatten(Ctx& c) {
  const Dims* s = c.Shape(0);
  if (!s) return c.Set(0, c.Elem(0), std::nullopt);
  int64_t axis = c.n.GetInt("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(s->size());
  if (axis < 0 || axis > static_cast<int64_t>(s->size())) return;
  Product outer, inner, none;
  for (size_t i = 0; i < s->size(); ++i) (static_cast<int64_t>(i) < axis ? outer : inner).Add((*s)[i]);
  c.Set(0, c.Elem(0), Dims{outer.DivideBy(none), inner.DivideBy(none)});
}

void ShapeRule(Ctx& c) {
  const Dims* s = c.Shape(0);
  if (!s) return c.Set(0, DType::kInt64, Dims{Dim()});
  const int64_t r = static_cast<int64_t>(s->size());
  int64_t start = c.n.GetInt("start", 0), end = c.n.GetInt("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  Elems v;
  for (int64_t i = start; i < end; ++i) v.push_back(Elem::Of((*s)[static_cast<size_t>(i)]));
  c.Set(0, DType::kInt64, Dims{Fixed(end - start)}, v);
}

void Size(Ctx& c) {
  std::optional<Elems> v;
  if (const Dims* s = c.Shape(0)) {
    Product p, none;
    for (const Dim& d : *s) p.Add(d);
    v = Elems{Elem::Of(p.DivideBy(none))};
  }
  c.Set(0, DType::kInt64, Dims{}, v);
}

void Unsqueeze(Ctx& c) {
  const Dims* s = c.Shape(0);
  auto axes = c.AttrOrInput("axes", 1);
  if (!s || !axes) return c.Set(0, c.Elem(0), std::nullopt);
  const size_t rank = s->size() + axes->size();
  std::vector<bool> is_new(rank, false);
  for (int64_t a : *axes) {
    if (!NormAxis(a, rank) || is_new[static_cast<size_t>(a)]) return;
    is_new[static_cast<size_t>(a)] = true;
  }
  Dims out;
  for (size_t i = 0, k = 0; i < rank; ++i) out.push_back(is_new[i] ? Fixed(1) : (*s)[k++]);
  c.Set(0, c.Elem(0), out, out.size() <= 1 && c.Value(0) ? std::optional<Elems>(*c.Value(0)) : std::nullopt);
}

void Squeeze(Ctx& c) {
  const Dims* s = c.Shape(0);
  bool absent = false;
  auto axes = c.AttrOrInput("axes", 1, &absent);
  if (!s || (!axes && !absent)) return c.Set(0, c.Elem(0), std::nullopt);
  std::vector<bool> drop(s->size(), false);
  if (absent) {  // every dim of size 1, which needs every dim known
    for (size_t i = 0; i < s->size(); ++i) {
      if (!(*s)[i].is_fixed()) return c.Set(0, c.Elem(0), std::nullopt);
      drop[i] = (*s)[i].value == 1;
    }
  } else {
    for (int64_t a : *axes) {
      if (!NormAxis(a, s->size())) return;
      drop[static_cast<size_t>(a)] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < s->size(); ++i) if (!drop[i]) out.push_back((*s)[i]);
  c.Set(0, c.Elem(0), out, c.Value(0) ? std::optional<Elems>(*c.Value(0)) : std::nullopt);
}

void Concat(Ctx& c) {
  DType elem = DType::kUndefined;
  for (size_t i = 0; i < c.in.size() && elem == DType::kUndefined; ++i) elem = c.Elem(i);
  int64_t axis = c.n.GetInt("axis", 0);
  std::optional<Dims> out;
  Dims along;
  Elems value;
  bool has_value = true;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const Dims* s = c.Shape(i);
    if (!s || (out && s->size() != out->size())) return c.Set(0, elem, std::nullopt);
    if (!out) {
      out = *s;
      if (!NormAxis(axis, s->size())) return;
    }
    for (size_t d = 0; d < s->size(); ++d) {
      Dim& o = (*out)[d];
      if (static_cast<int64_t>(d) == axis) along.push_back((*s)[d]);
      else if (!o.is_fixed() && ((*s)[d].is_fixed() || o.param.empty())) o = (*s)[d];
    }
    if (c.Value(i)) value.insert(value.end(), c.Value(i)->begin(), c.Value(i)->end());
    else has_value = false;
  }
  if (!out) return;
  (*out)[static_cast<size_t>(axis)] = SumDims(along);
  c.Set(0, elem, out, has_value && out->size() == 1 ? std::optional<Elems>(value) : std::nullopt);
}

void Split(Ctx& c) {
  const Dims* s = c.Shape(0);
  const size_t n_out = c.n.outputs.size();
  int64_t axis = c.n.GetInt("axis", 0);
  if (!s || !NormAxis(axis, s->size())) {
    for (size_t k = 0; k < n_out; ++k) c.Set(k, c.Elem(0), std::nullopt);
    return;
  }
  bool absent = false;
  auto sizes = c.AttrOrInput("split", 1, &absent);
  const Dim& total = (*s)[static_cast<size_t>(axis)];
  if (absent && total.is_fixed()) {  // equal parts, the last one smaller (opset 18 num_outputs)
    const int64_t part = (total.value + static_cast<int64_t>(n_out) - 1) / static_cast<int64_t>(n_out);
    sizes.emplace();
    for (size_t k = 0; k < n_out; ++k) {
      sizes->push_back(std::clamp<int64_t>(total.value - part * static_cast<int64_t>(k), 0, part));
    }
    if (total.value % static_cast<int64_t>(n_out) != 0 && !c.n.HasAttr("num_outputs")) sizes.reset();
  }
  for (size_t k = 0; k < n_out; ++k) {
    Dims o = *s;
    o[static_cast<size_t>(axis)] = sizes && sizes->size() == n_out ? Fixed((*sizes)[k]) : Dim();
    c.Set(k, c.Elem(0), o);
  }
}

void Gather(Ctx& c) {
  const Dims* data = c.Shape(0);
  const Dims* idx = c.Shape(1);
  int64_t axis = c.n.GetInt("axis", 0);
  if (!data || !idx || !NormAxis(axis, data->size())) return c.Set(0, c.Elem(0), std::nullopt);
  Dims out(data->begin(), data->begin() + axis);
  out.insert(out.end(), idx->begin(), idx->end());
  out.insert(out.end(), data->begin() + axis + 1, data->end());
  std::optional<Elems> value;
  auto ids = c.Ints(1);
  if (c.Value(0) && ids && data->size() == 1) {
    const int64_t n = static_cast<int64_t>(c.Value(0)->size());
    value.emplace();
    for (int64_t i : *ids) {
      if (i < 0) i += n;
      if (i < 0 || i >= n) return c.Set(0, c.Elem(0), out);
      value->push_back((*c.Value(0))[static_cast<size_t>(i)]);
    }
  }
  c.Set(0, c.Elem(0), out, value);
}

void GatherElements(Ctx& c) { c.Set(0, c.Elem(0), c.In(1) ? c.In(1)->shape : std::nullopt); }

void Slice(Ctx& c) {
  const Dims* s = c.Shape(0);
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  bool no_axes = false, no_steps = false;
  starts = c.AttrOrInput("starts", 1);
  ends = c.AttrOrInput("ends", 2);
  axes = c.AttrOrInput("axes", 3, &no_axes);
  if (c.n.HasAttr("starts")) no_axes = !c.n.HasAttr("axes"), no_steps = true;
  else steps = c.Ints(4), no_steps = !c.n.HasInput(4);
  if (!s || !starts || !ends || starts->size() != ends->size()) return c.Set(0, c.Elem(0), std::nullopt);
  if (no_axes) { axes.emplace(); for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i)); }
  if (no_steps) steps = std::vector<int64_t>(starts->size(), 1);
  if (!axes || !steps || axes->size() != starts->size() || steps->size() != starts->size()) {
    return c.Set(0, c.Elem(0), std::nullopt);
  }
  Dims out = *s;
  std::optional<Elems> value = c.Value(0) ? std::optional<Elems>(*c.Value(0)) : std::nullopt;
  for (size_t k = 0; k < starts->size(); ++k) {
    int64_t a = (*axes)[k];
    const int64_t step = (*steps)[k];
    if (!NormAxis(a, s->size()) || step == 0) return c.Set(0, c.Elem(0), std::nullopt);
    Dim& d = out[static_cast<size_t>(a)];
    if (!d.is_fixed()) {  // a symbolic dim survives only a whole, forward slice
      if (!(step == 1 && (*starts)[k] == 0 && (*ends)[k] >= std::numeric_limits<int32_t>::max())) d = Dim();
      value.reset();
      continue;
    }
    const int64_t dim = d.value;
    if (dim == 0) {  // nothing to slice (and no valid clamp range for negative steps)
      value.reset();
      continue;
    }
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v += dim;
      return std::clamp(v, lo, hi);
    };
    int64_t b, e;
    if (step > 0) b = clampi((*starts)[k], 0, dim), e = clampi((*ends)[k], 0, dim);
    else b = clampi((*starts)[k], 0, dim - 1), e = clampi((*ends)[k], -1, dim - 1);
    int64_t len = 0;
    if (step > 0 && e > b) len = (e - b - 1) / step + 1;
    if (step < 0 && b > e) len = step == std::numeric_limits<int64_t>::min() ? 1 : (b - e - 1) / -step + 1;
    if (value && s->size() == 1 && static_cast<int64_t>(value->size()) == dim) {
      Elems v;
      for (int64_t i = 0; i < len; ++i) v.push_back((*value)[static_cast<size_t>(b + i * step)]);
      value = v;
    } else {
      value.reset();
    }
    d = Fixed(len);
  }
  c.Set(0, c.Elem(0), out, value);
}

void Expand(Ctx& c) {
  const Elems* target = c.Value(1);
  const Dims* s = c.Shape(0);
  if (!target || !s) return c.Set(0, c.Elem(0), std::nullopt);
  Dims t;
  for (const Elem& e : *target) t.push_back(e.ToDim());
  c.Set(0, c.Elem(0), Broadcast({s, &t}));
}

void Tile(Ctx& c) {
  const Dims* s = c.Shape(0);
  auto reps = c.Ints(1);
  if (!s || !reps || reps->size() != s->size()) return c.Set(0, c.Elem(0), s ? std::optional<Dims>(Dims(s->size())) : std::nullopt);
  Dims out = *s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_fixed() || out[i].param.empty() || (*reps)[i] < 0) {
      int64_t tiled = 0;
      out[i] = out[i].is_fixed() && (*reps)[i] >= 0 && MulDims(out[i].value, (*reps)[i], &tiled) ? Fixed(tiled) : Dim();
      continue;
    }
    Product p, none;
    p.Add(out[i]);
    if (!MulDims(p.num, (*reps)[i], &p.num)) p.unknown = true;
    out[i] = p.DivideBy(none);
  }
  c.Set(0, c.Elem(0), out);
}

void Pad(Ctx& c) {
  const Dims* s = c.Shape(0);
  auto pads = c.AttrOrInput("pads", 1);
  // Pads for a subset of axes (input 3, opset 18) are left to the kernel.
  if (!s || !pads || c.n.HasInput(3) || pads->size() != 2 * s->size()) {
    return c.Set(0, c.Elem(0), s ? std::optional<Dims>(Dims(s->size())) : std::nullopt);
  }
  Dims out = *s;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t add = 0, padded = 0;
    const bool fits = AddDims((*pads)[i], (*pads)[i + s->size()], &add);
    // An overflowing or negative size stays unknown (the kernel refuses it with the node named).
    if (out[i].is_fixed()) out[i] = fits && AddDims(out[i].value, add, &padded) && padded >= 0 ? Fixed(padded) : Dim();
    else if (!fits || add != 0) out[i] = Dim();
  }
  c.Set(0, c.Elem(0), out);
}

void ConstantOfShape(Ctx& c) {
  const Attribute* a = c.n.FindAttr("value");
  const DType elem = a && a->t.defined() ? a->t.dtype() : DType::kFloat32;
  const Elems* target = c.Value(0);
  if (!target) {
    const Dims* ts = c.Shape(0);
    if (ts && ts->size() == 1 && ts->at(0).is_fixed() && ts->at(0).value >= 0 && ts->at(0).value <= kMaxInferredRank) {
      return c.Set(0, elem, Dims(static_cast<size_t>(ts->at(0).value)));
    }
    return c.Set(0, elem, std::nullopt);
  }
  Dims out;
  for (const Elem& e : *target) out.push_back(e.ToDim());
  std::optional<Elems> value;
  if (a && out.size() == 1 && out[0].is_fixed() && out[0].value <= static_cast<int64_t>(kMaxValueElems)) {
    if (auto one = ValueOf(a->t); one && one->size() == 1) value = Elems(static_cast<size_t>(out[0].value), (*one)[0]);
  }
  c.Set(0, elem, out, value);
}

void Range(Ctx& c) {
  const DType elem = c.Elem(0);
  const Tensor* t[3] = {c.Constant(0), c.Constant(1), c.Constant(2)};
  if (!t[0] || !t[1] || !t[2]) {  // Range(0, n, 1) has n values; Range(a, a + n, 1) too
    const Elems *start = c.Value(0), *limit = c.Value(1), *delta = c.Value(2);
    Dim len;
    if (start && limit && delta && start->size() == 1 && limit->size() == 1 && delta->size() == 1 &&
        (*delta)[0].k == Elem::K::kNum && (*delta)[0].num == 1 && (*limit)[0].k == Elem::K::kSym) {
      const Elem& a = (*start)[0];
      std::multiset<std::string> rest = Terms((*limit)[0].sym);
      bool ok = a.k == Elem::K::kSym || (a.k == Elem::K::kNum && a.num == 0);
      if (a.k == Elem::K::kSym) {
        for (const std::string& term : Terms(a.sym)) {
          auto it = rest.find(term);
          if (it == rest.end()) ok = false;
          else rest.erase(it);
        }
      }
      if (ok) len = rest.empty() ? Fixed(0) : Sym(absl::StrJoin(rest, " + "));
    }
    return c.Set(0, elem, Dims{len});
  }
  double v[3];
  for (int i = 0; i < 3; ++i) {
    if (t[i]->num_elements() != 1 || t[i]->dtype() != elem) return c.Set(0, elem, Dims{Dim()});
    switch (elem) {
      case DType::kFloat32: v[i] = t[i]->data<float>()[0]; break;
      case DType::kFloat64: v[i] = t[i]->data<double>()[0]; break;
      case DType::kInt32: v[i] = t[i]->data<int32_t>()[0]; break;
      case DType::kInt64: v[i] = static_cast<double>(t[i]->data<int64_t>()[0]); break;
      default: return c.Set(0, elem, Dims{Dim()});
    }
  }
  const double q = std::ceil((v[1] - v[0]) / v[2]);
  // A length past int64 has no integer value: unknown here, refused by the kernel.
  if (v[2] == 0 || !std::isfinite(q) || q >= 9.2e18) return c.Set(0, elem, Dims{Dim()});
  c.Set(0, elem, Dims{Fixed(std::max<int64_t>(static_cast<int64_t>(q), 0))});
}

// --- Reductions ----------------------------------------------------------------------------------

void Reduce(Ctx& c) {
  const bool arg = c.n.op_type == "ArgMax" || c.n.op_type == "ArgMin";
  const DType elem = arg ? DType::kInt64 : c.Elem(0);
  const Dims* s = c.Shape(0);
  bool absent = false;
  std::optional<std::vector<int64_t>> axes;
  if (arg) axes = std::vector<int64_t>{c.n.GetInt("axis", 0)};
  else axes = c.AttrOrInput("axes", 1, &absent);
  if (!s || (!axes && !absent)) return c.Set(0, elem, std::nullopt);
  if (!axes) axes.emplace();
  const bool keep = c.n.GetInt("keepdims", 1) != 0;
  std::vector<bool> reduce(s->size(), axes->empty());
  if (axes->empty() && c.n.GetInt("noop_with_empty_axes", 0) != 0) return c.Set(0, elem, *s);
  for (int64_t a : *axes) {
    if (!NormAxis(a, s->size())) return;
    reduce[static_cast<size_t>(a)] = true;
  }
  Dims out;
  for (size_t i = 0; i < s->size(); ++i) {
    if (!reduce[i]) out.push_back((*s)[i]);
    else if (keep) out.push_back(Fixed(1));
  }
  c.Set(0, elem, out);
}

// --- Convolution and pooling (spatial dims when fixed) -------------------------------------------

void Window(Ctx& c) {
  const std::string& op = c.n.op_type;
  const Dims* x = c.Shape(0);
  if (!x || x->size() < 3) return c.Set(0, c.Elem(0), std::nullopt);
  const size_t nd = x->size() - 2;
  Dims out = {(*x)[0], (*x)[1]};
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
    out.resize(x->size(), Fixed(1));
    return c.Set(0, c.Elem(0), out);
  }
  std::vector<int64_t> kernel = c.n.GetInts("kernel_shape");
  if (op == "Conv" || op == internal_ops::FusedConv::kName) {
    const Dims* w = c.Shape(1);
    out[1] = w && !w->empty() ? (*w)[0] : Dim();
    if (kernel.empty() && w && w->size() == x->size()) {
      for (size_t i = 2; i < w->size(); ++i) kernel.push_back((*w)[i].is_fixed() ? (*w)[i].value : -1);
    }
  }
  const std::vector<int64_t> strides = c.n.GetInts("strides", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> dil = c.n.GetInts("dilations", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> pads = c.n.GetInts("pads", std::vector<int64_t>(2 * nd, 0));
  const std::string auto_pad = c.n.GetString("auto_pad", "NOTSET");
  const bool ceil_mode = c.n.GetInt("ceil_mode", 0) != 0;
  const bool ok = kernel.size() == nd && strides.size() == nd && dil.size() == nd && pads.size() == 2 * nd;
  for (size_t i = 0; i < nd; ++i) {
    const Dim& in = (*x)[i + 2];
    if (!ok || !in.is_fixed() || kernel[i] < 1 || strides[i] < 1) {
      out.push_back(Dim());
      continue;
    }
    // In 128 bits: attributes from the model may overflow int64; a size past it stays unknown.
    const __int128 ek = static_cast<__int128>(kernel[i] - 1) * dil[i] + 1, s = strides[i];
    __int128 o = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (in.value + s - 1) / s;
    } else {
      const __int128 pb = auto_pad == "VALID" ? 0 : pads[i], pe = auto_pad == "VALID" ? 0 : pads[i + nd];
      const __int128 span = in.value + pb + pe - ek;
      if (span < 0) {
        out.push_back(Dim());
        continue;
      }
      o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      if (ceil_mode && (o - 1) * s >= in.value + pb) --o;  // the last window starts inside
    }
    out.push_back(o <= std::numeric_limits<int64_t>::max() ? Fixed(static_cast<int64_t>(o)) : Dim());
  }
  c.Set(0, c.Elem(0), out);
  if (op == "MaxPool") c.Set(1, DType::kInt64, out);
}

// --- Quantisation, constants --------------------------------------------------------

void Dequantize(Ctx& c) {
  DType elem = c.Elem(1);
  if (c.n.HasAttr("output_dtype")) elem = static_cast<DType>(c.n.GetInt("output_dtype", 0));
  c.Set(0, elem, c.In(0) ? c.In(0)->shape : std::nullopt);
}

void Quantize(Ctx& c) {
  DType elem = c.n.HasInput(2) ? c.Elem(2) : DType::kUInt8;
  if (c.n.HasAttr("output_dtype") && c.n.GetInt("output_dtype", 0) != 0) elem = static_cast<DType>(c.n.GetInt("output_dtype", 0));
  c.Set(0, elem, c.In(0) ? c.In(0)->shape : std::nullopt);
}

void ConstantRule(Ctx& c) {
  const Attribute* a = c.n.FindAttr("value");
  if (a && a->t.defined()) {
    Known k = FromTensor(a->t);
    return c.Set(0, k.elem, k.shape, k.value);
  }
  if (c.n.HasAttr("value_float")) return c.Set(0, DType::kFloat32, Dims{});
  if (c.n.HasAttr("value_int")) return c.Set(0, DType::kInt64, Dims{}, Elems{Elem::Num(c.n.GetInt("value_int", 0))});
  if (c.n.HasAttr("value_floats")) return c.Set(0, DType::kFloat32, Dims{Fixed(static_cast<int64_t>(c.n.GetFloats("value_floats").size()))});
  if (c.n.HasAttr("value_ints")) {
    Elems v;
    for (int64_t i : c.n.GetInts("value_ints")) v.push_back(Elem::Num(i));
    c.Set(0, DType::kInt64, Dims{Fixed(static_cast<int64_t>(v.size()))}, v);
  }
}

}  // namespace

const std::map<std::string, Rule>& Rules() {
  static const std::map<std::string, Rule>* rules = [] {
    auto* m = new std::map<std::string, Rule>;
    for (const char* op : {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Gelu",
                           "Softmax", "LogSoftmax", "Hardmax", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu",
                           "Celu", "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Shrink", "Sin", "Cos", "Tan",
                           "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Floor", "Ceil", "Round",
                           "Sign", "Clip", "BitwiseNot", "CumSum", "Trilu", "LRN", "LpNormalization",
                           "MeanVarianceNormalization", "InstanceNormalization", "BatchNormalization",
                           "GroupNormalization", "RMSNormalization", "LayerNormalization"}) {
      (*m)[op] = Unary;
    }
    for (const char* op : {"Identity"}) (*m)[op] = IdentityRule;
    for (const char* op : {"Not", "IsNaN", "IsInf"}) (*m)[op] = ToBool;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "PRelu", "BitShift",
                           "BitwiseAnd", "BitwiseOr", "BitwiseXor", "And", "Or", "Xor", "Equal", "Less", "Greater",
                           "LessOrEqual", "GreaterOrEqual", "Where"}) {
      (*m)[op] = Elementwise;
    }
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"}) {
      (*m)[op] = Reduce;
    }
    for (const char* op : {"Conv", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
                           "GlobalLpPool"}) {
      (*m)[op] = Window;
    }
    m->insert({{"Cast", Cast}, {"CastLike", Cast}, {"Dropout", Dropout}, {"MatMul", MatMul},
               {"MatMulInteger", MatMul}, {"Gemm", Gemm}, {"Transpose", Transpose}, {"Reshape", Reshape},
               {"Flatten", Flatten}, {"Shape", ShapeRule}, {"Size", Size}, {"Unsqueeze", Unsqueeze},
               {"Squeeze", Squeeze}, {"Concat", Concat}, {"Split", Split}, {"Gather", Gather},
               {"GatherElements", GatherElements}, {"Slice", Slice}, {"Expand", Expand}, {"Tile", Tile},
               {"Pad", Pad}, {"ConstantOfShape", ConstantOfShape}, {"Range", Range},
               {"DequantizeLinear", Dequantize}, {"QuantizeLinear", Quantize},
               {"Constant", ConstantRule}, {"SimplifiedLayerNormalization", SimplifiedLayerNorm}});
    return m;
  }();
  return *rules;
}

}  // namespace oneinfer::shape_rules
