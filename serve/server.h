// oneinfer serve: an OpenAI-compatible HTTP server over the continuous-batching scheduler.
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
// GET /metrics, GET / (the chat page); docs/serve.md describes each.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "oneinfer/session.h"
#include "serve/metrics.h"

namespace oneinfer::serve {

struct ServeOptions {
  std::string model_path;
  std::string tokenizer_path;  // "" = tokenizer.json beside the model
  std::string model_name;      // what /v1/models lists; "" = the model's folder name
  std::string host = "127.0.0.1";
  int port = 8080;             // 0 = a free port (Server::port() says which)
  SessionOptions session;
  int max_batch = 8;           // sequences decoded together (KV cache slots)
  int64_t context = 0;         // positions per sequence; 0 = the model's
  int prefill_chunk = 256;
  int max_queue = 64;          // requests waiting for a slot before 429
  std::string api_key;         // "" = no key; else /v1/* need "Authorization: Bearer KEY"
  int64_t max_body_bytes = 8 << 20;
};

class Server {
 public:
  explicit Server(ServeOptions options);
  ~Server();  // Shutdown(true)

  // Binds the address and starts answering; /health says 503 until Load has finished.
  absl::Status Listen();
  int port() const;
  // Loads the model, tokenizer, chat format and end-of-turn ids, then starts the scheduler.
  absl::Status Load();
  // Stops accepting connections; running requests finish (or end at the next step with
  // cancel_running); returns once every thread is done.
  void Shutdown(bool cancel_running);
  // While Shutdown drains: end the running requests at the next step.
  void CancelRunning();
  const Metrics& metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oneinfer::serve
