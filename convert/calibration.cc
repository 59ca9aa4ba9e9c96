#include "convert/calibration.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "absl/strings/str_cat.h"
#include "graph/onnx_loader.h"

namespace oneinfer::convert {

namespace fs = std::filesystem;

// Written for this tool.
const char* const kBuiltinCalibration =
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

// Logits [1, S, V] of a causal-LM session for `ids`.
absl::StatusOr<Tensor> Logits(const Session& s, const std::vector<int32_t>& ids) {
  auto feeds = CausalFeeds(s, ids);
  if (!feeds.ok()) return feeds.status();
  auto outs = s.Run(*feeds, {"logits"});
  if (!outs.ok()) return outs.status();
  return (*outs)[0];
}

}  // namespace oneinfer::convert
