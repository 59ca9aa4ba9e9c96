// The shape and type inference rules, one per op family (graph/passes/shape_rules.cc), and what
// a rule sees: its inputs' element types, (possibly symbolic) shapes and, for small integer
// tensors, their elements when known at load. The pass that drives them is shape_inference.cc.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace oneinfer::shape_rules {

using Dims = std::vector<Dim>;

inline Dim Fixed(int64_t v) { Dim d; d.value = v; return d; }
inline Dim Sym(std::string p) { Dim d; d.param = std::move(p); return d; }

// One element of a small integer tensor known at load: a number, a symbolic dim, or unknown.
struct Elem {
  enum class K { kNum, kSym, kUnknown };
  K k = K::kUnknown;
  int64_t num = 0;
  std::string sym;
  static Elem Num(int64_t v) { return Elem{K::kNum, v, ""}; }
  static Elem Of(const Dim& d) {
    if (d.is_fixed()) return Num(d.value);
    return d.param.empty() ? Elem{} : Elem{K::kSym, 0, d.param};
  }
  Dim ToDim() const { return k == K::kNum && num >= 0 ? Fixed(num) : k == K::kSym ? Sym(sym) : Dim(); }
};
using Elems = std::vector<Elem>;

// What is known about one value.
struct Known {
  DType elem = DType::kUndefined;
  std::optional<Dims> shape;     // nullopt = rank unknown
  std::optional<Elems> value;    // the elements of a rank <= 1 integer tensor
  const Tensor* constant = nullptr;
};

// What a constant or a declared type says.
Known FromTensor(const Tensor& t);
Known FromType(const TypeInfo& t);

// Everything a rule reads and writes for one node.
struct Ctx {
  const Node& n;
  int64_t opset;
  std::vector<const Known*> in;  // nullptr = omitted or nothing known
  std::vector<Known> out;

  const Known* In(size_t i) const { return i < in.size() ? in[i] : nullptr; }
  DType Elem(size_t i) const { return In(i) ? In(i)->elem : DType::kUndefined; }
  const Dims* Shape(size_t i) const { return In(i) && In(i)->shape ? &*In(i)->shape : nullptr; }
  const Elems* Value(size_t i) const { return In(i) && In(i)->value ? &*In(i)->value : nullptr; }
  const Tensor* Constant(size_t i) const { return In(i) ? In(i)->constant : nullptr; }
  // Input i's elements when all are plain numbers.
  std::optional<std::vector<int64_t>> Ints(size_t i) const {
    const Elems* v = Value(i);
    if (!v) return std::nullopt;
    std::vector<int64_t> r;
    for (const auto& e : *v) {
      if (e.k != Elem::K::kNum) return std::nullopt;
      r.push_back(e.num);
    }
    return r;
  }
  // An ints attribute (older opsets) or else constant input i (newer ones); nullopt = absent or unknown.
  std::optional<std::vector<int64_t>> AttrOrInput(const std::string& attr, size_t i, bool* absent = nullptr) const {
    if (n.HasAttr(attr)) return n.GetInts(attr);
    if (absent) *absent = !n.HasInput(i);
    return Ints(i);
  }
  void Set(size_t k, DType elem, std::optional<Dims> shape, std::optional<Elems> value = std::nullopt) {
    if (k >= out.size() || elem == DType::kUndefined) return;
    out[k].elem = elem;
    out[k].shape = std::move(shape);
    if (value && (elem == DType::kInt64 || elem == DType::kInt32)) out[k].value = std::move(value);
  }
};

using Rule = void (*)(Ctx&);

// op_type -> rule; ops without one leave their outputs unknown.
const std::map<std::string, Rule>& Rules();

}  // namespace oneinfer::shape_rules
