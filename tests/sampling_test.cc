// SampleToken against a plain reference that sorts every candidate and walks them in order: the
// same token for every seed, temperature, top-k and top-p, and the right frequencies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "oneinfer/generator.h"

namespace oneinfer {
namespace {

float Key(float l) { return std::isnan(l) ? -INFINITY : l; }

// The rule as docs/api.md states it, with a full sort: candidates by logit (lower id on ties),
// cut to top_k, weighed exp((logit - max) / T) in 2^-40 units, cut to the shortest prefix holding
// top_p of the mass, and the token under a 53-bit uniform draw scaled to that mass.
int32_t ReferenceSample(const float* logits, int64_t vocab, const SamplingOptions& o, uint64_t step) {
  if (o.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return Key(logits[a]) != Key(logits[b]) ? Key(logits[a]) > Key(logits[b]) : a < b;
  });
  if (o.top_k > 0 && o.top_k < vocab) ids.resize(static_cast<size_t>(o.top_k));
  const float top = Key(logits[ids[0]]);
  auto mass = [&](int32_t id) {
    const float w = std::exp((Key(logits[id]) - top) / o.temperature);
    return w >= 0.0f && w <= 1.0f ? static_cast<uint64_t>(static_cast<double>(w) * 0x1.0p40) : uint64_t{0};
  };
  uint64_t total = 0;
  for (int32_t id : ids) total += mass(id);
  size_t count = ids.size();
  if (o.top_p < 1.0f) {
    const uint64_t need = std::clamp<uint64_t>(
        static_cast<uint64_t>(std::ceil(static_cast<double>(o.top_p) * static_cast<double>(total))), 1, std::max<uint64_t>(total, 1));
    uint64_t held = 0;
    count = 0;
    while (held < need && count < ids.size()) held += mass(ids[count++]);
    total = held;
  }
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + step);
  uint64_t target = static_cast<uint64_t>((static_cast<unsigned __int128>(rng() >> 11) * total) >> 53);
  for (size_t i = 0; i < count; ++i) {
    if (target < mass(ids[i])) return ids[i];
    target -= mass(ids[i]);
  }
  return ids[count - 1];
}

std::vector<float> RandomLogits(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> l(n);
  for (float& x : l) x = normal(rng);
  return l;
}

TEST(SampleToken, MatchesTheSortingReference) {
  struct Case {
    float temperature;
    int top_k;
    float top_p;
  };
  const std::vector<Case> cases = {{1.0f, 0, 1.0f},  {0.7f, 0, 1.0f}, {1.0f, 50, 1.0f}, {1.0f, 0, 0.9f},
                                   {0.8f, 40, 0.95f}, {2.0f, 1, 1.0f}, {1.0f, 0, 0.01f}, {0.0f, 0, 1.0f}};
  // Qwen's vocabulary with logits flat (a random model) and peaked (a trained one).
  for (float scale : {1.0f, 8.0f}) {
    const std::vector<float> logits = RandomLogits(151936, 7, scale);
    for (const Case& c : cases) {
      for (uint64_t seed = 0; seed < 12; ++seed) {
        SamplingOptions o{c.temperature, c.top_k, c.top_p, seed};
        ASSERT_EQ(SampleToken(logits.data(), 151936, o, seed % 3), ReferenceSample(logits.data(), 151936, o, seed % 3))
            << "T " << c.temperature << " k " << c.top_k << " p " << c.top_p << " seed " << seed << " scale " << scale;
      }
    }
  }
  // Few distinct values (ties everywhere), a NaN and -inf logits; vocabularies at the selection's
  // edges (64 per sorted block).
  for (size_t vocab : {1u, 2u, 63u, 64u, 65u, 129u, 1000u}) {
    std::vector<float> logits(vocab);
    for (size_t i = 0; i < vocab; ++i) logits[i] = static_cast<float>(i * 7 % 5);
    if (vocab > 3) logits[3] = NAN, logits[1] = -INFINITY;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      for (const Case& c : cases) {
        SamplingOptions o{c.temperature, c.top_k, c.top_p, seed};
        const int64_t v = static_cast<int64_t>(vocab);
        ASSERT_EQ(SampleToken(logits.data(), v, o, 0), ReferenceSample(logits.data(), v, o, 0))
            << "vocab " << vocab << " seed " << seed << " T " << c.temperature << " k " << c.top_k << " p " << c.top_p;
      }
    }
  }
}

// Greedy is std::max_element's choice: the first of equal maxima (-0 and +0 are equal), NaN
// skipped unless it comes first, infinities; at every length around the eight-lane step.
TEST(SampleToken, GreedyIsMaxElementsChoice) {
  const SamplingOptions greedy;
  std::mt19937 rng(7);
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, 3.0f, -1e30f};
  for (size_t n = 1; n <= 40; ++n) {
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<float> l(n);
      for (float& x : l) x = static_cast<float>(static_cast<int>(rng() % 5)) - 2.0f;  // ties
      for (int s = 0; s < 3; ++s) l[rng() % n] = specials[rng() % std::size(specials)];
      const auto want = std::max_element(l.begin(), l.end()) - l.begin();
      ASSERT_EQ(SampleToken(l.data(), static_cast<int64_t>(n), greedy, 0), want) << "n " << n << " trial " << trial;
    }
  }
  std::vector<float> big = RandomLogits(151936, 3, 4.0f);
  big[151935] = 100.0f;
  big[77777] = 100.0f;
  EXPECT_EQ(SampleToken(big.data(), 151936, greedy, 0), 77777);
  big[0] = NAN;
  EXPECT_EQ(SampleToken(big.data(), 151936, greedy, 0), 0);
}

TEST(SampleToken, FrequenciesFollowTheProbabilities) {
  // Logits ln 6, ln 3, ln 1 at temperature 1: probabilities 0.6, 0.3, 0.1.
  const std::vector<float> logits = {std::log(3.0f), std::log(6.0f), 0.0f};
  std::vector<int> count(3, 0);
  constexpr int kDraws = 20000;
  for (int s = 0; s < kDraws; ++s) ++count[static_cast<size_t>(SampleToken(logits.data(), 3, {1.0f, 0, 1.0f, uint64_t(s)}, 0))];
  EXPECT_NEAR(count[1] / double(kDraws), 0.6, 0.015);
  EXPECT_NEAR(count[0] / double(kDraws), 0.3, 0.015);
  EXPECT_NEAR(count[2] / double(kDraws), 0.1, 0.015);
  // top_p 0.8 keeps {1, 0} (0.6 + 0.3 reaches 0.8): 2/3 and 1/3; top_k 1 is greedy.
  std::fill(count.begin(), count.end(), 0);
  for (int s = 0; s < kDraws; ++s) ++count[static_cast<size_t>(SampleToken(logits.data(), 3, {1.0f, 0, 0.8f, uint64_t(s)}, 0))];
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[1] / double(kDraws), 2.0 / 3, 0.015);
  for (int s = 0; s < 100; ++s) EXPECT_EQ(SampleToken(logits.data(), 3, {1.0f, 1, 1.0f, uint64_t(s)}, 0), 1);
}

TEST(SampleToken, TheSameSeedAndStepGiveTheSameToken) {
  const std::vector<float> logits = RandomLogits(151936, 3, 1.0f);
  int differing = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const SamplingOptions o{1.0f, 0, 0.95f, seed};
    EXPECT_EQ(SampleToken(logits.data(), 151936, o, 5), SampleToken(logits.data(), 151936, o, 5));
    differing += SampleToken(logits.data(), 151936, o, 5) != SampleToken(logits.data(), 151936, o, 6);
  }
  EXPECT_GT(differing, 15) << "the step should change the draw";
}

}  // namespace
}  // namespace oneinfer
