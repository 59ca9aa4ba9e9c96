#include "serve/server.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "oneinfer/batch_generator.h"
#include "oneinfer/chat.h"
#include "oneinfer/tokenizer.h"
#include "serve/api_error.h"
#include "serve/chat_page.h"
#include "serve/request.h"
#include "serve/scheduler.h"
#include "serve/sse.h"
#include "serve/stop_strings.h"

namespace oneinfer::serve {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A request without max_tokens on a model that states no context still ends.
constexpr int kDefaultMaxTokensUnbounded = 2048;

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void ReplyError(httplib::Response& res, const ApiError& e) { Reply(res, e.status, e.ToJson()); }

// The metrics label of a path: the routes by name, everything else as "other" (unbounded paths
// would make unbounded series).
std::string RouteLabel(const std::string& path) {
  for (const char* r : {"/", "/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions"}) {
    if (path == r) return r;
  }
  return "other";
}

std::string FinishName(FinishReason r) { return r == FinishReason::kStop ? "stop" : FinishReasonName(r); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What one generation produced, built up event by event (shared by the streamed and whole replies).
struct Generation {
  Generation(const Tokenizer& tok, std::vector<std::string> stops) : decoder(tok, /*skip_special=*/true), stop(std::move(stops)) {}
  Tokenizer::StreamDecoder decoder;
  StopStringMatcher stop;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string finish_reason;

  // Text a token completes, up to a stop string.
  std::string Token(int32_t id) {
    ++completion_tokens;
    return stop.Push(decoder.Push(id));
  }
  std::string End(FinishReason r) {
    std::string tail = stop.Push(decoder.Flush());
    tail += stop.Flush();
    finish_reason = stop.stopped() ? "stop" : FinishName(r);
    return tail;
  }
  json Usage() const {
    return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  }
};

// Debian's cpp-httplib 0.11 listens with a backlog of 5, compiled into its library: past 5
// clients connecting at once, a connection's handshake is dropped and retried a second later
// (a 1 s time to first token). listen() again on the bound socket only raises the backlog.
class HttpServer : public httplib::Server {
 public:
  bool RaiseBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

}  // namespace

struct Server::Impl {
  explicit Impl(ServeOptions o) : options(std::move(o)), metrics(options.max_batch) {}

  ServeOptions options;
  Metrics metrics;
  HttpServer http;
  std::thread listener;
  std::atomic<bool> listener_done{false};  // listen_after_bind returned
  int port = -1;
  std::atomic<bool> ready{false};
  std::atomic<uint64_t> next_id{1};
  std::string model_name;

  std::unique_ptr<Session> session;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ModelChatFormat> chat_format;
  std::vector<int32_t> stop_ids;
  std::unique_ptr<Scheduler> scheduler;
  std::mutex shutdown_mu;
  bool shut_down = false;

  void Routes();
  void Generate(const GenerationRequest& r, httplib::Response& res);
  std::optional<ApiError> Prompt(const GenerationRequest& r, std::vector<int32_t>* ids) const;
  json Chunk(const std::string& id, int64_t created, bool chat, const json& choice, bool with_usage) const;
};

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->model_name = impl_->options.model_name;
  if (impl_->model_name.empty()) {
    const fs::path p = fs::absolute(impl_->options.model_path);
    impl_->model_name = p.parent_path().filename().string();
    if (impl_->model_name.empty()) impl_->model_name = p.stem().string();
  }
  impl_->Routes();
}

Server::~Server() { Shutdown(/*cancel_running=*/true); }

const Metrics& Server::metrics() const { return impl_->metrics; }
int Server::port() const { return impl_->port; }

absl::Status Server::Listen() {
  Impl& m = *impl_;
  if (m.options.port < 0 || m.options.port > 65535) return absl::InvalidArgumentError(absl::StrCat("port ", m.options.port, " is not a TCP port"));
  // Every handler holds its thread for the whole generation: enough threads for every slot and
  // every queued request, plus a few for /health, /metrics and refusals.
  const size_t threads = static_cast<size_t>(m.options.max_batch) + static_cast<size_t>(m.options.max_queue) + 8;
  m.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  if (m.options.port == 0) {
    m.port = m.http.bind_to_any_port(m.options.host);
  } else {
    m.port = m.http.bind_to_port(m.options.host, m.options.port) ? m.options.port : -1;
  }
  if (m.port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", m.options.host, ":", m.options.port,
                                               " (address in use, or not an address of this machine)"));
  }
  if (!m.http.RaiseBacklog()) return absl::InternalError(absl::StrCat("listen(): ", std::strerror(errno)));
  m.listener = std::thread([&m] {
    m.http.listen_after_bind();
    m.listener_done = true;
  });
  // cpp-httplib's stop() does nothing until the accept loop has started, and a Shutdown right
  // after Listen (a model that fails to load) would then wait on that loop forever.
  while (!m.http.is_running() && !m.listener_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return absl::OkStatus();
}

absl::Status Server::Load() {
  Impl& m = *impl_;
  const fs::path model_dir = fs::absolute(m.options.model_path).parent_path();
  std::string tok_path = m.options.tokenizer_path;
  if (tok_path.empty()) {
    if (!fs::exists(model_dir / "tokenizer.json")) {
      return absl::NotFoundError(absl::StrCat("no tokenizer.json beside the model (", model_dir.string(), "); give --tokenizer"));
    }
    tok_path = (model_dir / "tokenizer.json").string();
  }
  auto tok = Tokenizer::FromFile(tok_path);
  if (!tok.ok()) return tok.status();
  m.tokenizer = std::move(*tok);
  auto format = ModelChatFormat::Find(model_dir.string(), tok_path);
  if (!format.ok()) return format.status();
  m.chat_format = std::move(*format);
  auto stops = ModelStopIds(model_dir.string(), m.tokenizer.get());
  if (!stops.ok()) return stops.status();
  m.stop_ids = *std::move(stops);

  SessionOptions session_options = m.options.session;
  // A server runs for days over most of the vocabulary: no step should wait on the disk for an
  // embedding row whose page the system evicted (SessionOptions::resident_tables).
  session_options.resident_tables = true;
  auto session = Session::Load(m.options.model_path, session_options);
  if (!session.ok()) return session.status();
  m.session = std::move(*session);
  BatchOptions bo;
  bo.max_sequences = m.options.max_batch;
  bo.context = m.options.context;
  if (bo.context == 0) {  // else the model folder's own context (genai_config.json), if it says one
    auto context = ModelContextLength(model_dir.string());
    if (!context.ok()) return context.status();
    bo.context = *context;
  }
  bo.prefill_chunk = m.options.prefill_chunk;
  auto batch = BatchGenerator::Create(*m.session, bo);
  if (!batch.ok()) return batch.status();
  // The slots' KV blocks faulted in and pooled before the first request (BatchGenerator::Warm).
  if (absl::Status warm = (*batch)->Warm(); !warm.ok()) return warm;
  m.scheduler = std::make_unique<Scheduler>(std::move(*batch), &m.metrics, m.options.max_queue);
  m.ready = true;
  return absl::OkStatus();
}

void Server::Shutdown(bool cancel_running) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.shutdown_mu);
  if (m.shut_down) return;
  m.shut_down = true;
  m.http.stop();  // no new connections; handlers already running go on
  if (m.scheduler) m.scheduler->Shutdown(cancel_running);  // drains (or cancels) running requests
  if (m.listener.joinable()) m.listener.join();  // the HTTP threads finish their replies
  m.ready = false;
}

void Server::CancelRunning() {
  if (impl_->scheduler) impl_->scheduler->CancelRunning();
}

std::optional<ApiError> Server::Impl::Prompt(const GenerationRequest& r, std::vector<int32_t>* ids) const {
  std::string text = r.prompt_text;
  if (r.is_chat) {
    auto rendered = chat_format->Render(r.messages);
    if (!rendered.ok()) return BadRequest(absl::StrCat("the chat template failed: ", rendered.status().message()), "messages");
    text = *std::move(rendered);
  }
  if (r.prompt_is_ids) {
    *ids = r.prompt_ids;
    for (int32_t id : *ids) {
      if (id >= scheduler->vocab_size()) {
        return BadRequest(absl::StrCat("'prompt' token ", id, " is outside the vocabulary [0, ", scheduler->vocab_size(), ")"), "prompt");
      }
    }
  } else {
    auto encoded = tokenizer->TryEncode(text);
    if (!encoded.ok()) return BadRequest(std::string(encoded.status().message()));
    *ids = *std::move(encoded);
  }
  if (ids->empty()) return BadRequest("the prompt encodes to no tokens", r.is_chat ? "messages" : "prompt");
  const int64_t context = scheduler->context();
  if (context > 0 && static_cast<int64_t>(ids->size()) > context) {
    ApiError e = BadRequest(absl::StrCat("the prompt has ", ids->size(), " tokens; the context is ", context, " tokens"),
                            r.is_chat ? "messages" : "prompt");
    e.code = "context_length_exceeded";
    return e;
  }
  return std::nullopt;
}

json Server::Impl::Chunk(const std::string& id, int64_t created, bool chat, const json& choice, bool with_usage) const {
  json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
            {"model", model_name}, {"choices", json::array({choice})}};
  if (with_usage) c["usage"] = nullptr;  // the last chunk carries the numbers
  return c;
}

void Server::Impl::Generate(const GenerationRequest& r, httplib::Response& res) {
  std::vector<int32_t> ids;
  if (auto e = Prompt(r, &ids)) return ReplyError(res, *e);
  SequenceOptions so;
  so.sampling = r.sampling;
  if (!r.has_seed) so.sampling.seed = (uint64_t{std::random_device()()} << 32) ^ std::random_device()();
  so.stop_ids = stop_ids;
  const int64_t context = scheduler->context();
  so.max_new_tokens = r.max_tokens ? *r.max_tokens
                      : context > 0 ? static_cast<int>(std::max<int64_t>(1, context - static_cast<int64_t>(ids.size())))
                                    : kDefaultMaxTokensUnbounded;
  auto stream = scheduler->Submit(ids, so);
  if (!stream.ok()) return ReplyError(res, FromStatus(stream.status()));
  // Wait for a slot, so that a refusal still gets its own status.
  StreamEvent first = (*stream)->Next();
  if (first.kind == StreamEvent::Kind::kError) return ReplyError(res, FromStatus(first.error));

  auto gen = std::make_shared<Generation>(*tokenizer, r.stop);
  gen->prompt_tokens = static_cast<int64_t>(ids.size());
  const std::string id = absl::StrCat(r.is_chat ? "chatcmpl-" : "cmpl-", next_id.fetch_add(1));
  const int64_t created = UnixNow();

  if (!r.stream) {
    std::string text;
    for (;;) {
      StreamEvent e = (*stream)->Next();
      if (e.kind == StreamEvent::Kind::kError) return ReplyError(res, FromStatus(e.error));
      if (e.kind == StreamEvent::Kind::kToken) {
        text += gen->Token(e.token);
        if (gen->stop.stopped()) {
          (*stream)->Cancel();  // the rest of the sequence is not wanted
          text += gen->End(FinishReason::kStop);
          break;
        }
      } else if (e.kind == StreamEvent::Kind::kFinished) {
        text += gen->End(e.finish);
        break;
      }
    }
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", gen->finish_reason}};
    if (r.is_chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    return Reply(res, 200, {{"id", id}, {"object", r.is_chat ? "chat.completion" : "text_completion"}, {"created", created},
                            {"model", model_name}, {"choices", json::array({choice})}, {"usage", gen->Usage()}});
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  std::shared_ptr<RequestStream> s = *stream;
  const bool chat = r.is_chat, usage = r.include_usage;
  // The whole stream is written in one call of the provider: it returns when the sequence ends
  // or a write fails (the client went away), which cancels the sequence at the next step.
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, s, gen, id, created, chat, usage](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
        auto piece = [&](const std::string& text, const json& finish) {
          json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
          if (chat) {
            choice["delta"] = finish.is_null() ? json{{"content", text}} : json::object();
          } else {
            choice["text"] = text;
          }
          return SseEvent(Chunk(id, created, chat, choice, usage));
        };
        if (chat) {
          json choice = {{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
          if (!send(SseEvent(Chunk(id, created, chat, choice, usage)))) {
            s->Cancel();
            return false;
          }
        }
        for (;;) {
          StreamEvent e = s->Next();
          std::string text;
          bool done = false;
          if (e.kind == StreamEvent::Kind::kError) {
            // Headers are gone: the error travels as an event, as OpenAI's own streams do.
            send(SseEvent(FromStatus(e.error).ToJson()));
            sink.done();
            return true;
          }
          if (e.kind == StreamEvent::Kind::kToken) {
            text = gen->Token(e.token);
            if (gen->stop.stopped()) {
              s->Cancel();
              text += gen->End(FinishReason::kStop);
              done = true;
            }
          } else if (e.kind == StreamEvent::Kind::kFinished) {
            text = gen->End(e.finish);
            done = true;
          }
          if (!text.empty() && !send(piece(text, nullptr))) {
            s->Cancel();
            return false;
          }
          if (done) break;
        }
        bool ok = send(piece("", gen->finish_reason));
        if (ok && usage) {
          json last = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                       {"model", model_name}, {"choices", json::array()}, {"usage", gen->Usage()}};
          ok = send(SseEvent(last));
        }
        ok = ok && send(SseDone());
        sink.done();
        return ok;
      },
      [s](bool) { s->Cancel(); });  // a no-op once the sequence has ended
}

void Server::Impl::Routes() {
  http.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  http.set_keep_alive_timeout(5);
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!options.api_key.empty() && absl::StartsWith(req.path, "/v1/") &&
        req.get_header_value("Authorization") != "Bearer " + options.api_key) {
      ApiError e;
      e.status = 401;
      e.message = req.has_header("Authorization") ? "the API key is not right" : "this server needs an API key: Authorization: Bearer KEY";
      e.code = "invalid_api_key";
      ReplyError(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.CountRequest(RouteLabel(req.path), res.status);
  });
  // Statuses httplib sets itself (no route, a body too large, a malformed request) get an error object too.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    if (res.status == 404) {
      e.message = absl::StrCat("no route for ", req.method, " ", req.path);
      e.code = "not_found";
    } else if (res.status == 413) {
      e.message = "the request body is too large";
    } else {
      e.message = absl::StrCat("HTTP ", res.status);
      if (res.status >= 500) e.type = "server_error";
    }
    ReplyError(res, e);
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& x) {
      e.message = absl::StrCat("internal error: ", x.what());
    } catch (...) {
    }
    ReplyError(res, e);
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kChatPageHtml, "text/html; charset=utf-8"); });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    Reply(res, ready ? 200 : 503, {{"status", ready ? "ok" : "loading"}});
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  auto not_ready = [this](httplib::Response& res) {
    if (ready) return false;
    ApiError e;
    e.status = 503;
    e.type = "server_error";
    e.code = "model_loading";
    e.message = "the model is still loading";
    ReplyError(res, e);
    return true;
  };
  http.Get("/v1/models", [this, not_ready](const httplib::Request&, httplib::Response& res) {
    if (not_ready(res)) return;
    Reply(res, 200, {{"object", "list"},
                     {"data", json::array({{{"id", model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "oneinfer"}}})}});
  });
  http.Post("/v1/chat/completions", [this, not_ready](const httplib::Request& req, httplib::Response& res) {
    if (not_ready(res)) return;
    auto r = ParseChatRequest(req.body);
    if (auto* e = std::get_if<ApiError>(&r)) return ReplyError(res, *e);
    Generate(std::get<GenerationRequest>(r), res);
  });
  http.Post("/v1/completions", [this, not_ready](const httplib::Request& req, httplib::Response& res) {
    if (not_ready(res)) return;
    auto r = ParseCompletionRequest(req.body);
    if (auto* e = std::get_if<ApiError>(&r)) return ReplyError(res, *e);
    Generate(std::get<GenerationRequest>(r), res);
  });
}

}  // namespace oneinfer::serve
