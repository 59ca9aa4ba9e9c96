// oneinfer quantize: a float ONNX graph -> a static A8W8 QDQ graph.
//
// Every MatMul whose second input is a constant 2-D float weight [K, N] becomes
//   x -> QuantizeLinear -> DequantizeLinear -> MatMul [-> QuantizeLinear -> DequantizeLinear]
//   w_int8 (initializer) -> DequantizeLinear /
// with the activation ranges measured by running the float graph on calibration data.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/onnx_loader.h"
#include "oneinfer/session.h"
#include "oneinfer/tokenizer.h"
#include "tools/cli.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHelp =
    "usage: oneinfer quantize MODEL.onnx -o OUT.onnx --a8w8 [options]\n"
    "\n"
    "Static A8W8: each MatMul with a constant 2-D float weight [K, N] gets an int8 weight\n"
    "(symmetric, scale amax/127) behind a DequantizeLinear, and its activation a\n"
    "QuantizeLinear -> DequantizeLinear pair whose range comes from running the float graph on\n"
    "calibration data. Weights go to OUT.onnx.data (the int8 weights keep their names);\n"
    "tokenizer.json and the other side files beside MODEL are copied beside OUT.\n"
    "\n"
    "  --per-channel | --per-tensor   weight scales per output column (axis 1, default) or one\n"
    "  --calib FILE                   calibration text, tokenised with the model's tokenizer\n"
    "  --calib-ids FILE               calibration token ids (one sequence per line, ',' or ' ')\n"
    "  --calib-inputs DIR             calibration feeds for any graph: DIR/input_*.pb, or one\n"
    "                                 such set per subfolder of DIR (as `oneinfer exec` reads)\n"
    "                                 (no calibration option: a built-in English sample, tokenised)\n"
    "  --tokenizer PATH               tokenizer.json (default: beside the model)\n"
    "  --calib-seq N                  tokens per calibration run (default 128)\n"
    "  --calib-tokens N               at most this many calibration (and evaluation) tokens (default 2048)\n"
    "  --method minmax|percentile     activation range: the observed min..max (default), or the\n"
    "                                 range holding the central --percentile % of the values\n"
    "                                 (a graph output such as the logits always keeps min..max)\n"
    "  --percentile P                 (default 99.99) from a 2048-bin histogram per tensor\n"
    "  --activation-type uint8|int8   uint8 asymmetric (default, ONNX Runtime's form) or int8\n"
    "                                 symmetric (AMD Quark's form)\n"
    "  --matmul-only                  quantise the MatMul inputs only; the MatMul output stays\n"
    "                                 float (default: it also gets QuantizeLinear -> DequantizeLinear)\n"
    "  --domain ai.onnx|com.microsoft the domain of the Q/DQ nodes (default ai.onnx)\n"
    "  --eval FILE | --eval-ids FILE  afterwards, run float and QDQ graphs on this text / these ids\n"
    "                                 and print the mean KL (nats) and top-1 agreement over positions\n"
    "  --threads N                    threads for the calibration runs (default: all cores)\n";

// A built-in calibration sample (plain English prose, code and numbers), used when no
// calibration data is given. Written for this tool.
constexpr const char* kBuiltinCalibration =
    "The harbour was quiet in the early morning, and the fishing boats rocked gently against "
    "the pier while gulls circled overhead. A woman in a yellow coat walked along the water, "
    "counting the masts as she went: twelve, thirteen, fourteen. She had lived in the town for "
    "thirty-one years and still found something new on every walk.\n\n"
    "To compute the average of a list in Python, add the values and divide by their count:\n"
    "def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n\n"
    "Question: What is 17 multiplied by 23? Answer: 17 x 23 = 391, because 17 x 20 = 340 and "
    "17 x 3 = 51.\n\n"
    "The committee met on Tuesday, 4 March, to review the budget for the coming year. Energy "
    "costs rose by 8.5 percent, while spending on maintenance fell slightly. Members agreed to "
    "postpone the decision about the new library until the survey results arrive in May.\n\n"
    "Photosynthesis converts light energy into chemical energy: plants take in carbon dioxide "
    "and water and, using sunlight, produce glucose and oxygen. The process happens mostly in "
    "the chloroplasts of leaf cells, which contain the green pigment chlorophyll.\n\n"
    "User: Can you recommend a good book about the history of mathematics?\n"
    "Assistant: Certainly. A readable start is a survey that follows ideas from Babylonian "
    "tablets to modern computing, explaining each step with worked examples.\n";

enum class Method { kMinMax, kPercentile };

struct Options {
  bool per_channel = true;
  std::string calib_text, calib_ids, calib_inputs, tokenizer, eval_text, eval_ids;
  int64_t seq = 128, max_tokens = 2048;
  Method method = Method::kMinMax;
  double percentile = 99.99;
  bool act_uint8 = true;
  bool matmul_only = false;
  std::string domain;  // "" = ai.onnx
  int threads = 0;
};

// One quantised MatMul: node index, activation, weight, output.
struct Group {
  int node = 0;
  std::string act, weight, out;
};

// Observed values of one activation tensor.
struct Stats {
  float lo = INFINITY, hi = -INFINITY;
  std::vector<uint64_t> hist;  // percentile pass: over [lo, hi] (asymmetric) or [0, max|x|]
  uint64_t count = 0;
};

constexpr int kBins = 2048;

struct QParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return absl::DataLossError(absl::StrCat("cannot read ", what, " '", path, "'"));
  return ss.str();
}

// Lines of ids separated by ',' or whitespace; each line is one sequence.
absl::StatusOr<std::vector<std::vector<int32_t>>> ParseIds(const std::string& text, const std::string& path) {
  std::vector<std::vector<int32_t>> seqs;
  std::istringstream lines(text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    for (char& c : line) if (c == ',') c = ' ';
    std::istringstream is(line);
    std::string w;
    std::vector<int32_t> ids;
    while (is >> w) {
      char* end = nullptr;
      const long long v = std::strtoll(w.c_str(), &end, 10);
      if (*end != '\0' || v < 0 || v > INT32_MAX) {
        return absl::InvalidArgumentError(absl::StrCat("'", path, "' line ", line_no, ": '", w, "' is not a token id"));
      }
      ids.push_back(static_cast<int32_t>(v));
    }
    if (!ids.empty()) seqs.push_back(std::move(ids));
  }
  if (seqs.empty()) return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds no token ids"));
  return seqs;
}

// Splits sequences into runs of at most seq tokens, stopping after max_tokens in all.
std::vector<std::vector<int32_t>> Chunk(const std::vector<std::vector<int32_t>>& seqs, int64_t seq, int64_t max_tokens) {
  std::vector<std::vector<int32_t>> out;
  int64_t total = 0;
  for (const auto& s : seqs) {
    for (size_t i = 0; i < s.size() && total < max_tokens; i += static_cast<size_t>(seq)) {
      const size_t n = std::min<size_t>({static_cast<size_t>(seq), s.size() - i, static_cast<size_t>(max_tokens - total)});
      out.emplace_back(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(i + n));
      total += static_cast<int64_t>(n);
    }
  }
  return out;
}

// Feeds for a causal-LM graph: input_ids [1, S] and, for the cached form, an empty past_kv.
absl::StatusOr<std::vector<Feed>> CausalFeeds(const Session& s, const std::vector<int32_t>& ids) {
  std::vector<Feed> feeds;
  for (const IOInfo& in : s.inputs()) {
    if (in.name == "input_ids") {
      std::vector<int64_t> v(ids.begin(), ids.end());
      feeds.emplace_back(in.name, Tensor::FromVector(DType::kInt64, {1, static_cast<int64_t>(ids.size())}, v));
    } else if (in.name == "past_kv") {
      if (!in.has_shape || in.shape.size() != 5) return absl::InvalidArgumentError("input 'past_kv' must be declared [2L, 1, KVH, P, D]");
      Shape sh = in.shape;
      sh[3] = 0;
      for (int64_t d : sh) {
        if (d < 0) return absl::InvalidArgumentError("input 'past_kv' needs fixed dims other than the past length");
      }
      feeds.emplace_back(in.name, Tensor::Empty(DType::kFloat32, sh));
    } else if (!in.has_default) {
      return absl::InvalidArgumentError(absl::StrCat("the model has an input '", in.name,
                                                     "' besides input_ids/past_kv; give --calib-inputs"));
    }
  }
  return feeds;
}

// Feeds read from DIR/input_*.pb sets (as `oneinfer exec` takes them).
absl::StatusOr<std::vector<std::vector<Feed>>> DirFeeds(const Session& s, const std::string& dir) {
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat("calibration folder '", dir, "' does not exist"));
  std::vector<fs::path> sets;
  if (fs::exists(fs::path(dir) / "input_0.pb")) sets.push_back(dir);
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && fs::exists(e.path() / "input_0.pb")) subs.push_back(e.path());
  }
  std::sort(subs.begin(), subs.end());
  sets.insert(sets.end(), subs.begin(), subs.end());
  if (sets.empty()) return absl::NotFoundError(absl::StrCat("calibration folder '", dir, "' has no input_0.pb"));
  std::vector<std::vector<Feed>> all;
  for (const fs::path& set : sets) {
    std::vector<Feed> feeds;
    for (size_t i = 0;; ++i) {
      const fs::path p = set / absl::StrCat("input_", i, ".pb");
      if (!fs::exists(p)) break;
      auto bytes = ReadFile(p.string(), "calibration input");
      if (!bytes.ok()) return bytes.status();
      onnx::TensorProto tp;
      if (!tp.ParseFromString(*bytes)) return absl::InvalidArgumentError(absl::StrCat(p.string(), " is not a serialized TensorProto"));
      auto t = TensorFromProto(tp, nullptr);
      if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(p.string(), ": ", t.status().message()));
      std::string name = tp.name();
      if (name.empty()) {
        if (i >= s.inputs().size()) return absl::InvalidArgumentError(absl::StrCat(p.string(), " has no name and the model has fewer inputs"));
        name = s.inputs()[i].name;
      }
      feeds.emplace_back(name, *t);
    }
    all.push_back(std::move(feeds));
  }
  return all;
}

// Runs `feeds` and hands each asked tensor to `visit`.
using Visit = std::function<absl::Status(const std::string&, const Tensor&)>;
absl::Status RunAndVisit(const Session& s, const std::vector<Feed>& feeds, const std::vector<std::string>& names,
                         const Visit& visit) {
  auto outs = s.Run(feeds, names);
  if (!outs.ok()) return absl::Status(outs.status().code(), absl::StrCat("calibration run: ", outs.status().message()));
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor& t = (*outs)[i];
    if (t.dtype() != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", names[i], "' is ", DTypeName(t.dtype()), ", not float32"));
    }
    if (auto st = visit(names[i], t); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// The quantisation parameters of an activation range (always including zero, as Q/DQ need).
QParams ActivationParams(float lo, float hi, bool as_uint8) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  QParams q;
  if (as_uint8) {
    q.scale = (hi - lo) / 255.0f;
    if (!(q.scale > 0) || !std::isfinite(q.scale)) return QParams{1.0f, 0};  // an all-zero tensor
    q.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / q.scale), 0.0f, 255.0f));
  } else {
    q.scale = std::max(-lo, hi) / 127.0f;
    if (!(q.scale > 0) || !std::isfinite(q.scale)) return QParams{1.0f, 0};
  }
  return q;
}

// The value below which `frac` of the histogram's mass lies (linear inside a bin).
float HistQuantile(const std::vector<uint64_t>& h, float lo, float hi, double frac) {
  uint64_t total = 0;
  for (uint64_t c : h) total += c;
  const double want = frac * static_cast<double>(total);
  double acc = 0;
  const double width = (static_cast<double>(hi) - lo) / static_cast<double>(h.size());
  for (size_t b = 0; b < h.size(); ++b) {
    if (acc + static_cast<double>(h[b]) >= want && h[b] > 0) {
      const double inside = (want - acc) / static_cast<double>(h[b]);
      return static_cast<float>(lo + width * (static_cast<double>(b) + std::clamp(inside, 0.0, 1.0)));
    }
    acc += static_cast<double>(h[b]);
  }
  return hi;
}

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

// Logits [1, S, V] of a causal-LM session for `ids`.
absl::StatusOr<Tensor> Logits(const Session& s, const std::vector<int32_t>& ids) {
  auto feeds = CausalFeeds(s, ids);
  if (!feeds.ok()) return feeds.status();
  auto outs = s.Run(*feeds, {"logits"});
  if (!outs.ok()) return outs.status();
  return (*outs)[0];
}

class Quantizer {
 public:
  Quantizer(std::string model_path, std::string out_path, Options o)
      : model_path_(std::move(model_path)), out_path_(std::move(out_path)), o_(std::move(o)) {}
  absl::Status Run();

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
  Options o_;
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
  SessionOptions so;
  so.num_threads = o_.threads;
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
      id_seqs.push_back(tokenizer_->Encode(text));
      if (id_seqs[0].empty()) return absl::InvalidArgumentError(absl::StrCat("calibration text '", o_.calib_text, "' is empty"));
    }
    for (auto& seq : Chunk(id_seqs, o_.seq, o_.max_tokens)) {
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
  if (o_.method == Method::kPercentile) {
    for (auto& [name, st] : stats_) st.hist.assign(kBins, 0);
    for (const auto& feeds : calib_feeds_) {
      auto r = RunAndVisit(s, feeds, calib_names_, [&](const std::string& name, const Tensor& t) {
        Stats& st = stats_[name];
        const float* p = t.data<float>();
        const int64_t n = t.num_elements();
        const float lo = o_.act_uint8 ? st.lo : 0.0f;
        const float hi = o_.act_uint8 ? st.hi : std::max(-st.lo, st.hi);
        const double k = hi > lo ? kBins / (static_cast<double>(hi) - lo) : 0.0;
        for (int64_t i = 0; i < n; ++i) {
          const float v = o_.act_uint8 ? p[i] : std::fabs(p[i]);
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
    if (o_.method == Method::kPercentile && !outputs.count(name)) {
      const double tail = (100.0 - o_.percentile) / 100.0;
      if (o_.act_uint8) {
        lo = HistQuantile(st.hist, st.lo, st.hi, tail / 2);
        hi = HistQuantile(st.hist, st.lo, st.hi, 1.0 - tail / 2);
      } else {
        hi = HistQuantile(st.hist, 0.0f, std::max(-st.lo, st.hi), 1.0 - tail);
        lo = -hi;
      }
    }
    qparams_[name] = ActivationParams(lo, hi, o_.act_uint8);
  }
  return absl::OkStatus();
}

absl::Status Quantizer::Rewrite() {
  onnx::GraphProto* g = model_.mutable_graph();
  const int act_elem = o_.act_uint8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
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
    std::vector<float> scale(o_.per_channel ? static_cast<size_t>(N) : 1, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t n = 0; n < N; ++n) {
        const float a = std::fabs(src[k * N + n]);
        if (!std::isfinite(a)) return absl::InvalidArgumentError(absl::StrCat("weight '", gr.weight, "' has a non-finite value"));
        float& m = scale[o_.per_channel ? static_cast<size_t>(n) : 0];
        m = std::max(m, a);
      }
    }
    for (float& s : scale) s = s > 0 ? s / 127.0f : 1.0f;  // an all-zero column keeps a valid scale
    onnx::TensorProto q;
    const bool keep_name = !shared_weights.count(gr.weight);
    const std::string qname = keep_name ? gr.weight : Unique(gr.weight + "_quantized");
    if (keep_name) replaced.insert(gr.weight);
    q.set_name(qname);
    q.set_data_type(onnx::TensorProto::INT8);
    q.add_dims(K);
    q.add_dims(N);
    std::string raw(static_cast<size_t>(K * N), '\0');
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t n = 0; n < N; ++n) {
        const float s = scale[o_.per_channel ? static_cast<size_t>(n) : 0];
        const float v = std::clamp(std::nearbyint(src[k * N + n] / s), -127.0f, 127.0f);
        raw[static_cast<size_t>(k * N + n)] = static_cast<char>(static_cast<int8_t>(v));
      }
    }
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
                               ", activations ", o_.act_uint8 ? "uint8 asymmetric" : "int8 symmetric", ", ",
                               o_.method == Method::kMinMax ? "minmax" : absl::StrFormat("percentile %g", o_.percentile),
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
    ids = tokenizer_->Encode(*text);
  }
  if (ids.empty()) return absl::InvalidArgumentError("the evaluation data is empty");
  if (static_cast<int64_t>(ids.size()) > o_.max_tokens) ids.resize(static_cast<size_t>(o_.max_tokens));
  SessionOptions so;
  so.num_threads = o_.threads;
  double kl_sum = 0, kl_max = 0, uniform_sum = 0;  // uniform: KL(float || uniform), for scale
  int64_t agree = 0, positions = 0;
  auto fsession = Session::Load(model_path_, so);
  if (!fsession.ok()) return fsession.status();
  auto qsession = Session::Load(out_path_, so);
  if (!qsession.ok()) return absl::Status(qsession.status().code(), absl::StrCat("loading the quantised model: ", qsession.status().message()));
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(o_.seq)) {
    std::vector<int32_t> chunk(ids.begin() + static_cast<long>(start), ids.begin() + static_cast<long>(std::min(ids.size(), start + static_cast<size_t>(o_.seq))));
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
  std::cout << absl::StrFormat("eval: %d positions, mean KL %.6f nats, max KL %.6f, top-1 agreement %.1f%% "
                               "(for scale: the float model's mean KL to a uniform distribution is %.6f)\n",
                               positions, kl_sum / n, kl_max, 100.0 * static_cast<double>(agree) / n, uniform_sum / n);
  return absl::OkStatus();
}

absl::Status Quantizer::Run() {
  if (auto s = Load(); !s.ok()) return s;
  if (auto s = CheckOutput(); !s.ok()) return s;
  if (auto s = FindGroups(); !s.ok()) return s;
  if (auto s = Calibrate(); !s.ok()) return s;
  const size_t tensors = qparams_.size();
  if (auto s = Rewrite(); !s.ok()) return s;
  if (auto s = Write(); !s.ok()) return s;
  std::cout << "quantised " << groups_.size() << " MatMuls (" << (o_.per_channel ? "per-channel" : "per-tensor")
            << " int8 weights, " << (o_.act_uint8 ? "uint8" : "int8") << " activations, "
            << (o_.method == Method::kMinMax ? "minmax" : absl::StrFormat("percentile %g", o_.percentile)) << ", "
            << tensors << " activation ranges from " << calib_runs_ << (calib_runs_ == 1 ? " run" : " runs");
  if (calib_tokens_ > 0) std::cout << " / " << calib_tokens_ << " tokens";
  std::cout << " of " << calib_desc_ << ")";
  for (const auto& [why, c] : skipped_count_) std::cout << "; left float: " << c << " (" << why << ")";
  std::cout << "\nwrote " << out_path_ << " (+ " << fs::path(out_path_).filename().string() << ".data)\n";
  if (!o_.eval_text.empty() || !o_.eval_ids.empty()) return Evaluate();
  return absl::OkStatus();
}

bool ParseCount(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return *end == '\0' && *v > 0;
}

}  // namespace

int CmdQuantize(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp;
    return 0;
  }
  Options o;
  std::string out, method, act, domain, pct, seq, tokens, threads;
  args.Take("-o", &out, "--output");
  const bool a8w8 = args.TakeFlag("--a8w8");
  const bool per_channel = args.TakeFlag("--per-channel");
  const bool per_tensor = args.TakeFlag("--per-tensor");
  args.Take("--calib", &o.calib_text);
  args.Take("--calib-ids", &o.calib_ids);
  args.Take("--calib-inputs", &o.calib_inputs);
  args.Take("--tokenizer", &o.tokenizer);
  args.Take("--calib-seq", &seq);
  args.Take("--calib-tokens", &tokens);
  args.Take("--method", &method);
  args.Take("--percentile", &pct);
  args.Take("--activation-type", &act);
  args.Take("--domain", &domain);
  args.Take("--eval", &o.eval_text);
  args.Take("--eval-ids", &o.eval_ids);
  args.Take("--threads", &threads);
  o.matmul_only = args.TakeFlag("--matmul-only");
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("quantize needs exactly one MODEL.onnx (see oneinfer quantize --help)");
  if (out.empty()) return Fail("quantize needs -o OUT.onnx");
  if (!a8w8) return Fail("quantize needs a scheme: --a8w8 (the only one so far)");
  if (per_channel && per_tensor) return Fail("--per-channel and --per-tensor exclude each other");
  o.per_channel = !per_tensor;
  if (method.empty() || method == "minmax") o.method = Method::kMinMax;
  else if (method == "percentile") o.method = Method::kPercentile;
  else return Fail(absl::StrCat("--method '", method, "' must be minmax or percentile"));
  if (!pct.empty()) {
    char* end = nullptr;
    o.percentile = std::strtod(pct.c_str(), &end);
    if (*end != '\0' || !(o.percentile > 50.0 && o.percentile <= 100.0)) return Fail(absl::StrCat("--percentile '", pct, "' must be in (50, 100]"));
    if (o.method != Method::kPercentile) return Fail("--percentile needs --method percentile");
  }
  if (act.empty() || act == "uint8") o.act_uint8 = true;
  else if (act == "int8") o.act_uint8 = false;
  else return Fail(absl::StrCat("--activation-type '", act, "' must be uint8 or int8"));
  if (domain.empty() || domain == "ai.onnx") o.domain = "";
  else if (domain == "com.microsoft") o.domain = domain;
  else return Fail(absl::StrCat("--domain '", domain, "' must be ai.onnx or com.microsoft"));
  int64_t v = 0;
  if (!seq.empty()) {
    if (!ParseCount(seq, &v)) return Fail(absl::StrCat("--calib-seq '", seq, "' is not a positive count"));
    o.seq = v;
  }
  if (!tokens.empty()) {
    if (!ParseCount(tokens, &v)) return Fail(absl::StrCat("--calib-tokens '", tokens, "' is not a positive count"));
    o.max_tokens = v;
  }
  if (!threads.empty()) {
    if (!ParseCount(threads, &v)) return Fail(absl::StrCat("--threads '", threads, "' is not a positive count"));
    o.threads = static_cast<int>(v);
  }
  const int sources = !o.calib_text.empty() + !o.calib_ids.empty() + !o.calib_inputs.empty();
  if (sources > 1) return Fail("give at most one of --calib, --calib-ids and --calib-inputs");
  if (!o.eval_text.empty() && !o.eval_ids.empty()) return Fail("give at most one of --eval and --eval-ids");
  Quantizer q(pos[0], out, o);
  if (auto s = q.Run(); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace oneinfer::cli
