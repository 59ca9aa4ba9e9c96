#include "serve/api_error.h"

namespace oneinfer::serve {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", param}};
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", e}};
}

ApiError BadRequest(std::string message, std::string param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  if (!param.empty()) e.param = param;
  return e;
}

ApiError FromStatus(const absl::Status& s) {
  ApiError e;
  e.message = std::string(s.message());
  if (absl::IsInvalidArgument(s) || absl::IsOutOfRange(s)) {
    e.status = 400;
  } else if (absl::IsResourceExhausted(s)) {
    e.status = 429;
    e.type = "rate_limit_error";
    e.code = "queue_full";
  } else if (absl::IsUnavailable(s)) {
    e.status = 503;
    e.type = "server_error";
    e.code = "unavailable";
  } else {
    e.status = 500;
    e.type = "server_error";
  }
  return e;
}

}  // namespace oneinfer::serve
