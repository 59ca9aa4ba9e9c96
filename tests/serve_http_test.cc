// oneinfer serve over HTTP, in process: the error statuses and objects, the API key, /health
// before and after loading, streamed == whole replies, stop strings, and a client that hangs
// up mid-stream freeing its slot while the server goes on.
#include "serve/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/serve_model.h"

namespace oneinfer::serve {
namespace {

using json = nlohmann::json;

class ServeHttp : public ::testing::Test {
 protected:
  void Start(int max_batch = 4, int max_queue = 4, const std::string& key = "", bool load = true) {
    if (!serve_test::HasTokenizer()) GTEST_SKIP() << "the Qwen3 tokenizer (tests/oracles, setup.sh) is not installed";
    ServeOptions o;
    o.model_path = (serve_test::TinyQwen3Dir() / "model.onnx").string();
    o.port = 0;
    o.session.num_threads = 2;
    o.max_batch = max_batch;
    o.max_queue = max_queue;
    o.api_key = key;
    o.context = 256;  // the tiny model states Qwen3's 40960; a short context keeps the long-prompt case cheap
    server_ = std::make_unique<Server>(o);
    ASSERT_TRUE(server_->Listen().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(60, 0);
    if (load) {
      ASSERT_TRUE(server_->Load().ok());
    }
  }
  void TearDown() override {
    client_.reset();
    if (server_) server_->Shutdown(true);
  }
  // POST returning (status, parsed body).
  std::pair<int, json> Post(const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
    auto r = client_->Post(path.c_str(), h, body, "application/json");
    if (!r) {
      ADD_FAILURE() << "no reply to " << path;
      return {0, json()};
    }
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // The content of a streamed chat reply (and its finish reason).
  std::string Streamed(const std::string& body, std::string* finish = nullptr) {
    auto r = client_->Post("/v1/chat/completions", body, "application/json");
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return "";
    std::string text;
    size_t at = 0;
    bool done = false;
    while ((at = r->body.find("data: ", at)) != std::string::npos) {
      const size_t end = r->body.find("\n\n", at);
      const std::string data = r->body.substr(at + 6, end - at - 6);
      at = end;
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      const json c = json::parse(data);
      for (const json& ch : c["choices"]) {
        if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
        if (finish && !ch["finish_reason"].is_null()) *finish = ch["finish_reason"];
      }
    }
    EXPECT_TRUE(done) << "no data: [DONE] in\n" << r->body;
    return text;
  }
  void ExpectError(int status, std::pair<int, json> got, const std::string& words) {
    EXPECT_EQ(got.first, status) << got.second.dump().substr(0, 300);
    ASSERT_TRUE(got.second.is_object() && got.second.contains("error")) << got.second.dump();
    EXPECT_NE(got.second["error"]["message"].get<std::string>().find(words), std::string::npos) << got.second.dump().substr(0, 300);
    EXPECT_TRUE(got.second["error"].contains("type"));
    EXPECT_TRUE(got.second["error"].contains("code"));
  }
  int Running() {
    auto r = client_->Get("/metrics");
    const std::string key = "\noneinfer_requests_running ";
    const size_t at = r ? r->body.find(key) : std::string::npos;
    EXPECT_NE(at, std::string::npos) << (r ? r->body.substr(0, 300) : "no reply to /metrics");
    return at == std::string::npos ? -1 : std::atoi(r->body.c_str() + at + key.size());
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

const char kHello[] = R"({"messages": [{"role": "user", "content": "Hello"}], "temperature": 0, "max_tokens": 12)";

TEST_F(ServeHttp, HealthIs503UntilTheModelIsLoaded) {
  Start(4, 4, "", /*load=*/false);
  auto h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  ExpectError(503, Post("/v1/chat/completions", std::string(kHello) + "}"), "loading");
  ASSERT_TRUE(server_->Load().ok());
  h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = client_->Get("/v1/models");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_EQ(json::parse(m->body)["data"][0]["object"], "model");
  auto page = client_->Get("/");
  ASSERT_TRUE(page && page->status == 200);
  EXPECT_NE(page->body.find("<textarea id=\"input\""), std::string::npos);
}

TEST_F(ServeHttp, BadRequestsGetTheirStatusAndTheServerGoesOn) {
  Start();
  const std::string ok = std::string(kHello) + "}";
  ExpectError(400, Post("/v1/chat/completions", "{not json"), "not valid JSON");
  ExpectError(400, Post("/v1/chat/completions", R"({"model": "x"})"), "'messages' is required");
  ExpectError(400, Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": 1}]})"), "must be a string");
  ExpectError(400, Post("/v1/chat/completions", std::string(kHello) + R"(, "max_tokens": 0})"), "at least 1");
  ExpectError(400, Post("/v1/completions", R"({"prompt": [1, 2, 99999999]})"), "outside the vocabulary");
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += " word";
  auto too_long = Post("/v1/completions", json{{"prompt", long_prompt}}.dump());
  ExpectError(400, too_long, "the context is");
  EXPECT_EQ(too_long.second["error"]["code"], "context_length_exceeded");
  ExpectError(404, Post("/v1/nothing", ok), "no route");
  auto get = client_->Get("/no/such/page");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 404);
  // Still serving.
  auto fine = Post("/v1/chat/completions", ok);
  EXPECT_EQ(fine.first, 200) << fine.second.dump();
  const std::string metrics = client_->Get("/metrics")->body;
  EXPECT_NE(metrics.find("oneinfer_requests_total{path=\"/v1/chat/completions\",status=\"400\"} 4"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("oneinfer_requests_total{path=\"other\",status=\"404\"} 2"), std::string::npos) << metrics;
}

TEST_F(ServeHttp, ApiKeyIsRequiredOnTheApiRoutes) {
  Start(4, 4, "sekret");
  const std::string ok = std::string(kHello) + "}";
  ExpectError(401, Post("/v1/chat/completions", ok), "needs an API key");
  ExpectError(401, Post("/v1/chat/completions", ok, {{"Authorization", "Bearer wrong"}}), "not right");
  auto models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  EXPECT_EQ(Post("/v1/chat/completions", ok, {{"Authorization", "Bearer sekret"}}).first, 200);
  EXPECT_EQ(client_->Get("/health")->status, 200);  // probes need no key
}

TEST_F(ServeHttp, StreamedAndWholeRepliesAgreeAndStopStringsCut) {
  Start();
  auto whole = Post("/v1/chat/completions", std::string(kHello) + "}");
  ASSERT_EQ(whole.first, 200) << whole.second.dump();
  const std::string text = whole.second["choices"][0]["message"]["content"];
  EXPECT_EQ(whole.second["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole.second["usage"]["completion_tokens"], 12);
  EXPECT_EQ(whole.second["object"], "chat.completion");
  std::string finish;
  EXPECT_EQ(Streamed(std::string(kHello) + R"(, "stream": true})", &finish), text);
  EXPECT_EQ(finish, "length");
  // A stop string from the middle of the reply: the text ends just before it.
  ASSERT_GT(text.size(), 8u);
  const std::string stop = text.substr(text.size() / 2, 3);
  const std::string cut = text.substr(0, text.find(stop));
  const std::string with_stop = std::string(kHello) + R"(, "stop": )" + json(stop).dump();
  auto stopped = Post("/v1/chat/completions", with_stop + "}");
  EXPECT_EQ(stopped.second["choices"][0]["message"]["content"], cut);
  EXPECT_EQ(stopped.second["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(Streamed(with_stop + R"(, "stream": true})", &finish), cut);
  EXPECT_EQ(finish, "stop");
}

TEST_F(ServeHttp, FullQueueIs429AndAClientHangingUpFreesItsSlot) {
  Start(/*max_batch=*/1, /*max_queue=*/0);
  std::atomic<int> chunks{0};
  std::atomic<bool> hang_up{false};
  // A raw socket client: reads the first events of an endless stream, then hangs up.
  std::thread endless([&] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      const std::string body = R"({"prompt": "Tell me everything", "temperature": 0, "stream": true})";  // to the context
      const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
      if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
        char buf[4096];
        while (!hang_up) {
          const ssize_t n = read(fd, buf, sizeof(buf));
          if (n <= 0) break;
          chunks += static_cast<int>(std::count(buf, buf + n, '\n') / 2);  // events end with a blank line
        }
      }
    }
    close(fd);
  });
  for (int i = 0; i < 500 && chunks < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (chunks < 2) {
    hang_up = true;
    endless.join();
    FAIL() << "the stream did not start";
  }
  // The one slot is taken and no request may wait.
  ExpectError(429, Post("/v1/chat/completions", std::string(kHello) + "}"), "queue is full");
  EXPECT_EQ(Running(), 1);
  hang_up = true;
  endless.join();
  // The slot is free again within a few steps, and the next request is served.
  for (int i = 0; i < 300 && Running() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Running(), 0);
  auto next = Post("/v1/chat/completions", std::string(kHello) + "}");
  EXPECT_EQ(next.first, 200) << next.second.dump();
}

}  // namespace
}  // namespace oneinfer::serve
