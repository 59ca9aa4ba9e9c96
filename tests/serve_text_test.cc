// oneinfer serve: stop strings on streamed text, server-sent event framing, the metrics text.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serve/metrics.h"
#include "serve/sse.h"
#include "serve/stop_strings.h"

namespace oneinfer::serve {
namespace {

// Feeds pieces one by one; returns what a client would have received.
std::string Stream(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += m.Push(p);
  return out + m.Flush();
}

TEST(ServeStopStrings, StopSplitAcrossPiecesIsCutAndNeverSent) {
  StopStringMatcher m({"<END>"});
  EXPECT_EQ(m.Push("Hello <E"), "Hello ");  // "<E" might begin the stop string: held
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("D> tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(ServeStopStrings, HeldTextIsReleasedWhenItCannotMatch) {
  StopStringMatcher m({"<END>"});
  EXPECT_EQ(m.Push("a <E"), "a ");
  EXPECT_EQ(m.Push("x"), "<Ex");
  EXPECT_EQ(Stream(m, {"<", "EN"}), "<EN");  // generation ended: the held text is the reply's end
  EXPECT_FALSE(m.stopped());
}

TEST(ServeStopStrings, EarliestOfSeveralWinsAndTextBeforeItIsKept) {
  StopStringMatcher m({"world", "lo w", ""});
  EXPECT_EQ(Stream(m, {"hel", "lo wor", "ld"}), "hel");
  EXPECT_TRUE(m.stopped());
  StopStringMatcher none({});
  EXPECT_EQ(Stream(none, {"a", "b"}), "ab");
  StopStringMatcher first({"\n"});
  EXPECT_EQ(Stream(first, {"\nrest"}), "");
  EXPECT_TRUE(first.stopped());
}

TEST(ServeStopStrings, MultiByteCharactersAreNeverSplit) {
  StopStringMatcher m({"日本語"});
  EXPECT_EQ(m.Push("漢字日"), "漢字");
  EXPECT_EQ(m.Push("本"), "");
  EXPECT_EQ(m.Push("人"), "日本人");
}

TEST(ServeSse, EventsAreOneDataLineEach) {
  const std::string e = SseEvent({{"text", "two\nlines\n\nand more"}, {"n", 1}});
  EXPECT_EQ(e.rfind("data: ", 0), 0u);
  EXPECT_EQ(e.substr(e.size() - 2), "\n\n");
  EXPECT_EQ(e.find('\n'), e.size() - 2);  // the content's newlines are escaped
  const auto back = nlohmann::json::parse(e.substr(6));
  EXPECT_EQ(back["text"], "two\nlines\n\nand more");
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
  // Broken UTF-8 (never produced by the decoder) is replaced, not thrown.
  EXPECT_NO_THROW(SseEvent({{"text", std::string("\xff\xfe")}}));
}

TEST(ServeMetrics, PrometheusTextHasEverySeries) {
  Metrics m(4);
  m.CountRequest("/v1/chat/completions", 200);
  m.CountRequest("/v1/chat/completions", 200);
  m.CountRequest("/v1/chat/completions", 400);
  m.AddTokens(12, 5);
  m.ObserveTimeToFirstToken(0.2);
  m.ObserveTokenLatency(0.004);
  m.ObserveTokenLatency(3.0);
  m.ObserveBatch(3);
  m.SetScheduler(2, 1, 2);
  const std::string t = m.Render();
  for (const char* line : {
           "oneinfer_requests_total{path=\"/v1/chat/completions\",status=\"200\"} 2\n",
           "oneinfer_requests_total{path=\"/v1/chat/completions\",status=\"400\"} 1\n",
           "oneinfer_requests_running 2\n", "oneinfer_queue_length 1\n", "oneinfer_kv_slots_in_use 2\n",
           "oneinfer_kv_slots_total 4\n", "oneinfer_prompt_tokens_total 12\n", "oneinfer_generated_tokens_total 5\n",
           "oneinfer_time_to_first_token_seconds_bucket{le=\"0.1\"} 0\n",
           "oneinfer_time_to_first_token_seconds_bucket{le=\"0.25\"} 1\n",
           "oneinfer_time_to_first_token_seconds_count 1\n",
           "oneinfer_time_per_output_token_seconds_bucket{le=\"0.005\"} 1\n",
           "oneinfer_time_per_output_token_seconds_bucket{le=\"2.5\"} 1\n",
           "oneinfer_time_per_output_token_seconds_bucket{le=\"+Inf\"} 2\n",
           "oneinfer_time_per_output_token_seconds_sum 3.004\n",
           "oneinfer_batch_size_bucket{le=\"2\"} 0\n", "oneinfer_batch_size_bucket{le=\"4\"} 1\n",
           "# TYPE oneinfer_batch_size histogram\n", "# TYPE oneinfer_requests_total counter\n"}) {
    EXPECT_NE(t.find(line), std::string::npos) << "missing: " << line << "in\n" << t;
  }
}

TEST(ServeMetrics, HistogramBucketsAreCumulativeWithInclusiveBounds) {
  Histogram h({1, 2});
  for (double v : {0.5, 1.0, 1.5, 2.0, 7.0}) h.Observe(v);
  std::string out;
  h.Render("x", &out);
  EXPECT_EQ(out, "x_bucket{le=\"1\"} 2\nx_bucket{le=\"2\"} 4\nx_bucket{le=\"+Inf\"} 5\nx_sum 12\nx_count 5\n");
}

}  // namespace
}  // namespace oneinfer::serve
