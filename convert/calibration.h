// Calibration for the A8W8 quantizer (convert/a8w8_quantizer.cc): where the sample data comes
// from (text, token ids, input folders), how it is fed to a graph, and how an observed range
// becomes quantisation parameters.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneinfer/session.h"

namespace oneinfer::convert {

// A built-in calibration sample (plain English prose, code and numbers), used when no
// calibration data is given.
extern const char* const kBuiltinCalibration;

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

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what);
// Lines of ids separated by ',' or whitespace; each line is one sequence.
absl::StatusOr<std::vector<std::vector<int32_t>>> ParseIds(const std::string& text, const std::string& path);
// Splits sequences into runs of at most seq tokens, stopping after max_tokens in all.
std::vector<std::vector<int32_t>> Chunk(const std::vector<std::vector<int32_t>>& seqs, int64_t seq, int64_t max_tokens);
// Feeds for a causal-LM graph: input_ids [1, S] and, for the cached form, an empty past_kv.
absl::StatusOr<std::vector<Feed>> CausalFeeds(const Session& s, const std::vector<int32_t>& ids);
// Feeds read from DIR/input_*.pb sets (as `oneinfer exec` takes them).
absl::StatusOr<std::vector<std::vector<Feed>>> DirFeeds(const Session& s, const std::string& dir);
// Runs `feeds` and hands each asked tensor to `visit`.
using Visit = std::function<absl::Status(const std::string&, const Tensor&)>;
absl::Status RunAndVisit(const Session& s, const std::vector<Feed>& feeds, const std::vector<std::string>& names,
                         const Visit& visit);
// The quantisation parameters of an activation range (always including zero, as Q/DQ need).
QParams ActivationParams(float lo, float hi, bool as_uint8);
// The value below which `frac` of the histogram's mass lies (linear inside a bin).
float HistQuantile(const std::vector<uint64_t>& h, float lo, float hi, double frac);
// Logits [1, S, V] of a causal-LM session for `ids`.
absl::StatusOr<Tensor> Logits(const Session& s, const std::vector<int32_t>& ids);

}  // namespace oneinfer::convert
