#include <algorithm>
#include <vector>

#include "ops/kernel.h"
#include "ops/families.h"

namespace oneinfer {

namespace {
class FnKernel : public OpKernel {
 public:
  FnKernel(KernelFn fn, bool rowwise) : fn_(std::move(fn)), rowwise_(rowwise) {}
  absl::Status Compute(OpContext& ctx) const override { return fn_(ctx); }
  int RowwiseInput() const override { return rowwise_ ? 0 : -1; }
  bool RowwiseElementwise() const override { return rowwise_; }

 private:
  KernelFn fn_;
  bool rowwise_;
};

KernelFactory FnKernelFactory(KernelFn fn, bool rowwise) {
  return [fn = std::move(fn), rowwise](const KernelInit&) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new FnKernel(fn, rowwise));
  };
}
}  // namespace

KernelFactory MakeFnKernel(KernelFn fn) { return FnKernelFactory(std::move(fn), false); }
KernelFactory MakeRowwiseFnKernel(KernelFn fn) { return FnKernelFactory(std::move(fn), true); }

void AddVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int64_t> since,
                 const KernelFactory& factory, bool non_tensors) {
  const std::vector<int64_t> v(since);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t last = i + 1 < v.size() ? v[i + 1] - 1 : kNewestOpset;
    r.Add("", op, v[i], last, factory).accepts_non_tensors = non_tensors;
  }
}

void AddVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int64_t> since, KernelFn fn) {
  AddVersions(r, op, since, MakeFnKernel(std::move(fn)));
}

KernelRegistry& KernelRegistry::Global() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterUnaryOps(*r);
    RegisterBinaryOps(*r);
    RegisterLogicOps(*r);
    RegisterCastOps(*r);
    RegisterReductionOps(*r);
    RegisterShapeOps(*r);
    RegisterSliceConcatOps(*r);
    RegisterGatherScatterOps(*r);
    RegisterGeneratorOps(*r);
    RegisterSelectionOps(*r);
    RegisterMatMulOps(*r);
    RegisterNNOps(*r);
    RegisterNNNormOps(*r);
    RegisterQuantizeOps(*r);
    RegisterRecurrentOps(*r);
    RegisterControlFlowOps(*r);
    RegisterSequenceOps(*r);
    RegisterImageOps(*r);
    RegisterSignalOps(*r);
    RegisterRandomOps(*r);
    RegisterStringOps(*r);
    RegisterTrainingOps(*r);
    RegisterFusedOps(*r);
    RegisterQdqMatMulOps(*r);
    RegisterWeightDequantOps(*r);
    RegisterQ4NXOps(*r);
    RegisterContribMatMulNBitsOps(*r);
    RegisterContribNormOps(*r);
    RegisterContribActivationOps(*r);
    RegisterContribFusedMatMulOps(*r);
    RegisterContribAttentionOps(*r);
    RegisterOnnxAttentionOps(*r);
    return r;
  }();
  return *registry;
}

KernelRegistry::Entry& KernelRegistry::Add(std::string domain, std::string op_type, int64_t first_opset,
                                           int64_t last_opset, KernelFactory factory) {
  entries_.push_back(Entry{CanonicalDomain(domain), std::move(op_type), first_opset, last_opset,
                           std::move(factory), false});
  return entries_.back();
}

const KernelRegistry::Entry* KernelRegistry::Find(const std::string& domain,
                                                  const std::string& op_type,
                                                  int64_t opset) const {
  const std::string d = CanonicalDomain(domain);
  for (const Entry& e : entries_) {
    if (e.op_type == op_type && e.domain == d && opset >= e.first_opset && opset <= e.last_opset) {
      return &e;
    }
  }
  return nullptr;
}

bool KernelRegistry::Knows(const std::string& domain, const std::string& op_type) const {
  const std::string d = CanonicalDomain(domain);
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const Entry& e) { return e.op_type == op_type && e.domain == d; });
}

}  // namespace oneinfer
