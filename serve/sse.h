// Server-sent events as OpenAI streams them: one "data: JSON" event per chunk, "data: [DONE]" last.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace oneinfer::serve {

// One event; the JSON is written on one line (a newline inside a string is escaped), so the
// event cannot be split by its own content.
std::string SseEvent(const nlohmann::json& data);
std::string SseDone();

}  // namespace oneinfer::serve
