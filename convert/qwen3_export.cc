// ExportQwen3 (oneinfer/convert.h): a Hugging Face Qwen3 or Llama-family (llama, qwen2, mistral)
// checkpoint -> a plain opset-21 ONNX graph. The families differ in what they add to one decoder
// layer: Qwen3 normalises q and k per head, Qwen2 (and Llama with attention_bias) biases the
// q/k/v projections, Llama 3 rescales the rotary frequencies (rope_scaling "llama3").
//
// Weights go to an external data file beside the graph. Projection weights are stored
// transposed ([in, out], so each MatMul reads [K, N]) under the checkpoint's own names.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "convert/checkpoint.h"
#include "convert/q4nx_writer.h"
#include "oneinfer/convert.h"
#include "quant/weight_quant.h"

namespace oneinfer {
namespace convert {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Qwen3Config {
  std::string type;  // model_type: qwen3, qwen2, llama or mistral
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double eps = 1e-6, rope_theta = 1e6;
  bool tied = true;
  bool qk_norm = false;  // Qwen3's per-head RMSNorm of q and k
  bool qkv_bias = false;  // biases on the q/k/v projections (Qwen2; Llama's attention_bias)
  int64_t max_positions = 40960;
  std::vector<double> inv_freq;  // the rotary frequencies, after any rope_scaling
  json raw;
};

// Llama 3's rope_scaling (rope_type "llama3"): wavelengths longer than
// original_max / low_freq_factor are divided by factor, shorter than original_max /
// high_freq_factor kept, and those between blended linearly in original_max / wavelength.
absl::Status ScaleLlama3(const json& rs, std::vector<double>* inv_freq) {
  const double factor = rs.at("factor"), low = rs.at("low_freq_factor"), high = rs.at("high_freq_factor");
  const double original = rs.at("original_max_position_embeddings");
  if (!(factor > 0 && low > 0 && high > low && original > 0)) {
    return absl::InvalidArgumentError("rope_scaling llama3 needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  }
  const double low_wavelen = original / low, high_wavelen = original / high;
  for (double& f : *inv_freq) {
    const double wavelen = 2 * M_PI / f;
    if (wavelen > low_wavelen) {
      f /= factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (original / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Qwen3Config> ReadConfig(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path.string(), "'"));
  Qwen3Config c;
  try {
    c.raw = json::parse(f);
    const json& j = c.raw;
    c.type = j.value("model_type", "");
    if (c.type != "qwen3" && c.type != "qwen2" && c.type != "llama" && c.type != "mistral") {
      return absl::InvalidArgumentError(
          absl::StrCat("config model_type is '", c.type, "', expected qwen3, qwen2, llama or mistral"));
    }
    c.vocab = j.at("vocab_size");
    c.hidden = j.at("hidden_size");
    c.intermediate = j.at("intermediate_size");
    c.layers = j.at("num_hidden_layers");
    c.heads = j.at("num_attention_heads");
    c.kv_heads = j.value("num_key_value_heads", c.heads);
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<int64_t>()
                                                                    : (c.heads > 0 ? c.hidden / c.heads : 0);
    c.eps = j.value("rms_norm_eps", 1e-6);
    c.rope_theta = j.value("rope_theta", c.type == "qwen3" ? 1e6 : 10000.0);
    // transformers' defaults: Qwen3 files say it; the others default to an untied head.
    c.tied = j.value("tie_word_embeddings", c.type == "qwen3");
    c.max_positions = j.value("max_position_embeddings", int64_t{40960});
    c.qk_norm = c.type == "qwen3";
    c.qkv_bias = c.type == "qwen2" || (c.type == "llama" && j.value("attention_bias", false));
    if (c.type == "qwen3" && j.value("attention_bias", false)) {
      return absl::UnimplementedError("config has attention_bias; Qwen3 has none");
    }
    if (j.value("mlp_bias", false)) return absl::UnimplementedError("config has mlp_bias (biases on the MLP projections)");
    if (j.value("hidden_act", "silu") != "silu") {
      return absl::UnimplementedError(absl::StrCat("config hidden_act is '", j.value("hidden_act", ""), "'; only silu is supported"));
    }
    // Mistral's sliding window: attention here is full, so the context stops at the window.
    if (j.contains("sliding_window") && j["sliding_window"].is_number_integer() && j.value("use_sliding_window", true)) {
      c.max_positions = std::min<int64_t>(c.max_positions, j["sliding_window"].get<int64_t>());
    }
    if (c.head_dim > 0 && c.head_dim % 2 == 0) {
      for (int64_t i = 0; i < c.head_dim / 2; ++i) c.inv_freq.push_back(1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_dim));
    }
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
      const json& rs = j["rope_scaling"];
      const std::string kind = rs.value("rope_type", rs.value("type", ""));
      if (kind == "llama3") {
        if (auto st = ScaleLlama3(rs, &c.inv_freq); !st.ok()) return st;
      } else if (kind != "default") {
        return absl::UnimplementedError(absl::StrCat("config rope_scaling type '", kind,
                                                     "' is not supported (plain rotary and llama3 are)"));
      }
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("'", path.string(), "': ", e.what()));
  }
  if (c.vocab <= 0 || c.hidden <= 0 || c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0 || c.head_dim <= 0 ||
      c.heads % c.kv_heads != 0 || c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path.string(), "' has inconsistent sizes"));
  }
  return c;
}

// Appends nodes and initializers to a GraphProto with generated names.
class Builder {
 public:
  Builder(onnx::GraphProto* g, std::ofstream* data, std::string data_name)
      : g_(g), data_(data), data_name_(std::move(data_name)) {}

  std::string Op(const std::string& op, const std::vector<std::string>& ins, const std::string& hint,
                 std::vector<onnx::AttributeProto> attrs = {}) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    const std::string out = absl::StrCat(hint, "_", counter_++);
    n->set_name(out);
    for (const auto& i : ins) n->add_input(i);
    n->add_output(out);
    for (auto& a : attrs) *n->add_attribute() = std::move(a);
    return out;
  }
  std::string I64(const std::vector<int64_t>& v, const std::string& hint, bool scalar = false) {
    auto* t = g_->add_initializer();
    t->set_name(absl::StrCat(hint, "_c", counter_++));
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }
  std::string F32(const std::vector<float>& v, const std::vector<int64_t>& dims, const std::string& hint) {
    auto* t = g_->add_initializer();
    t->set_name(absl::StrCat(hint, "_c", counter_++));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return t->name();
  }
  // A weight in the external data file, 64-byte aligned.
  std::string Weight(const std::string& name, const std::vector<float>& v, const std::vector<int64_t>& dims) {
    return Raw(name, onnx::TensorProto::FLOAT, v.data(), v.size() * sizeof(float), dims);
  }
  // Any element type, its bytes as ONNX stores them (int4: two per byte, low nibble first).
  std::string Raw(const std::string& name, int type, const void* bytes_in, size_t bytes,
                  const std::vector<int64_t>& dims) {
    while (offset_ % 64) {
      data_->put('\0');
      ++offset_;
    }
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, const std::string& val) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(val);
    };
    kv("location", data_name_);
    kv("offset", std::to_string(offset_));
    kv("length", std::to_string(bytes));
    data_->write(static_cast<const char*>(bytes_in), static_cast<std::streamsize>(bytes));
    offset_ += bytes;
    return name;
  }

 private:
  onnx::GraphProto* g_;
  std::ofstream* data_;
  std::string data_name_;
  size_t offset_ = 0;
  int counter_ = 0;
};

onnx::AttributeProto AttrI(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}
onnx::AttributeProto AttrInts(const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

// [out, in] row-major -> [in, out].
std::vector<float> Transposed(const std::vector<float>& w, int64_t out, int64_t in) {
  std::vector<float> t(w.size());
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) t[static_cast<size_t>(i * out + o)] = w[static_cast<size_t>(o * in + i)];
  return t;
}

using WeightFormat = Qwen3Weights;
// ONNX's int4 element type (IR 10), newer than the system onnx.proto's enum.
constexpr int kOnnxInt4 = 22;

// w: [N, K] -> int4 [K, N] packed two per byte, blocks of 32 along K per column with scale
// d = v / -8 where v is the block's value of largest magnitude (so v maps to -8, the full
// int4 range is used, as ggml's q4_0), rounded to float16, q = clamp(round(w / d), -8, 7);
// scales [K/32, N].
void QuantizeInt4Blocked(const std::vector<float>& w, int64_t N, int64_t K, std::vector<uint8_t>* packed,
                         std::vector<float>* scales) {
  const int64_t kb = K / 32;
  packed->assign(static_cast<size_t>((K * N + 1) / 2), 0);
  scales->assign(static_cast<size_t>(kb * N), 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < kb; ++b) {
      float v = 0.0f;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k)
        if (std::fabs(w[n * K + k]) > std::fabs(v)) v = w[n * K + k];
      // d rounded to a float16 value (when that is a normal one) lets the 4-bit kernel keep
      // its scales in 16 bits; the codes are then chosen against the rounded d.
      float d = v / -8.0f;
      const float d16 = F16ToF32(F32ToF16(d));
      if (std::fabs(d16) >= 6.103515625e-05f && std::isfinite(d16)) d = d16;
      (*scales)[b * N + n] = d;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
        const int q = d == 0.0f ? 0 : static_cast<int>(std::clamp(std::nearbyint(w[n * K + k] / d), -8.0f, 7.0f));
        const int64_t i = k * N + n;
        (*packed)[i / 2] |= static_cast<uint8_t>((q & 0xF) << ((i % 2) * 4));
      }
    }
}

absl::Status Export(const fs::path& ckpt_dir, const fs::path& out_path, bool cached, WeightFormat format,
                    Q4NXWeightSink* q4nx) {
  auto cfg_or = ReadConfig(ckpt_dir / "config.json");
  if (!cfg_or.ok()) return cfg_or.status();
  const Qwen3Config& c = *cfg_or;
  auto ck_or = Checkpoint::Open(ckpt_dir.string());
  if (!ck_or.ok()) return ck_or.status();
  const Checkpoint& ck = **ck_or;

  onnx::ModelProto model;
  model.set_ir_version(10);
  model.set_producer_name("oneinfer export-qwen3");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(21);
  auto meta = [&](const std::string& k, const std::string& v) {
    auto* p = model.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  };
  meta("oneinfer.architecture", c.type);
  meta("oneinfer.max_positions", std::to_string(c.max_positions));
  meta("oneinfer.cached", cached ? "1" : "0");
  auto* g = model.mutable_graph();
  g->set_name(cached ? c.type + "_cached" : c.type);

  const std::string data_name = out_path.filename().string() + ".data";
  fs::create_directories(fs::absolute(out_path).parent_path());
  std::ofstream data(out_path.parent_path().empty() ? fs::path(data_name) : out_path.parent_path() / data_name,
                     std::ios::binary | std::ios::trunc);
  if (!data) return absl::InternalError(absl::StrCat("cannot write '", data_name, "'"));
  Builder b(g, &data, data_name);

  const int64_t H = c.hidden, D = c.head_dim, NH = c.heads, KVH = c.kv_heads, G = NH / KVH, I = c.intermediate,
                V = c.vocab, L = c.layers;
  auto add_input = [&](const std::string& name, int elem, const std::vector<std::string>& dims) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (const std::string& d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  };
  add_input("input_ids", onnx::TensorProto::INT64, {"1", "sequence"});
  if (cached) {
    add_input("past_kv", onnx::TensorProto::FLOAT,
              {std::to_string(2 * L), "1", std::to_string(KVH), "past_sequence", std::to_string(D)});
  }

  // Loads a checkpoint tensor; projections are transposed to [in, out].
  absl::Status status;
  // A projection [N, K] = [out, in] as the MatMul B operand [K, N] in the chosen format:
  // float, or integer codes + scales behind a DequantizeLinear (weight-only quantisation).
  auto projection = [&](const std::string& name, const std::vector<float>& w, int64_t N, int64_t K) -> std::string {
    if (q4nx != nullptr) {  // q4_1 in the Q4NX file; the graph reads a named input
      auto in = q4nx->Add(g, name, w, N, K);
      if (!in.ok()) status = in.status();
      return name;
    }
    if (format == WeightFormat::kFloat || format == WeightFormat::kQ4NX) return b.Weight(name, Transposed(w, N, K), {K, N});
    std::vector<float> scales;
    std::string codes;
    onnx::AttributeProto block;
    int64_t axis = 1;
    if (format == WeightFormat::kInt8) {
      // One symmetric scale per output column (quant/weight_quant.h), codes [K, N].
      const std::vector<float> t = Transposed(w, N, K);
      std::vector<int8_t> q(t.size());
      scales.resize(static_cast<size_t>(N));
      QuantizeWeightsS8(t.data(), K, N, WeightLayout::kKN, /*per_column=*/true, q.data(), scales.data());
      codes = b.Raw(name, onnx::TensorProto::INT8, q.data(), q.size(), {K, N});
      b.Raw(name + "_scale", onnx::TensorProto::FLOAT, scales.data(), scales.size() * sizeof(float), {N});
    } else {
      if (K % 32 != 0) {
        status = absl::InvalidArgumentError(absl::StrCat("int4 export: '", name, "' has K = ", K, ", not a multiple of 32"));
        return name;
      }
      std::vector<uint8_t> q;
      QuantizeInt4Blocked(w, N, K, &q, &scales);
      codes = b.Raw(name, kOnnxInt4, q.data(), q.size(), {K, N});
      b.Raw(name + "_scale", onnx::TensorProto::FLOAT, scales.data(), scales.size() * sizeof(float), {K / 32, N});
      axis = 0;
    }
    std::vector<onnx::AttributeProto> attrs = {AttrI("axis", axis)};
    if (format == WeightFormat::kInt4) attrs.push_back(AttrI("block_size", 32));
    return b.Op("DequantizeLinear", {codes, name + "_scale"}, name + "_dq", attrs);
  };
  auto weight = [&](const std::string& name, std::vector<int64_t> shape, bool transpose) -> std::string {
    if (!status.ok()) return name;
    auto w = ck.ReadF32(name, shape);
    if (!w.ok()) {
      status = w.status();
      return name;
    }
    if (transpose) return projection(name, *w, shape[0], shape[1]);
    return b.Weight(name, *w, shape);
  };

  const std::string axes_last = b.I64({-1}, "axes_last");
  const std::string eps = b.F32({static_cast<float>(c.eps)}, {}, "eps");
  auto rms_norm = [&](const std::string& x, const std::string& w, const std::string& hint) {
    const std::string sq = b.Op("Mul", {x, x}, hint + "_sq");
    const std::string ms = b.Op("ReduceMean", {sq, axes_last}, hint + "_mean", {AttrI("keepdims", 1)});
    const std::string den = b.Op("Sqrt", {b.Op("Add", {ms, eps}, hint + "_eps")}, hint + "_rms");
    return b.Op("Mul", {b.Op("Div", {x, den}, hint + "_norm"), w}, hint);
  };

  // Positions P .. P+S-1 and the causal mask, shared by every layer.
  const std::string ids_shape = b.Op("Shape", {"input_ids"}, "ids_shape");
  const std::string S = b.Op("Gather", {ids_shape, b.I64({1}, "one", true)}, "seq_len", {AttrI("axis", 0)});
  const std::string P = cached ? b.Op("Gather", {b.Op("Shape", {"past_kv"}, "past_shape"), b.I64({3}, "three", true)},
                                       "past_len", {AttrI("axis", 0)})
                               : b.I64({0}, "past_len", true);
  const std::string one = b.I64({1}, "step", true);
  const std::string total = b.Op("Add", {P, S}, "total_len");
  const std::string qpos = b.Op("Range", {P, total, one}, "positions");
  const std::string kpos = b.Op("Range", {b.I64({0}, "zero", true), total, one}, "key_positions");
  const std::string qpos_col = b.Op("Unsqueeze", {qpos, b.I64({1}, "ax1")}, "positions_col");
  const std::vector<float> inv_freq(c.inv_freq.begin(), c.inv_freq.end());
  const std::string freqs = b.Op("MatMul", {b.Op("Cast", {qpos_col}, "positions_f", {AttrI("to", onnx::TensorProto::FLOAT)}),
                                            b.F32(inv_freq, {1, D / 2}, "inv_freq")}, "rotary_freqs");
  const std::string emb = b.Op("Concat", {freqs, freqs}, "rotary_emb", {AttrI("axis", -1)});
  const std::string cos = b.Op("Cos", {emb}, "rotary_cos");
  const std::string sin = b.Op("Sin", {emb}, "rotary_sin");
  const std::string allowed = b.Op("LessOrEqual", {b.Op("Unsqueeze", {kpos, b.I64({0}, "ax0")}, "key_row"), qpos_col}, "causal");
  const std::string mask = b.Op("Where", {allowed, b.F32({0.0f}, {}, "zero_f"), b.F32({-INFINITY}, {}, "neg_inf")}, "mask");
  const std::string mask_g = b.Op("Tile", {mask, b.I64({G, 1}, "tile_groups")}, "mask_groups");
  const std::string half = b.I64({D / 2}, "half"), full = b.I64({D}, "full"), zero = b.I64({0}, "start"),
                    ax3 = b.I64({3}, "ax3");
  auto rope = [&](const std::string& t, const std::string& hint) {
    const std::string t1 = b.Op("Slice", {t, zero, half, ax3}, hint + "_lo");
    const std::string t2 = b.Op("Slice", {t, half, full, ax3}, hint + "_hi");
    const std::string rot = b.Op("Concat", {b.Op("Neg", {t2}, hint + "_neg"), t1}, hint + "_rot", {AttrI("axis", 3)});
    return b.Op("Add", {b.Op("Mul", {t, cos}, hint + "_cos"), b.Op("Mul", {rot, sin}, hint + "_sin")}, hint);
  };
  const std::string scale = b.F32({static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)))}, {}, "attn_scale");

  std::string x = b.Op("Gather", {weight("model.embed_tokens.weight", {V, H}, false), "input_ids"}, "embed", {AttrI("axis", 0)});
  std::vector<std::string> present;
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    const std::string hint = absl::StrCat("l", l);
    const std::string h = rms_norm(x, weight(p + "input_layernorm.weight", {H}, false), hint + "_in_norm");
    // The q/k/v projections, with their biases where the family has them.
    auto qkv = [&](const std::string& which, int64_t rows) {
      const std::string name = p + "self_attn." + which + "_proj.";
      std::string t = b.Op("MatMul", {h, weight(name + "weight", {rows, H}, true)}, hint + "_" + which);
      if (c.qkv_bias) t = b.Op("Add", {t, weight(name + "bias", {rows}, false)}, hint + "_" + which + "_bias");
      return t;
    };
    std::string q = qkv("q", NH * D), k = qkv("k", KVH * D), v = qkv("v", KVH * D);
    q = b.Op("Reshape", {q, b.I64({1, -1, NH, D}, "q_shape")}, hint + "_q4");
    k = b.Op("Reshape", {k, b.I64({1, -1, KVH, D}, "kv_shape")}, hint + "_k4");
    if (c.qk_norm) {
      q = rms_norm(q, weight(p + "self_attn.q_norm.weight", {D}, false), hint + "_q_norm");
      k = rms_norm(k, weight(p + "self_attn.k_norm.weight", {D}, false), hint + "_k_norm");
    }
    v = b.Op("Reshape", {v, b.I64({1, -1, KVH, D}, "kv_shape")}, hint + "_v4");
    q = rope(b.Op("Transpose", {q}, hint + "_qt", {AttrInts("perm", {0, 2, 1, 3})}), hint + "_q_rope");
    k = rope(b.Op("Transpose", {k}, hint + "_kt", {AttrInts("perm", {0, 2, 1, 3})}), hint + "_k_rope");
    v = b.Op("Transpose", {v}, hint + "_vt", {AttrInts("perm", {0, 2, 1, 3})});
    if (cached) {
      const std::string pk = b.Op("Gather", {"past_kv", b.I64({2 * l}, "kidx", true)}, hint + "_past_k", {AttrI("axis", 0)});
      const std::string pv = b.Op("Gather", {"past_kv", b.I64({2 * l + 1}, "vidx", true)}, hint + "_past_v", {AttrI("axis", 0)});
      k = b.Op("Concat", {pk, k}, hint + "_k_all", {AttrI("axis", 2)});
      v = b.Op("Concat", {pv, v}, hint + "_v_all", {AttrI("axis", 2)});
      const std::string ax0 = b.I64({0}, "ax0");
      present.push_back(b.Op("Unsqueeze", {k, ax0}, hint + "_present_k"));
      present.push_back(b.Op("Unsqueeze", {v, ax0}, hint + "_present_v"));
    }
    // Grouped-query attention without repeating K/V: the G query heads of one KV head
    // become G*S rows of one matrix.
    const std::string qg = b.Op("Reshape", {q, b.I64({1, KVH, -1, D}, "qg_shape")}, hint + "_qg");
    const std::string kt = b.Op("Transpose", {k}, hint + "_k_t", {AttrInts("perm", {0, 1, 3, 2})});
    const std::string scores = b.Op("Mul", {b.Op("MatMul", {qg, kt}, hint + "_qk"), scale}, hint + "_scores");
    const std::string probs = b.Op("Softmax", {b.Op("Add", {scores, mask_g}, hint + "_masked")}, hint + "_probs", {AttrI("axis", -1)});
    std::string o = b.Op("MatMul", {probs, v}, hint + "_av");
    o = b.Op("Reshape", {o, b.I64({1, NH, -1, D}, "o_heads")}, hint + "_o4");
    o = b.Op("Transpose", {o}, hint + "_ot", {AttrInts("perm", {0, 2, 1, 3})});
    o = b.Op("Reshape", {o, b.I64({1, -1, NH * D}, "o_flat")}, hint + "_o");
    o = b.Op("MatMul", {o, weight(p + "self_attn.o_proj.weight", {H, NH * D}, true)}, hint + "_o_proj");
    x = b.Op("Add", {x, o}, hint + "_attn_res");
    const std::string h2 = rms_norm(x, weight(p + "post_attention_layernorm.weight", {H}, false), hint + "_post_norm");
    const std::string gate = b.Op("MatMul", {h2, weight(p + "mlp.gate_proj.weight", {I, H}, true)}, hint + "_gate");
    const std::string up = b.Op("MatMul", {h2, weight(p + "mlp.up_proj.weight", {I, H}, true)}, hint + "_up");
    const std::string act = b.Op("Mul", {b.Op("Mul", {gate, b.Op("Sigmoid", {gate}, hint + "_sig")}, hint + "_silu"), up}, hint + "_act");
    const std::string down = b.Op("MatMul", {act, weight(p + "mlp.down_proj.weight", {H, I}, true)}, hint + "_down");
    x = b.Op("Add", {x, down}, hint + "_mlp_res");
    if (!status.ok()) return status;
  }
  x = rms_norm(x, weight("model.norm.weight", {H}, false), "final_norm");
  std::string lm_head;
  if (c.tied || !ck.Has("lm_head.weight")) {
    if (!c.tied) return absl::NotFoundError("the checkpoint has no tensor 'lm_head.weight' and tie_word_embeddings is false");
    // Tied: the head is the embedding, stored transposed as its own [H, V] weight.
    auto e = ck.ReadF32("model.embed_tokens.weight", {V, H});
    if (!e.ok()) return e.status();
    lm_head = projection("lm_head.weight", *e, V, H);
  } else {
    lm_head = weight("lm_head.weight", {V, H}, true);
  }
  if (!status.ok()) return status;
  auto* last = g->add_node();
  last->set_op_type("MatMul");
  last->set_name("lm_head");
  last->add_input(x);
  last->add_input(lm_head);
  last->add_output("logits");
  auto add_output = [&](const std::string& name, const std::vector<std::string>& dims) {
    auto* v = g->add_output();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (const std::string& d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  };
  add_output("logits", {"1", "sequence", std::to_string(V)});
  if (cached) {
    auto* n = g->add_node();
    n->set_op_type("Concat");
    n->set_name("present_kv");
    for (const auto& t : present) n->add_input(t);
    n->add_output("present_kv");
    *n->add_attribute() = AttrI("axis", 0);
    add_output("present_kv", {std::to_string(2 * L), "1", std::to_string(KVH), "total_sequence", std::to_string(D)});
  }
  data.close();
  if (!data) return absl::InternalError("writing the external data failed");
  if (q4nx != nullptr) {
    if (auto st = q4nx->Finish(&model); !st.ok()) return st;
  }
  std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
  if (!f || !model.SerializeToOstream(&f)) return absl::InternalError(absl::StrCat("cannot write '", out_path.string(), "'"));
  for (const char* side : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    const fs::path src = ckpt_dir / side;
    if (fs::exists(src)) {
      std::error_code ec;
      fs::copy_file(src, fs::absolute(out_path).parent_path() / side, fs::copy_options::overwrite_existing, ec);
    }
  }
  return absl::OkStatus();
}

absl::Status WriteRandom(const std::string& arch, const fs::path& dir, int64_t layers_override, uint64_t seed) {
  json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 151936},
              {"hidden_act", "silu"}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"rope_scaling", nullptr},
              {"tie_word_embeddings", true}, {"max_position_embeddings", 40960}, {"attention_bias", false},
              {"bos_token_id", 151643}, {"eos_token_id", 151645}, {"torch_dtype", "bfloat16"}};
  const json tiny = {{"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2},
                     {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16}};
  if (arch == "qwen3-0.6b") {
    cfg.update({{"hidden_size", 1024}, {"intermediate_size", 3072}, {"num_hidden_layers", 28},
                {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 128}});
  } else if (arch == "tiny") {
    cfg.update(tiny);
  } else if (arch == "llama-tiny") {
    // Llama 3.x: an untied head, rotary frequencies rescaled for the long context.
    cfg.update(tiny);
    cfg.update({{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 128256},
                {"rope_theta", 500000.0}, {"tie_word_embeddings", false}, {"max_position_embeddings", 131072},
                {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                                  {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}},
                {"bos_token_id", 128000}, {"eos_token_id", 128009}, {"mlp_bias", false}});
    cfg.erase("head_dim");  // Llama configs before 3.2 leave it to hidden / heads
  } else if (arch == "qwen2-tiny") {
    // Qwen2 / 2.5: biases on the q/k/v projections, no q/k norm.
    cfg.update(tiny);
    cfg.update({{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"rope_theta", 1000000.0},
                {"tie_word_embeddings", true}, {"max_position_embeddings", 32768}});
    cfg.erase("attention_bias");
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown architecture '", arch, "' (known: qwen3-0.6b, tiny, llama-tiny, qwen2-tiny)"));
  }
  if (layers_override > 0) cfg["num_hidden_layers"] = layers_override;
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "config.json");
    f << cfg.dump(2) << "\n";
  }
  const int64_t H = cfg["hidden_size"], I = cfg["intermediate_size"], L = cfg["num_hidden_layers"],
                NH = cfg["num_attention_heads"], KVH = cfg["num_key_value_heads"], V = cfg["vocab_size"];
  const int64_t D = cfg.contains("head_dim") ? cfg["head_dim"].get<int64_t>() : H / NH;
  const std::string type = cfg["model_type"];
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float stddev, float mean) {
    SafeTensorOut t{name, "BF16", shape, {}};
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    t.bytes.resize(n * 2);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t v = F32ToBf16(mean + stddev * normal(rng));
      std::memcpy(&t.bytes[2 * i], &v, 2);
    }
    return t;
  };
  std::vector<SafeTensorOut> ts;
  ts.push_back(tensor("model.embed_tokens.weight", {V, H}, 0.02f, 0.0f));
  const float proj = 1.0f / std::sqrt(static_cast<float>(H));
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    ts.push_back(tensor(p + "input_layernorm.weight", {H}, 0.05f, 1.0f));
    ts.push_back(tensor(p + "post_attention_layernorm.weight", {H}, 0.05f, 1.0f));
    if (type == "qwen3") {
      ts.push_back(tensor(p + "self_attn.q_norm.weight", {D}, 0.05f, 1.0f));
      ts.push_back(tensor(p + "self_attn.k_norm.weight", {D}, 0.05f, 1.0f));
    }
    if (type == "qwen2") {
      ts.push_back(tensor(p + "self_attn.q_proj.bias", {NH * D}, 0.1f, 0.0f));
      ts.push_back(tensor(p + "self_attn.k_proj.bias", {KVH * D}, 0.1f, 0.0f));
      ts.push_back(tensor(p + "self_attn.v_proj.bias", {KVH * D}, 0.1f, 0.0f));
    }
    ts.push_back(tensor(p + "self_attn.q_proj.weight", {NH * D, H}, proj, 0.0f));
    ts.push_back(tensor(p + "self_attn.k_proj.weight", {KVH * D, H}, proj, 0.0f));
    ts.push_back(tensor(p + "self_attn.v_proj.weight", {KVH * D, H}, proj, 0.0f));
    ts.push_back(tensor(p + "self_attn.o_proj.weight", {H, NH * D}, 1.0f / std::sqrt(static_cast<float>(NH * D)), 0.0f));
    ts.push_back(tensor(p + "mlp.gate_proj.weight", {I, H}, proj, 0.0f));
    ts.push_back(tensor(p + "mlp.up_proj.weight", {I, H}, proj, 0.0f));
    ts.push_back(tensor(p + "mlp.down_proj.weight", {H, I}, 1.0f / std::sqrt(static_cast<float>(I)), 0.0f));
  }
  ts.push_back(tensor("model.norm.weight", {H}, 0.05f, 1.0f));
  if (!cfg["tie_word_embeddings"].get<bool>()) ts.push_back(tensor("lm_head.weight", {V, H}, 1.0f / std::sqrt(static_cast<float>(H)), 0.0f));
  return WriteSafetensors((dir / "model.safetensors").string(), ts);
}

}  // namespace
}  // namespace convert

absl::StatusOr<ExportQwen3Result> ExportQwen3(const std::string& checkpoint_dir, const std::string& model,
                                              const ExportQwen3Options& options) {
  ExportQwen3Result r;
  r.model = model;
  r.data = model + ".data";
  std::unique_ptr<convert::Q4NXWeightSink> q4nx;
  if (options.weights == Qwen3Weights::kQ4NX) {
    const std::filesystem::path file = std::filesystem::path(model).replace_extension(".q4nx");
    if (file == std::filesystem::path(model)) {
      return absl::InvalidArgumentError("with --weights q4nx the graph needs a name other than *.q4nx (the weights take it)");
    }
    q4nx = std::make_unique<convert::Q4NXWeightSink>(file);
    r.q4nx = file.string();
  }
  if (auto s = convert::Export(checkpoint_dir, model, options.cached, options.weights, q4nx.get()); !s.ok()) return s;
  return r;
}

absl::Status WriteRandomQwen3(const std::string& dir, const RandomQwen3Options& options) {
  return convert::WriteRandom(options.architecture, dir, options.layers, options.seed);
}

}  // namespace oneinfer
