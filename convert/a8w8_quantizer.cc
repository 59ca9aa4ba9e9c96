// QuantizeA8W8 (oneinfer/convert.h): a float ONNX graph -> a static A8W8 QDQ graph.
//
// Every MatMul whose second input is a constant 2-D float weight [K, N] becomes
//   x -> QuantizeLinear -> DequantizeLinear -> MatMul [-> QuantizeLinear -> DequantizeLinear]
//   w_int8 (initializer) -> DequantizeLinear /
// with the activation ranges measured by running the float graph on calibration data
// (convert/calibration.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "convert/calibration.h"
#include "graph/onnx_loader.h"
#include "oneinfer/convert.h"
#include "oneinfer/session.h"
#include "oneinfer/tokenizer.h"
#include "quant/weight_quant.h"

namespace oneinfer {
namespace convert {

namespace fs = std::filesystem;

namespace {

// One quantised MatMul: node index, activation, weight, output.
struct Group {
  int node = 0;
  std::string act, weight, out;
};

onnx::TensorProto ScalarOrVector(const std::string& name, int elem, const std::vector<float>& f,
                                 const std::vector<int32_t>& i, bool scalar) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(elem);
  const size_t n = elem == onnx::TensorProto::FLOAT ? f.size() : i.size();
  if (!scalar) t.add_dims(static_cast<int64_t>(n));
  std::string raw;
  if (elem == onnx::TensorProto::FLOAT) {
    raw.assign(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
  } else {
    for (int32_t v : i) raw.push_back(static_cast<char>(static_cast<uint8_t>(v)));
  }
  t.set_raw_data(raw);
  return t;
}

onnx::AttributeProto AxisAttr(int64_t axis) {
  onnx::AttributeProto a;
  a.set_name("axis");
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(axis);
  return a;
}

class Quantizer {
 public:
  Quantizer(std::string model_path, std::string out_path, QuantizeA8W8Options o)
      : model_path_(std::move(model_path)), out_path_(std::move(out_path)), o_(std::move(o)) {}
  absl::Status Run();
  QuantizeA8W8Report& report() { return report_; }

 private:
  absl::Status Load();
  absl::Status FindGroups();
  absl::Status Calibrate();
  absl::Status Rewrite();
  absl::Status CheckOutput() const;
  absl::Status Write();
  absl::Status Evaluate();
  std::string Unique(const std::string& base) {
    std::string n = base;
    for (int k = 1; names_.count(n); ++k) n = absl::StrCat(base, "_", k);
    names_.insert(n);
    return n;
  }

  std::string model_path_, out_path_;
  QuantizeA8W8Options o_;
  QuantizeA8W8Report report_;
  fs::path base_dir_;
  onnx::ModelProto model_;
  std::unique_ptr<ExternalDataResolver> resolver_;
  std::set<std::string> names_;  // every value and initializer name in the graph
  std::map<std::string, int> init_index_;
  std::vector<Group> groups_;
  std::map<std::string, int> skipped_count_;  // why a MatMul was left float -> how many
  std::vector<std::string> calib_names_;  // tensors whose ranges are measured
  std::map<std::string, Stats> stats_;
  std::map<std::string, QParams> qparams_;
  std::string calib_desc_;
  int64_t calib_tokens_ = 0;
  int calib_runs_ = 0;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::vector<Feed>> calib_feeds_;
};

absl::Status Quantizer::Load() {
  auto bytes = ReadFile(model_path_, "model");
  if (!bytes.ok()) return bytes.status();
  if (auto s = ParseModelProto(bytes->data(), bytes->size(), &model_); !s.ok()) return s;
  base_dir_ = fs::absolute(model_path_).parent_path();
  resolver_ = std::make_unique<ExternalDataResolver>(base_dir_.string());
  const onnx::GraphProto& g = model_.graph();
  for (int i = 0; i < g.initializer_size(); ++i) {
    init_index_[g.initializer(i).name()] = i;
    names_.insert(g.initializer(i).name());
  }
  for (const auto& v : g.input()) names_.insert(v.name());
  for (const auto& n : g.node()) {
    for (const auto& x : n.output()) names_.insert(x);
    if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear" || n.op_type() == "QLinearMatMul" ||
        n.op_type() == "MatMulInteger" || n.op_type() == "DynamicQuantizeLinear") {
      return absl::InvalidArgumentError(absl::StrCat("the model is already quantised (node '", n.name(), "' is ",
                                                     n.op_type(), "); give the float model"));
    }
  }
  int64_t opset = -1;
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  }
  const int64_t need = o_.per_channel ? 13 : 10;
  if (o_.domain.empty() && opset < need) {
    return absl::UnimplementedError(absl::StrCat("the model imports ai.onnx opset ", opset, "; ",
                                                 o_.per_channel ? "per-channel " : "", "QuantizeLinear/DequantizeLinear need opset ",
                                                 need, " or newer"));
  }
  return absl::OkStatus();
}

absl::Status Quantizer::FindGroups() {
  const onnx::GraphProto& g = model_.graph();
  std::set<std::string> graph_inputs;
  for (const auto& v : g.input()) graph_inputs.insert(v.name());
  int matmuls = 0;
  auto skip = [&](const std::string& why) { ++skipped_count_[why]; };
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "MatMul" || !(n.domain().empty() || n.domain() == "ai.onnx")) continue;
    ++matmuls;
    if (n.input_size() != 2 || n.output_size() != 1) {
      skip("malformed");
      continue;
    }
    auto it = init_index_.find(n.input(1));
    if (it == init_index_.end() || graph_inputs.count(n.input(1))) {
      skip("weight is not a constant initializer");
      continue;
    }
    if (init_index_.count(n.input(0)) && !graph_inputs.count(n.input(0))) {
      skip("both inputs are constant");
      continue;
    }
    const onnx::TensorProto& w = g.initializer(it->second);
    if (w.data_type() != onnx::TensorProto::FLOAT) {
      skip("weight is not float32");
      continue;
    }
    if (w.dims_size() != 2) {
      skip("weight is not 2-D");
      continue;
    }
    if (w.dims(0) == 1) {
      skip("K = 1: an outer product such as rotary positions x frequencies, no sum to gain from int8");
      continue;
    }
    groups_.push_back(Group{i, n.input(0), n.input(1), n.output(0)});
  }
  if (groups_.empty()) {
    std::string why;
    for (const auto& [k, c] : skipped_count_) absl::StrAppend(&why, why.empty() ? "" : "; ", c, "x ", k);
    return absl::InvalidArgumentError(absl::StrCat("'", model_path_, "' has no MatMul with a constant 2-D float32 weight to quantise (",
                                                   matmuls, " MatMul nodes", why.empty() ? "" : ": ", why, ")"));
  }
  std::set<std::string> seen;
  for (const Group& gr : groups_) {
    if (seen.insert(gr.act).second) calib_names_.push_back(gr.act);
    if (!o_.matmul_only && seen.insert(gr.out).second) calib_names_.push_back(gr.out);
  }
  return absl::OkStatus();
}

absl::Status Quantizer::Calibrate() {
  // A copy of the model that also returns every tensor whose range is wanted.
  onnx::ModelProto probe = model_;
  std::set<std::string> outputs;
  for (const auto& v : probe.graph().output()) outputs.insert(v.name());
  for (const std::string& name : calib_names_) {
    if (!outputs.count(name)) probe.mutable_graph()->add_output()->set_name(name);
  }
  const std::string bytes = probe.SerializeAsString();
  const SessionOptions& so = o_.session;
  auto session = Session::LoadFromBuffer(bytes.data(), bytes.size(), so, base_dir_.string());
  if (!session.ok()) return absl::Status(session.status().code(), absl::StrCat("loading the float model for calibration: ", session.status().message()));
  const Session& s = **session;

  // Calibration data.
  bool causal = false;
  for (const IOInfo& in : s.inputs()) causal |= in.name == "input_ids";
  const bool wants_tokens = o_.calib_inputs.empty() && o_.calib_ids.empty();
  const bool needs_tokenizer = wants_tokens || !o_.eval_text.empty();
  std::string tok_path = o_.tokenizer;
  if (tok_path.empty() && fs::exists(base_dir_ / "tokenizer.json")) tok_path = (base_dir_ / "tokenizer.json").string();
  if (needs_tokenizer && (causal || !o_.calib_text.empty())) {
    if (tok_path.empty()) {
      return absl::NotFoundError(absl::StrCat("no tokenizer.json beside the model (", base_dir_.string(),
                                              "); give --tokenizer, --calib-ids or --calib-inputs"));
    }
    auto t = Tokenizer::FromFile(tok_path);
    if (!t.ok()) return t.status();
    tokenizer_ = std::move(*t);
  }
  std::vector<std::vector<int32_t>> id_seqs;
  if (!o_.calib_inputs.empty()) {
    auto feeds = DirFeeds(s, o_.calib_inputs);
    if (!feeds.ok()) return feeds.status();
    calib_feeds_ = std::move(*feeds);
    calib_desc_ = absl::StrCat(calib_feeds_.size(), " input sets from ", o_.calib_inputs);
  } else {
    if (!causal) {
      return absl::InvalidArgumentError("the model has no 'input_ids' input, so token calibration does not apply; give --calib-inputs DIR");
    }
    if (!o_.calib_ids.empty()) {
      auto text = ReadFile(o_.calib_ids, "calibration ids file");
      if (!text.ok()) return text.status();
      auto seqs = ParseIds(*text, o_.calib_ids);
      if (!seqs.ok()) return seqs.status();
      id_seqs = std::move(*seqs);
      calib_desc_ = o_.calib_ids;
    } else {
      std::string text = kBuiltinCalibration;
      calib_desc_ = "the built-in sample";
      if (!o_.calib_text.empty()) {
        auto t = ReadFile(o_.calib_text, "calibration file");
        if (!t.ok()) return t.status();
        text = std::move(*t);
        calib_desc_ = o_.calib_text;
      }
      auto encoded = tokenizer_->TryEncode(text);
      if (!encoded.ok()) return encoded.status();
      id_seqs.push_back(*std::move(encoded));
      if (id_seqs[0].empty()) return absl::InvalidArgumentError(absl::StrCat("calibration text '", o_.calib_text, "' is empty"));
    }
    for (auto& seq : Chunk(id_seqs, o_.calib_seq, o_.calib_tokens)) {
      calib_tokens_ += static_cast<int64_t>(seq.size());
      auto feeds = CausalFeeds(s, seq);
      if (!feeds.ok()) return feeds.status();
      calib_feeds_.push_back(std::move(*feeds));
    }
  }
  calib_runs_ = static_cast<int>(calib_feeds_.size());

  // Pass 1: min and max.
  for (const auto& feeds : calib_feeds_) {
    auto st = RunAndVisit(s, feeds, calib_names_, [&](const std::string& name, const Tensor& t) {
      Stats& st = stats_[name];
      const float* p = t.data<float>();
      const int64_t n = t.num_elements();
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(p[i])) return absl::InvalidArgumentError(absl::StrCat("calibration: tensor '", name, "' has a non-finite value"));
        st.lo = std::min(st.lo, p[i]);
        st.hi = std::max(st.hi, p[i]);
      }
      st.count += static_cast<uint64_t>(n);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  // Pass 2 (percentile): a histogram over the range pass 1 found.
  if (o_.method == CalibrationMethod::kPercentile) {
    for (auto& [name, st] : stats_) st.hist.assign(kBins, 0);
    for (const auto& feeds : calib_feeds_) {
      auto r = RunAndVisit(s, feeds, calib_names_, [&](const std::string& name, const Tensor& t) {
        Stats& st = stats_[name];
        const float* p = t.data<float>();
        const int64_t n = t.num_elements();
        const float lo = o_.activation_uint8 ? st.lo : 0.0f;
        const float hi = o_.activation_uint8 ? st.hi : std::max(-st.lo, st.hi);
        const double k = hi > lo ? kBins / (static_cast<double>(hi) - lo) : 0.0;
        for (int64_t i = 0; i < n; ++i) {
          const float v = o_.activation_uint8 ? p[i] : std::fabs(p[i]);
          const int64_t b = std::clamp<int64_t>(static_cast<int64_t>((static_cast<double>(v) - lo) * k), 0, kBins - 1);
          ++st.hist[static_cast<size_t>(b)];
        }
        return absl::OkStatus();
      });
      if (!r.ok()) return r;
    }
  }
  for (const std::string& name : calib_names_) {
    const Stats& st = stats_[name];
    if (st.count == 0) return absl::InvalidArgumentError(absl::StrCat("calibration: tensor '", name, "' was empty in every run"));
    float lo = st.lo, hi = st.hi;
    // A graph output (the logits) keeps its whole range: clipping its top would tie the
    // largest values and change the argmax.
    if (o_.method == CalibrationMethod::kPercentile && !outputs.count(name)) {
      const double tail = (100.0 - o_.percentile) / 100.0;
      if (o_.activation_uint8) {
        lo = HistQuantile(st.hist, st.lo, st.hi, tail / 2);
        hi = HistQuantile(st.hist, st.lo, st.hi, 1.0 - tail / 2);
      } else {
        hi = HistQuantile(st.hist, 0.0f, std::max(-st.lo, st.hi), 1.0 - tail);
        lo = -hi;
      }
    }
    qparams_[name] = ActivationParams(lo, hi, o_.activation_uint8);
  }
  return absl::OkStatus();
}

absl::Status Quantizer::Rewrite() {
  onnx::GraphProto* g = model_.mutable_graph();
  const int act_elem = o_.activation_uint8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  const std::string& dom = o_.domain;
  // Weights read by anything other than a quantised MatMul keep their float initializer.
  std::set<int> group_nodes;
  for (const Group& gr : groups_) group_nodes.insert(gr.node);
  std::set<std::string> shared_weights;
  for (int i = 0; i < g->node_size(); ++i) {
    const auto& n = g->node(i);
    for (int k = 0; k < n.input_size(); ++k) {
      if (!group_nodes.count(i) || k != 1) shared_weights.insert(n.input(k));
    }
  }
  for (const auto& v : g->output()) shared_weights.insert(v.name());

  std::vector<onnx::TensorProto> new_inits;
  // QuantizeLinear(src) -> DequantizeLinear -> dq_out with the range measured for tensor x.
  auto qdq = [&](const std::string& x, const std::string& src, const std::string& dq_out, std::vector<onnx::NodeProto>* out) {
    const QParams& qp = qparams_.at(x);
    const std::string scale = Unique(x + "_scale"), zp = Unique(x + "_zero_point");
    new_inits.push_back(ScalarOrVector(scale, onnx::TensorProto::FLOAT, {qp.scale}, {}, true));
    new_inits.push_back(ScalarOrVector(zp, act_elem, {}, {qp.zero_point}, true));
    const std::string xq = Unique(x + "_quantized");
    onnx::NodeProto q, dq;
    q.set_op_type("QuantizeLinear");
    q.set_domain(dom);
    q.set_name(Unique(x + "_QuantizeLinear"));
    q.add_input(src);
    q.add_input(scale);
    q.add_input(zp);
    q.add_output(xq);
    dq.set_op_type("DequantizeLinear");
    dq.set_domain(dom);
    dq.set_name(Unique(x + "_DequantizeLinear"));
    dq.add_input(xq);
    dq.add_input(scale);
    dq.add_input(zp);
    dq.add_output(dq_out);
    out->push_back(std::move(q));
    out->push_back(std::move(dq));
  };

  // Weights: int8 + scale + zero point + DequantizeLinear, once per weight.
  std::map<std::string, std::string> weight_dq;  // float weight name -> DQ output
  std::vector<onnx::NodeProto> weight_nodes;
  std::set<std::string> replaced;  // float initializers that become int8 under the same name
  for (const Group& gr : groups_) {
    if (weight_dq.count(gr.weight)) continue;
    const onnx::TensorProto& wp = g->initializer(init_index_.at(gr.weight));
    auto w = TensorFromProto(wp, resolver_.get());
    if (!w.ok()) return w.status();
    const int64_t K = w->dim(0), N = w->dim(1);
    const float* src = w->data<float>();
    const int64_t elements = K * N;
    for (int64_t i = 0; i < elements; ++i) {
      if (!std::isfinite(src[i])) return absl::InvalidArgumentError(absl::StrCat("weight '", gr.weight, "' has a non-finite value"));
    }
    std::vector<float> scale(o_.per_channel ? static_cast<size_t>(N) : 1, 0.0f);
    std::string raw(static_cast<size_t>(K * N), '\0');
    QuantizeWeightsS8(src, K, N, WeightLayout::kKN, o_.per_channel, reinterpret_cast<int8_t*>(raw.data()), scale.data());
    onnx::TensorProto q;
    const bool keep_name = !shared_weights.count(gr.weight);
    const std::string qname = keep_name ? gr.weight : Unique(gr.weight + "_quantized");
    if (keep_name) replaced.insert(gr.weight);
    q.set_name(qname);
    q.set_data_type(onnx::TensorProto::INT8);
    q.add_dims(K);
    q.add_dims(N);
    q.set_raw_data(std::move(raw));
    const std::string sname = Unique(gr.weight + "_scale"), zname = Unique(gr.weight + "_zero_point");
    new_inits.push_back(ScalarOrVector(sname, onnx::TensorProto::FLOAT, scale, {}, !o_.per_channel));
    new_inits.push_back(ScalarOrVector(zname, onnx::TensorProto::INT8, {}, std::vector<int32_t>(scale.size(), 0), !o_.per_channel));
    onnx::NodeProto dq;
    dq.set_op_type("DequantizeLinear");
    dq.set_domain(dom);
    dq.set_name(Unique(gr.weight + "_DequantizeLinear"));
    dq.add_input(qname);
    dq.add_input(sname);
    dq.add_input(zname);
    const std::string out = Unique(gr.weight + "_dequantized");
    dq.add_output(out);
    if (o_.per_channel) *dq.add_attribute() = AxisAttr(1);
    weight_nodes.push_back(std::move(dq));
    weight_dq[gr.weight] = out;
    if (keep_name) {
      *g->mutable_initializer(init_index_.at(gr.weight)) = std::move(q);
    } else {
      new_inits.push_back(std::move(q));
    }
  }

  // Activations: output style for quantised MatMul outputs (the producer writes X_prequant and
  // every reader sees the DQ value under the old name), input style for the rest (only the
  // quantised MatMuls read X_dequantized). Names are fixed before emitting, so order is free.
  std::set<std::string> out_style;
  if (!o_.matmul_only) for (const Group& gr : groups_) out_style.insert(gr.out);
  std::map<std::string, std::string> act_dq;  // input-style activation -> its DQ output
  for (const Group& gr : groups_) {
    if (!out_style.count(gr.act) && !act_dq.count(gr.act)) act_dq[gr.act] = Unique(gr.act + "_dequantized");
  }
  std::map<int, const Group*> by_node;
  for (const Group& gr : groups_) by_node[gr.node] = &gr;

  std::vector<onnx::NodeProto> nodes = std::move(weight_nodes);
  std::set<std::string> produced;
  for (const auto& n : g->node()) for (const auto& x : n.output()) produced.insert(x);
  for (const auto& [x, dq_out] : act_dq) {
    if (!produced.count(x)) qdq(x, x, dq_out, &nodes);  // a graph input (or initializer)
  }
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto n = g->node(i);
    std::string prequant;
    if (auto it = by_node.find(i); it != by_node.end()) {
      const Group& gr = *it->second;
      if (act_dq.count(gr.act)) n.set_input(0, act_dq.at(gr.act));
      n.set_input(1, weight_dq.at(gr.weight));
      if (out_style.count(gr.out)) n.set_output(0, prequant = Unique(gr.out + "_prequant"));
    }
    const std::vector<std::string> outs(n.output().begin(), n.output().end());
    nodes.push_back(std::move(n));
    if (!prequant.empty()) qdq(by_node.at(i)->out, prequant, by_node.at(i)->out, &nodes);
    for (const std::string& x : outs) {
      if (auto it = act_dq.find(x); it != act_dq.end()) qdq(x, x, it->second, &nodes);
    }
  }
  g->clear_node();
  for (auto& n : nodes) *g->add_node() = std::move(n);
  for (auto& t : new_inits) *g->add_initializer() = std::move(t);
  // Float weights no longer read by anything are dropped.
  std::set<std::string> read;
  for (const auto& n : g->node()) for (const auto& x : n.input()) read.insert(x);
  for (const auto& v : g->output()) read.insert(v.name());
  auto* inits = g->mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(), [&](const onnx::TensorProto& t) { return !read.count(t.name()); }),
               inits->end());
  // Opset imports: ai.onnx stays; com.microsoft added when asked.
  if (!dom.empty()) {
    bool has = false;
    for (const auto& op : model_.opset_import()) has |= op.domain() == dom;
    if (!has) {
      auto* op = model_.add_opset_import();
      op->set_domain(dom);
      op->set_version(1);
    }
  }
  auto* meta = model_.add_metadata_props();
  meta->set_key("oneinfer.quantization");
  meta->set_value(absl::StrCat("a8w8 static, weights int8 ", o_.per_channel ? "per-channel" : "per-tensor",
                               ", activations ", o_.activation_uint8 ? "uint8 asymmetric" : "int8 symmetric", ", ",
                               o_.method == CalibrationMethod::kMinMax ? "minmax" : absl::StrFormat("percentile %g", o_.percentile),
                               o_.matmul_only ? ", matmul inputs only" : ""));
  return absl::OkStatus();
}

absl::Status Quantizer::CheckOutput() const {
  const fs::path out = fs::absolute(out_path_);
  const fs::path data_path = out.parent_path() / (out.filename().string() + ".data");
  // Writing over the input's own files would truncate the weights being read.
  const fs::path data_canon = fs::weakly_canonical(data_path);
  for (const auto& t : model_.graph().initializer()) {
    for (const auto& e : t.external_data()) {
      if (e.key() == "location" && fs::weakly_canonical(base_dir_ / e.value()) == data_canon) {
        return absl::InvalidArgumentError(absl::StrCat("the output's data file '", data_path.string(), "' is the input's; choose another -o"));
      }
    }
  }
  std::error_code ec;
  if (fs::equivalent(out, model_path_, ec)) return absl::InvalidArgumentError("the output would overwrite the input model; choose another -o");
  return absl::OkStatus();
}

absl::Status Quantizer::Write() {
  const fs::path out = fs::absolute(out_path_);
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create '", out.parent_path().string(), "': ", ec.message()));
  const std::string data_name = out.filename().string() + ".data";
  const fs::path data_path = out.parent_path() / data_name;
  const fs::path tmp_data = data_path.string() + ".tmp";
  std::ofstream data(tmp_data, std::ios::binary | std::ios::trunc);
  if (!data) return absl::InternalError(absl::StrCat("cannot write '", tmp_data.string(), "'"));
  size_t offset = 0;
  for (auto& t : *model_.mutable_graph()->mutable_initializer()) {
    const bool external = t.data_location() == onnx::TensorProto::EXTERNAL;
    if (!external && t.ByteSizeLong() < 1024) continue;  // small constants stay inline
    if (t.data_type() == onnx::TensorProto::STRING) continue;
    auto v = TensorFromProto(t, resolver_.get());
    if (!v.ok()) return v.status();
    while (offset % 64) {
      data.put('\0');
      ++offset;
    }
    const size_t bytes = v->byte_size();
    data.write(static_cast<const char*>(v->raw_data()), static_cast<std::streamsize>(bytes));
    onnx::TensorProto e;
    e.set_name(t.name());
    e.set_data_type(t.data_type());
    for (int64_t d : t.dims()) e.add_dims(d);
    e.set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, const std::string& val) {
      auto* x = e.add_external_data();
      x->set_key(k);
      x->set_value(val);
    };
    kv("location", data_name);
    kv("offset", std::to_string(offset));
    kv("length", std::to_string(bytes));
    offset += bytes;
    t = std::move(e);
  }
  data.close();
  if (!data) return absl::InternalError("writing the external data failed");
  fs::rename(tmp_data, data_path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot move '", tmp_data.string(), "' into place: ", ec.message()));
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f || !model_.SerializeToOstream(&f)) return absl::InternalError(absl::StrCat("cannot write '", out.string(), "'"));
  f.close();
  for (const char* side : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    const fs::path src = base_dir_ / side, dst = out.parent_path() / side;
    if (fs::exists(src) && !fs::equivalent(src, dst, ec)) fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  }
  return absl::OkStatus();
}

absl::Status Quantizer::Evaluate() {
  std::vector<int32_t> ids;
  if (!o_.eval_ids.empty()) {
    auto text = ReadFile(o_.eval_ids, "evaluation ids file");
    if (!text.ok()) return text.status();
    auto seqs = ParseIds(*text, o_.eval_ids);
    if (!seqs.ok()) return seqs.status();
    for (const auto& s : *seqs) ids.insert(ids.end(), s.begin(), s.end());
  } else {
    auto text = ReadFile(o_.eval_text, "evaluation file");
    if (!text.ok()) return text.status();
    if (!tokenizer_) return absl::NotFoundError("--eval needs a tokenizer (tokenizer.json beside the model or --tokenizer)");
    auto encoded = tokenizer_->TryEncode(*text);
    if (!encoded.ok()) return encoded.status();
    ids = *std::move(encoded);
  }
  if (ids.empty()) return absl::InvalidArgumentError("the evaluation data is empty");
  if (static_cast<int64_t>(ids.size()) > o_.calib_tokens) ids.resize(static_cast<size_t>(o_.calib_tokens));
  const SessionOptions& so = o_.session;
  double kl_sum = 0, kl_max = 0, uniform_sum = 0;  // uniform: KL(float || uniform), for scale
  int64_t agree = 0, positions = 0;
  auto fsession = Session::Load(model_path_, so);
  if (!fsession.ok()) return fsession.status();
  auto qsession = Session::Load(out_path_, so);
  if (!qsession.ok()) return absl::Status(qsession.status().code(), absl::StrCat("loading the quantised model: ", qsession.status().message()));
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(o_.calib_seq)) {
    std::vector<int32_t> chunk(ids.begin() + static_cast<long>(start), ids.begin() + static_cast<long>(std::min(ids.size(), start + static_cast<size_t>(o_.calib_seq))));
    auto fl = Logits(**fsession, chunk);
    if (!fl.ok()) return fl.status();
    auto ql = Logits(**qsession, chunk);
    if (!ql.ok()) return ql.status();
    const int64_t S = fl->dim(1), V = fl->dim(2);
    for (int64_t s = 0; s < S; ++s) {
      const float* p = fl->data<float>() + s * V;
      const float* q = ql->data<float>() + s * V;
      // KL(float || quantised) over softmax, in double.
      double pm = p[0], qm = q[0];
      int64_t pa = 0, qa = 0;
      for (int64_t v = 1; v < V; ++v) {
        if (p[v] > pm) pm = p[v], pa = v;
        if (q[v] > qm) qm = q[v], qa = v;
      }
      double ps = 0, qs = 0;
      for (int64_t v = 0; v < V; ++v) ps += std::exp(p[v] - pm), qs += std::exp(q[v] - qm);
      const double lps = std::log(ps), lqs = std::log(qs);
      double kl = 0, neg_entropy = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double lp = p[v] - pm - lps, lq = q[v] - qm - lqs;
        kl += std::exp(lp) * (lp - lq);
        neg_entropy += std::exp(lp) * lp;
      }
      kl_sum += kl;
      uniform_sum += neg_entropy + std::log(static_cast<double>(V));
      kl_max = std::max(kl_max, kl);
      agree += pa == qa;
      ++positions;
    }
  }
  const double n = static_cast<double>(positions);
  report_.eval = QuantizationEval{positions, kl_sum / n, kl_max, static_cast<double>(agree) / n, uniform_sum / n};
  return absl::OkStatus();
}

absl::Status Quantizer::Run() {
  if (auto s = Load(); !s.ok()) return s;
  if (auto s = CheckOutput(); !s.ok()) return s;
  if (auto s = FindGroups(); !s.ok()) return s;
  if (auto s = Calibrate(); !s.ok()) return s;
  report_.activation_ranges = static_cast<int64_t>(qparams_.size());
  if (auto s = Rewrite(); !s.ok()) return s;
  if (auto s = Write(); !s.ok()) return s;
  report_.quantized_matmuls = static_cast<int>(groups_.size());
  report_.data = (fs::absolute(out_path_).parent_path() / (fs::path(out_path_).filename().string() + ".data")).string();
  report_.calibration_runs = calib_runs_;
  report_.calibration_tokens = calib_tokens_;
  report_.calibration_source = calib_desc_;
  for (const auto& [why, c] : skipped_count_) report_.left_float.emplace_back(why, c);
  // The output is written; an evaluation that fails does not undo it.
  if (!o_.eval_text.empty() || !o_.eval_ids.empty()) report_.eval_status = Evaluate();
  return absl::OkStatus();
}

}  // namespace
}  // namespace convert

absl::StatusOr<QuantizeA8W8Report> QuantizeA8W8(const std::string& model, const std::string& output,
                                                const QuantizeA8W8Options& options) {
  convert::Quantizer q(model, output, options);
  if (auto s = q.Run(); !s.ok()) return s;
  return std::move(q.report());
}

}  // namespace oneinfer
