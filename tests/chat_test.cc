#include <gtest/gtest.h>

#include "oneinfer/chat.h"

namespace oneinfer {
namespace {

TEST(Chat, ChatMLTurnsAndTheGenerationPrompt) {
  const std::vector<ChatMessage> conversation = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."},
                                                 {"user", "Why?"}};
  EXPECT_EQ(FormatChatML(conversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(FormatChatML({{"user", "x"}}, /*add_generation_prompt=*/false), "<|im_start|>user\nx<|im_end|>\n");
  EXPECT_EQ(FormatChatML({}), "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace oneinfer
