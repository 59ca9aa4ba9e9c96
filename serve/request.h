// The bodies of POST /v1/chat/completions and /v1/completions, checked field by field: a
// request that parses is one the scheduler can run (the prompt's length against the context is
// checked once it is tokenized).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "oneinfer/chat.h"
#include "oneinfer/generator.h"
#include "serve/api_error.h"

namespace oneinfer::serve {

struct GenerationRequest {
  std::string model;
  // Chat: the conversation; completions: the prompt as text or as token ids.
  std::vector<ChatMessage> messages;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool is_chat = false;
  bool prompt_is_ids = false;

  std::optional<int> max_tokens;  // absent: until an end-of-turn id or the context
  SamplingOptions sampling;
  bool has_seed = false;
  std::vector<std::string> stop;  // stop strings (non-empty)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses a request body; ApiError (400) names the field that is missing, mistyped or out of range.
std::variant<GenerationRequest, ApiError> ParseChatRequest(std::string_view body);
std::variant<GenerationRequest, ApiError> ParseCompletionRequest(std::string_view body);

}  // namespace oneinfer::serve
