#include "convert/q4nx_writer.h"

#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "quant/q4nx.h"

namespace oneinfer::convert {

absl::StatusOr<std::string> Q4NXWeightSink::Add(onnx::GraphProto* g, const std::string& name, const std::vector<float>& w,
                                                int64_t out, int64_t in) {
  auto q = q4nx::QuantizeQ4_1(w.data(), out, in);
  if (!q.ok()) return absl::Status(q.status().code(), absl::StrCat("--weights q4nx: tensor '", name, "': ", q.status().message()));
  auto entry = q4nx::Q4_1Entry(name, *q);
  if (!entry.ok()) return entry.status();
  tensors_.push_back(std::move(*entry));
  auto* v = g->add_input();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(in);
  tt->mutable_shape()->add_dim()->set_dim_value(out);
  v->set_doc_string(absl::StrCat("q4_1 weight '", name, "' in ", file_.filename().string(), " ([", out, ", ", in,
                                 "] there); bound at load by oneinfer, fed as float [in, out] elsewhere"));
  return name;
}

absl::Status Q4NXWeightSink::Finish(onnx::ModelProto* model) {
  if (auto st = q4nx::WriteQ4NX(file_.string(), tensors_); !st.ok()) return st;
  auto* p = model->add_metadata_props();
  p->set_key(kQ4NXWeightsKey);
  p->set_value(file_.filename().string());
  return absl::OkStatus();
}

}  // namespace oneinfer::convert
