// Fuzz target: bytes as a Jinja chat template (ChatTemplate::FromSource), rendered for a fixed
// conversation with a system turn, a tool call, a tool answer, tools and extra variables, as a
// tokenizer_config.json from a model hub would have it rendered. Every outcome must be a Status.
#include <cstdint>
#include <string_view>

#include "oneinfer/chat.h"

namespace {

constexpr std::string_view kMessages = R"([
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "Weather in Paris? 你好 🙂"},
  {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
  {"role": "tool", "content": "{\"temp\": 21.5}"},
  {"role": "assistant", "content": [{"type": "text", "text": "21.5 C"}]},
  {"role": "user", "content": "Thanks"}
])";
constexpr std::string_view kTools = R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Current weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])";
constexpr std::string_view kExtra = R"({"enable_thinking": false, "date_string": "01 Dec 2026"})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  // An Internal status is an exception the template code did not expect: a bug, like a crash.
  auto tmpl = oneinfer::ChatTemplate::FromSource(source, "<s>", "</s>");
  if (!tmpl.ok()) {
    if (tmpl.status().code() == absl::StatusCode::kInternal) __builtin_trap();
    return 0;
  }
  for (bool tools : {true, false}) {
    auto text = (*tmpl)->RenderJson(kMessages, /*add_generation_prompt=*/tools, tools ? kTools : "", tools ? kExtra : "");
    if (!text.ok() && text.status().code() == absl::StatusCode::kInternal) __builtin_trap();
  }
  return 0;
}
