#include "serve/sse.h"

namespace oneinfer::serve {

std::string SseEvent(const nlohmann::json& data) {
  // Invalid UTF-8 cannot reach here (StreamDecoder emits U+FFFD), but replace rather than throw.
  return "data: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string SseDone() { return "data: [DONE]\n\n"; }

}  // namespace oneinfer::serve
