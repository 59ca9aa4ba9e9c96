// oneinfer serve's scheduler: requests submitted from many threads join the running batch and
// each gets exactly its lone Generator::Generate tokens; cancelled requests free their slots; a
// full queue refuses; shutdown drains.
#include "serve/scheduler.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "tests/serve_model.h"

namespace oneinfer::serve {
namespace {

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(200 + 53 * salt + 7 * i);
  return ids;
}

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
  absl::Status error;
};

// Reads a stream to its end.
Outcome Read(RequestStream& s) {
  Outcome o;
  for (;;) {
    StreamEvent e = s.Next();
    if (e.kind == StreamEvent::Kind::kToken) o.tokens.push_back(e.token);
    if (e.kind == StreamEvent::Kind::kFinished) o.finish = e.finish;
    if (e.kind == StreamEvent::Kind::kError) o.error = e.error;
    if (e.kind == StreamEvent::Kind::kFinished || e.kind == StreamEvent::Kind::kError) return o;
  }
}

class ServeScheduler : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SessionOptions so;
    so.num_threads = 2;
    auto s = Session::Load((serve_test::TinyQwen3Dir() / "model.onnx").string(), so);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = s->release();
  }
  static void TearDownTestSuite() {
    delete session_;
    session_ = nullptr;
  }
  std::unique_ptr<Scheduler> Make(int max_batch, int max_queue, Metrics* metrics, int64_t context = 0) {
    BatchOptions bo;
    bo.max_sequences = max_batch;
    bo.context = context;
    auto b = BatchGenerator::Create(*session_, bo);
    EXPECT_TRUE(b.ok()) << b.status();
    return std::make_unique<Scheduler>(std::move(*b), metrics, max_queue);
  }
  std::vector<int32_t> Alone(const std::vector<int32_t>& prompt, const SequenceOptions& o) {
    auto gen = Generator::Create(*session_);
    EXPECT_TRUE(gen.ok());
    GenerateOptions go;
    go.max_new_tokens = o.max_new_tokens;
    go.sampling = o.sampling;
    go.stop_ids = o.stop_ids;
    auto r = (*gen)->Generate(prompt, go);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->generated_ids : std::vector<int32_t>{};
  }
  static Session* session_;
};
Session* ServeScheduler::session_ = nullptr;

TEST_F(ServeScheduler, EightConcurrentRequestsEachGetTheirLoneTokens) {
  Metrics metrics(8);
  auto sched = Make(8, 16, &metrics);
  std::vector<std::pair<std::vector<int32_t>, SequenceOptions>> requests;
  for (int i = 0; i < 8; ++i) {
    SequenceOptions o;
    o.max_new_tokens = 6 + i;
    if (i % 2) {  // seeded sampling must not depend on the batch either
      o.sampling.temperature = 0.9f;
      o.sampling.top_k = 50;
      o.sampling.top_p = 0.95f;
      o.sampling.seed = 100 + i;
    }
    requests.push_back({Prompt(3 + 2 * i, i), o});
  }
  std::vector<Outcome> got(requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] {
      // Staggered arrivals: later requests join a batch that is already decoding.
      std::this_thread::sleep_for(std::chrono::milliseconds(3 * static_cast<int>(i)));
      auto s = sched->Submit(requests[i].first, requests[i].second);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ((*s)->Next().kind, StreamEvent::Kind::kAdmitted);
      got[i] = Read(**s);
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(got[i].error.ok()) << got[i].error;
    EXPECT_EQ(got[i].tokens, Alone(requests[i].first, requests[i].second)) << "request " << i;
    EXPECT_EQ(got[i].finish, FinishReason::kLength);
  }
  sched->Shutdown(false);
  EXPECT_EQ(metrics.running(), 0);
  EXPECT_EQ(metrics.slots_in_use(), 0);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("oneinfer_generated_tokens_total 76\n"), std::string::npos) << text;  // 6 + 7 + ... + 13
}

TEST_F(ServeScheduler, CancelFreesTheSlotForTheNextRequest) {
  Metrics metrics(1);
  auto sched = Make(1, 4, &metrics, /*context=*/64);  // without the cancel, a still ends (kLength)
  SequenceOptions endless;
  endless.max_new_tokens = 100000;
  auto a = sched->Submit(Prompt(4, 1), endless);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ((*a)->Next().kind, StreamEvent::Kind::kAdmitted);
  ASSERT_EQ((*a)->Next().kind, StreamEvent::Kind::kToken);
  SequenceOptions short_one;
  short_one.max_new_tokens = 3;
  auto b = sched->Submit(Prompt(5, 2), short_one);  // waits: the one slot is taken
  ASSERT_TRUE(b.ok());
  (*a)->Cancel();  // the client went away
  EXPECT_EQ((*b)->Next().kind, StreamEvent::Kind::kAdmitted);
  const Outcome ob = Read(**b);
  EXPECT_EQ(ob.tokens, Alone(Prompt(5, 2), short_one));
  EXPECT_EQ(Read(**a).finish, FinishReason::kCancelled);
  sched->Shutdown(false);
  EXPECT_EQ(metrics.slots_in_use(), 0);
  EXPECT_EQ(metrics.running(), 0);
}

TEST_F(ServeScheduler, FullQueueRefusesAndBadPromptsComeBackAsErrors) {
  Metrics metrics(1);
  auto sched = Make(1, 1, &metrics, /*context=*/16);
  SequenceOptions o;
  o.max_new_tokens = 1000;
  auto a = sched->Submit(Prompt(4, 1), o);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ((*a)->Next().kind, StreamEvent::Kind::kAdmitted);
  auto b = sched->Submit(Prompt(4, 2), o);  // the one queue place
  ASSERT_TRUE(b.ok());
  auto c = sched->Submit(Prompt(4, 3), o);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
  // a ends at the context (16 positions), then b runs; a prompt longer than the context is refused.
  EXPECT_EQ(Read(**a).finish, FinishReason::kLength);
  EXPECT_EQ((*b)->Next().kind, StreamEvent::Kind::kAdmitted);
  EXPECT_EQ(Read(**b).finish, FinishReason::kLength);
  auto d = sched->Submit(Prompt(17, 4), o);
  ASSERT_TRUE(d.ok());
  const StreamEvent e = (*d)->Next();
  EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
  EXPECT_TRUE(absl::IsInvalidArgument(e.error)) << e.error;
}

TEST_F(ServeScheduler, ShutdownLetsRunningRequestsFinishAndRefusesNewOnes) {
  Metrics metrics(2);
  auto sched = Make(2, 4, &metrics);
  SequenceOptions o;
  o.max_new_tokens = 5;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) {
    auto s = sched->Submit(Prompt(3, i), o);
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  ASSERT_EQ(streams[0]->Next().kind, StreamEvent::Kind::kAdmitted);
  std::thread stopper([&] { sched->Shutdown(/*cancel_running=*/false); });
  const Outcome first = Read(*streams[0]);
  stopper.join();
  EXPECT_EQ(first.tokens.size(), 5u);  // drained, not cut
  EXPECT_FALSE(sched->Submit(Prompt(3, 9), o).ok());
  // The others were either admitted and finished, or refused while queued: none is left hanging.
  for (size_t i = 1; i < streams.size(); ++i) {
    StreamEvent e = streams[i]->Next();
    if (e.kind == StreamEvent::Kind::kAdmitted) {
      EXPECT_EQ(Read(*streams[i]).finish, FinishReason::kLength);
    } else {
      EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
      EXPECT_TRUE(absl::IsUnavailable(e.error)) << e.error;
    }
  }
  EXPECT_EQ(metrics.running(), 0);
}

}  // namespace
}  // namespace oneinfer::serve
