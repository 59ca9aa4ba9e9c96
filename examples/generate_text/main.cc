// generate_text: stream text from a Qwen3 graph (made by `oneinfer export-qwen3`).
//
//   generate_text MODEL.onnx TOKENIZER.json PROMPT [--max-new-tokens N] [--temperature T]
//                 [--top-k K] [--top-p P] [--seed S] [--stop ID]... [--threads N]
//
// Greedy by default; --temperature > 0 samples (with --top-k / --top-p / --seed). Generation
// ends after --max-new-tokens tokens or after a stop id (default: the tokenizer's <|im_end|>
// and <|endoftext|>; any --stop replaces them).
//
// Output: the text as it streams, each piece the moment the callback gets its token, between
// the lines "text:" and "end of text"; then
//   ids: a b c ...
//   generated N tokens in N callbacks, stopped by stop id|max tokens
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "oneinfer/tokenizer.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: generate_text MODEL.onnx TOKENIZER.json PROMPT [--max-new-tokens N] [--temperature T]\n"
               "                     [--top-k K] [--top-p P] [--seed S] [--stop ID]... [--threads N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Usage();
  const std::string model_path = argv[1], tokenizer_path = argv[2], prompt = argv[3];
  oneinfer::GenerateOptions options;
  oneinfer::SessionOptions session_options;
  std::vector<int32_t> stop_ids;
  for (int i = 4; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    if (flag == "--max-new-tokens") options.max_new_tokens = std::atoi(value);
    else if (flag == "--temperature") options.sampling.temperature = std::strtof(value, nullptr);
    else if (flag == "--top-k") options.sampling.top_k = std::atoi(value);
    else if (flag == "--top-p") options.sampling.top_p = std::strtof(value, nullptr);
    else if (flag == "--seed") options.sampling.seed = std::strtoull(value, nullptr, 10);
    else if (flag == "--stop") stop_ids.push_back(static_cast<int32_t>(std::atoi(value)));
    else if (flag == "--threads") session_options.num_threads = std::atoi(value);
    else return Usage();
  }

  auto tokenizer = oneinfer::Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "generate_text: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  auto session = oneinfer::Session::Load(model_path, session_options);
  if (!session.ok()) {
    std::fprintf(stderr, "generate_text: %s\n", session.status().ToString().c_str());
    return 1;
  }
  // The generator refers to the session (it does not own it): the session must outlive it.
  auto generator = oneinfer::Generator::Create(**session);
  if (!generator.ok()) {
    std::fprintf(stderr, "generate_text: %s\n", generator.status().ToString().c_str());
    return 1;
  }

  if (stop_ids.empty()) {
    for (const char* token : {"<|im_end|>", "<|endoftext|>"}) {
      if (auto id = (*tokenizer)->TokenId(token)) stop_ids.push_back(*id);
    }
  }
  options.stop_ids = stop_ids;

  auto prompt_ids = (*tokenizer)->TryEncode(prompt);
  if (!prompt_ids.ok()) {
    std::fprintf(stderr, "generate_text: %s\n", prompt_ids.status().ToString().c_str());
    return 1;
  }
  std::printf("prompt tokens: %zu, %s\ntext:\n", prompt_ids->size(),
              (*generator)->cached() ? "KV cache" : "no cache");

  // The stream decoder never splits a UTF-8 sequence: a piece may be empty until it completes.
  oneinfer::Tokenizer::StreamDecoder stream(**tokenizer, /*skip_special=*/true);
  int callbacks = 0;
  auto result = (*generator)->Generate(*prompt_ids, options, [&](int32_t id, const float*, int64_t) {
    ++callbacks;
    const std::string piece = stream.Push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;  // false would stop generation here
  });
  if (!result.ok()) {
    std::fprintf(stderr, "\ngenerate_text: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const std::string rest = stream.Flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\nend of text\nids:");
  for (int32_t id : result->generated_ids) std::printf(" %d", id);
  std::printf("\ngenerated %zu tokens in %d callbacks, stopped by %s\n", result->generated_ids.size(), callbacks,
              result->stopped_by_id ? "stop id" : "max tokens");
  std::fprintf(stderr, "prefill %.1f ms, decode %.2f ms/token\n", result->prefill_ms,
               result->decode_ms_per_token());
  return 0;
}
