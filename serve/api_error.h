// An OpenAI error object with its HTTP status: {"error": {"message", "type", "code"}}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace oneinfer::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;  // "" is written as null
  nlohmann::json param = nullptr;

  nlohmann::json ToJson() const;
};

ApiError BadRequest(std::string message, std::string param = "");
// The status a library error becomes: InvalidArgument -> 400, ResourceExhausted -> 429, the rest 500.
ApiError FromStatus(const absl::Status& s);

}  // namespace oneinfer::serve
