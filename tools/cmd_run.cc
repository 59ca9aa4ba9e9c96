// oneinfer run: generate text with a causal-LM graph (input_ids [+ past_kv] -> logits [+ present_kv]).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "oneinfer/chat.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "oneinfer/tokenizer.h"
#include "tools/cli.h"
#include "tools/env_options.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr const char* kHelp =
    "usage: oneinfer run MODEL.onnx (--prompt TEXT | --prompt-ids 1,2,3) [options]\n"
    "\n"
    "  --tokenizer PATH       tokenizer.json (default: beside the model)\n"
    "  -n, --max-new-tokens N tokens to generate (default 32)\n"
    "  --temperature T        0 = greedy (default); --top-k K, --top-p P, --seed S\n"
    "  --chat                 send the prompt as a user turn in the model's chat template (the\n"
    "                         chat_template of tokenizer_config.json beside the model or the\n"
    "                         tokenizer); Qwen's ChatML when there is none\n"
    "  --threads N            threads for the kernels (default: all cores)\n"
    "  --prefill-chunk N      a cached model takes the prompt N tokens at a time (default 256;\n"
    "                         0 = all at once): memory grows linearly with the prompt\n"
    "  --matmul float|int8    constant-weight MatMuls in float32 (default) or dynamic A8W8\n"
    "  --json                 print one JSON object at the end instead of streaming text:\n"
    "                         prompt (the text encoded), prompt_tokens, generated_ids, text, load_ms,\n"
    "                         prefill_ms, decode_ms_per_token (the mean), decode_ms_median,\n"
    "                         decode_step_ms (each step), tokens_per_s\n"
    "  --timeout SECONDS      stop generating past this time from the start (exit 1); Ctrl-C\n"
    "                         stops it too (exit 130), also in the middle of a prompt's prefill.\n"
    "  --dump-logits FILE     write the float32 logits of the last position of every step\n"
    "                         (raw little-endian, one row of vocab floats per step)\n"
    "\n"
    "Generation stops at --max-new-tokens or at an end-of-sequence id: those of generation_config.json\n"
    "and genai_config.json beside the model (else the tokenizer's <|im_end|> and <|endoftext|>), and\n"
    "the eos_token of tokenizer_config.json, and at the model's context: genai_config.json's\n"
    "model.context_length, the exported positions, or the end of the graph's rotary tables\n"
    "(a genai_config.json context longer than those tables is refused at load).\n";

bool ParseInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return *end == '\0';
}
bool ParseFloat(const std::string& s, float* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtof(s.c_str(), &end);
  return *end == '\0';
}
}  // namespace

int CmdRun(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp << EnvironmentHelp();
    return 0;
  }
  std::string prompt, prompt_ids, tok_path, n_s, temp_s, topk_s, topp_s, seed_s, threads_s, dump;
  const bool has_prompt = args.Take("--prompt", &prompt);
  args.Take("--prompt-ids", &prompt_ids);
  args.Take("--tokenizer", &tok_path);
  if (!args.Take("--max-new-tokens", &n_s)) args.Take("-n", &n_s);
  args.Take("--temperature", &temp_s);
  args.Take("--top-k", &topk_s);
  args.Take("--top-p", &topp_s);
  args.Take("--seed", &seed_s);
  args.Take("--threads", &threads_s);
  std::string chunk_s;
  args.Take("--prefill-chunk", &chunk_s);
  args.Take("--dump-logits", &dump);
  std::string timeout;
  args.Take("--timeout", &timeout);
  std::string matmul;
  args.Take("--matmul", &matmul);
  const bool chat = args.TakeFlag("--chat");
  const bool as_json = args.TakeFlag("--json");
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("run needs exactly one MODEL.onnx (see oneinfer run --help)");
  if (has_prompt == !prompt_ids.empty()) return Fail("run needs exactly one of --prompt and --prompt-ids");
  // The deadline and Ctrl-C stop a forward pass between nodes (GenerateOptions::run), and the
  // token callback below stops generation between tokens.
  RunOptions run;
  if (auto s = StopRunOnTimeoutOrInterrupt(timeout, &run); !s.ok()) return Fail(s);
  absl::Status stopped;

  GenerateOptions gen;
  gen.run = &run;
  SessionOptions sopts;
  if (auto s = ParseMatMulFlag(matmul, &sopts.matmul); !s.ok()) return Fail(s);
  if (auto s = ApplySessionEnvironment(&sopts); !s.ok()) return Fail(s);
  int64_t v = 0;
  if (!n_s.empty()) {
    if (!ParseInt(n_s, &v) || v < 0) return Fail(absl::StrCat("--max-new-tokens '", n_s, "' is not a count"));
    gen.max_new_tokens = static_cast<int>(v);
  }
  if (!temp_s.empty() && (!ParseFloat(temp_s, &gen.sampling.temperature) || gen.sampling.temperature < 0)) {
    return Fail(absl::StrCat("--temperature '", temp_s, "' is not a non-negative number"));
  }
  if (!chunk_s.empty()) {
    if (!ParseInt(chunk_s, &v) || v < 0 || v > INT32_MAX) return Fail(absl::StrCat("--prefill-chunk '", chunk_s, "' is not a count"));
    gen.prefill_chunk = static_cast<int>(v);
  }
  if (!topk_s.empty()) {
    if (!ParseInt(topk_s, &v) || v < 0) return Fail(absl::StrCat("--top-k '", topk_s, "' is not a count"));
    gen.sampling.top_k = static_cast<int>(v);
  }
  if (!topp_s.empty() && (!ParseFloat(topp_s, &gen.sampling.top_p) || gen.sampling.top_p <= 0 || gen.sampling.top_p > 1)) {
    return Fail(absl::StrCat("--top-p '", topp_s, "' must be in (0, 1]"));
  }
  if (!seed_s.empty()) {
    if (!ParseInt(seed_s, &v)) return Fail(absl::StrCat("--seed '", seed_s, "' is not a number"));
    gen.sampling.seed = static_cast<uint64_t>(v);
  }
  if (!threads_s.empty()) {
    if (!ParseInt(threads_s, &v) || v < 1) return Fail(absl::StrCat("--threads '", threads_s, "' is not a count"));
    sopts.num_threads = static_cast<int>(v);
  }

  const fs::path model_dir = fs::absolute(pos[0]).parent_path();
  std::unique_ptr<Tokenizer> tok;
  if (tok_path.empty() && fs::exists(model_dir / "tokenizer.json")) tok_path = (model_dir / "tokenizer.json").string();
  if (!tok_path.empty()) {
    auto t = Tokenizer::FromFile(tok_path);
    if (!t.ok()) return Fail(t.status());
    tok = std::move(*t);
  } else if (has_prompt) {
    return Fail(absl::StrCat("no tokenizer.json beside the model (", model_dir.string(), "); give --tokenizer or --prompt-ids"));
  }

  std::vector<int32_t> ids;
  if (has_prompt) {
    if (chat) {
      auto format = ModelChatFormat::Find(model_dir.string(), tok_path);
      if (!format.ok()) return Fail(format.status());
      auto text = (*format)->Render({{"user", prompt}});
      if (!text.ok()) return Fail(text.status());
      prompt = std::move(*text);
    }
    auto encoded = tok->TryEncode(prompt);
    if (!encoded.ok()) return Fail(encoded.status());
    ids = *std::move(encoded);
  } else {
    std::string list = prompt_ids;
    for (char& c : list) if (c == ',') c = ' ';
    std::istringstream is(list);
    std::string w;
    while (is >> w) {
      if (!ParseInt(w, &v) || v < 0 || v > INT32_MAX) return Fail(absl::StrCat("--prompt-ids: '", w, "' is not a token id"));
      ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) return Fail("--prompt-ids is empty");
    if (tok) {
      for (int32_t id : ids) {
        if (id >= tok->vocab_size()) return Fail(absl::StrCat("--prompt-ids: ", id, " is outside the tokenizer's vocabulary (", tok->vocab_size(), ")"));
      }
    }
  }

  auto stop_ids = ModelStopIds(model_dir.string(), tok.get());
  if (!stop_ids.ok()) return Fail(stop_ids.status());
  gen.stop_ids = *std::move(stop_ids);

  const auto load_start = std::chrono::steady_clock::now();
  auto session = Session::Load(pos[0], sopts);
  if (!session.ok()) return Fail(session.status());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  auto generator = Generator::Create(**session);
  if (!generator.ok()) return Fail(generator.status());
  auto context = ModelContextLength(model_dir.string());
  if (!context.ok()) return Fail(context.status());
  if (*context > 0) {
    if (absl::Status s = (*generator)->LimitContext(*context, "genai_config.json's model.context_length"); !s.ok()) return Fail(s);
  }

  std::ofstream dump_f;
  if (!dump.empty()) {
    dump_f.open(dump, std::ios::binary | std::ios::trunc);
    if (!dump_f) return Fail(absl::StrCat("cannot write '", dump, "'"));
  }
  std::optional<Tokenizer::StreamDecoder> stream;
  if (tok) stream.emplace(*tok, /*skip_special=*/true);
  std::string text;
  auto result = (*generator)->Generate(ids, gen, [&](int32_t id, const float* logits, int64_t vocab) {
    if (dump_f) dump_f.write(reinterpret_cast<const char*>(logits), static_cast<std::streamsize>(vocab * sizeof(float)));
    const std::string piece = stream ? stream->Push(id) : absl::StrCat(id, " ");
    text += piece;
    if (!as_json) std::cout << piece << std::flush;
    if (run.cancel.load()) stopped = absl::CancelledError("generation was cancelled");
    else if (std::chrono::steady_clock::now() >= run.deadline) stopped = absl::DeadlineExceededError("generation passed its deadline");
    return stopped.ok();
  });
  if (!result.ok()) return FailRun(result.status(), timeout);
  if (!stopped.ok()) {
    if (!as_json) std::cout << "\n";
    return FailRun(absl::Status(stopped.code(), absl::StrCat(stopped.message(), " after ", result->generated_ids.size(),
                                                             " generated tokens")), timeout);
  }
  if (stream) {
    const std::string rest = stream->Flush();
    text += rest;
    if (!as_json) std::cout << rest;
  }
  const double tps = result->decode_ms > 0 ? 1000.0 * result->decode_steps / result->decode_ms : 0;
  if (as_json) {
    json j = {{"prompt", prompt}, {"prompt_tokens", result->prompt_tokens}, {"generated_ids", result->generated_ids},
              {"text", text}, {"prefill_ms", result->prefill_ms},
              {"decode_ms_per_token", result->decode_ms_per_token()},
              {"decode_ms_median", result->decode_ms_median()}, {"decode_step_ms", result->decode_step_ms},
              {"tokens_per_s", tps},
              {"cached", (*generator)->cached()}, {"load_ms", load_ms}};
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";  // a --prompt need not be UTF-8
  } else {
    std::cout << "\n";
    std::cerr << "prompt tokens " << result->prompt_tokens << ", generated " << result->generated_ids.size()
              << ", prefill " << result->prefill_ms << " ms, decode " << result->decode_ms_per_token()
              << " ms/token (" << tps << " tokens/s)" << ((*generator)->cached() ? ", KV cache" : ", no cache") << "\n";
  }
  return 0;
}

}  // namespace oneinfer::cli
