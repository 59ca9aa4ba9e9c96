// Chat formatting: a conversation turned into the prompt text a chat model was trained on.
#pragma once

#include <string>
#include <vector>

#include "oneinfer/export.h"

namespace oneinfer {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

// The ChatML form Qwen models use: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then
// "<|im_start|>assistant\n" when add_generation_prompt (the model's turn to answer).
ONEINFER_API std::string FormatChatML(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

}  // namespace oneinfer
