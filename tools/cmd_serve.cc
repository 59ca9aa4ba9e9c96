// oneinfer serve: flags -> ServeOptions, then the server (serve/) until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "serve/server.h"
#include "tools/cli.h"
#include "tools/env_options.h"

namespace oneinfer::cli {

namespace {
constexpr const char* kHelp =
    "usage: oneinfer serve MODEL.onnx [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server with continuous batching (docs/serve.md):\n"
    "POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics,\n"
    "and a chat page at GET /.\n"
    "\n"
    "  --host ADDR            address to listen on (default 127.0.0.1)\n"
    "  --port N               TCP port (default 8080; 0 = a free port, printed on stderr)\n"
    "  --tokenizer PATH       tokenizer.json (default: beside the model)\n"
    "  --model-name NAME      the model's id in /v1/models and replies (default: the model's folder)\n"
    "  --threads N            threads for the kernels (default: all cores)\n"
    "  --matmul float|int8    constant-weight MatMuls in float32 (default) or dynamic A8W8\n"
    "  --max-batch N          sequences decoded together, one KV cache slot each (default 8, at most 256)\n"
    "  --context N            positions per sequence, prompt and reply (default: the model's)\n"
    "  --prefill-chunk N      long prompts are prefilled N tokens per step (default 256)\n"
    "  --max-queue N          requests that may wait for a slot; more get 429 (default 64, at most\n"
    "                         1000: each waiting request holds an HTTP thread)\n"
    "  --api-key KEY          require 'Authorization: Bearer KEY' on /v1/* (default: none;\n"
    "                         also read from ONEINFER_API_KEY)\n"
    "\n"
    "SIGINT / SIGTERM: stop accepting, let running requests finish, exit 0; a second signal ends\n"
    "the running requests at the next step.\n";

bool ParseCount(const std::string& s, int64_t lo, int64_t hi, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return *end == '\0' && *v >= lo && *v <= hi;
}
}  // namespace

int CmdServe(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp << EnvironmentHelp();
    return 0;
  }
  serve::ServeOptions o;
  std::string port, threads, matmul, max_batch, context, chunk, max_queue;
  args.Take("--host", &o.host);
  args.Take("--port", &port);
  args.Take("--tokenizer", &o.tokenizer_path);
  args.Take("--model-name", &o.model_name);
  args.Take("--threads", &threads);
  args.Take("--matmul", &matmul);
  args.Take("--max-batch", &max_batch);
  args.Take("--context", &context);
  args.Take("--prefill-chunk", &chunk);
  args.Take("--max-queue", &max_queue);
  if (!args.Take("--api-key", &o.api_key)) {
    if (const char* k = std::getenv("ONEINFER_API_KEY")) o.api_key = k;
  }
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("serve needs exactly one MODEL.onnx (see oneinfer serve --help)");
  o.model_path = pos[0];

  int64_t v = 0;
  struct IntFlag {
    const char* name;
    const std::string& value;
    int64_t lo, hi;
    std::function<void(int64_t)> set;
  };
  const IntFlag flags[] = {
      {"--port", port, 0, 65535, [&](int64_t x) { o.port = static_cast<int>(x); }},
      {"--threads", threads, 1, 4096, [&](int64_t x) { o.session.num_threads = static_cast<int>(x); }},
      {"--max-batch", max_batch, 1, 256, [&](int64_t x) { o.max_batch = static_cast<int>(x); }},
      {"--context", context, 1, INT32_MAX, [&](int64_t x) { o.context = x; }},
      {"--prefill-chunk", chunk, 0, INT32_MAX, [&](int64_t x) { o.prefill_chunk = static_cast<int>(x); }},
      {"--max-queue", max_queue, 0, 1000, [&](int64_t x) { o.max_queue = static_cast<int>(x); }},
  };
  for (const IntFlag& f : flags) {
    if (f.value.empty()) continue;
    if (!ParseCount(f.value, f.lo, f.hi, &v)) return Fail(absl::StrCat(f.name, " '", f.value, "' must be a whole number in [", f.lo, ", ", f.hi, "]"));
    f.set(v);
  }
  if (auto s = ParseMatMulFlag(matmul, &o.session.matmul); !s.ok()) return Fail(s);
  if (auto s = ApplySessionEnvironment(&o.session); !s.ok()) return Fail(s);

  // Every thread the server starts inherits this mask, so the signals reach only sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not the end of the server

  serve::Server server(o);
  if (auto s = server.Listen(); !s.ok()) return Fail(s);
  std::cerr << "oneinfer serve: listening on http://" << o.host << ":" << server.port() << std::endl;
  // Load while already answering, so /health can say 503 until the model is ready.
  std::atomic<int> loaded{0};  // 1 ok, -1 failed
  absl::Status load_status;
  std::thread loader([&] {
    load_status = server.Load();
    loaded = load_status.ok() ? 1 : -1;
    if (load_status.ok()) std::cerr << "oneinfer serve: model loaded; ready" << std::endl;
    else kill(getpid(), SIGTERM);  // wakes sigwait
  });
  int sig = 0;
  sigwait(&stop_signals, &sig);
  loader.join();  // a model still loading finishes first (loading does not stop between nodes)
  if (loaded < 0) {
    server.Shutdown(/*cancel_running=*/true);
    return Fail(load_status);
  }
  std::cerr << "oneinfer serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << ": stopped accepting; finishing the running requests (a second signal cancels them)" << std::endl;
  std::atomic<bool> drained{false};
  std::thread second([&] {
    int again = 0;
    sigwait(&stop_signals, &again);
    if (!drained) server.CancelRunning();
  });
  server.Shutdown(/*cancel_running=*/false);
  drained = true;
  kill(getpid(), SIGTERM);  // wakes the waiting thread when no second signal came (still blocked, so harmless)
  second.join();
  std::cerr << "oneinfer serve: stopped" << std::endl;
  return 0;
}

}  // namespace oneinfer::cli
