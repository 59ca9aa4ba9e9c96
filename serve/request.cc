#include "serve/request.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace oneinfer::serve {
namespace {

using json = nlohmann::json;
using Result = std::variant<GenerationRequest, ApiError>;

constexpr size_t kMaxStopStrings = 16;

// The JSON type of a value in an error message.
std::string TypeName(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return absl::StrCat("a", v.is_array() || v.is_object() ? "n " : " ", v.type_name());
}

ApiError Mistyped(const std::string& field, const std::string& want, const json& v) {
  return BadRequest(absl::StrCat("'", field, "' must be ", want, ", not ", TypeName(v)), field);
}

// A field that is present and not null.
const json* Field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> ReadNumber(const json& body, const char* name, double lo, double hi, double* out) {
  const json* v = Field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return Mistyped(name, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) return BadRequest(absl::StrCat("'", name, "' must be in [", lo, ", ", hi, "]"), name);
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const json& body, const char* name, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  const json* v = Field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return Mistyped(name, "an integer", *v);
  if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(hi) : (v->get<int64_t>() < lo || v->get<int64_t>() > hi)) {
    return BadRequest(absl::StrCat("'", name, "' must be in [", lo, ", ", hi, "], not ", v->dump()), name);
  }
  *out = v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
  return std::nullopt;
}

// The fields chat and completions share: sampling, length, stop strings, streaming.
std::optional<ApiError> ReadCommon(const json& body, GenerationRequest* r) {
  if (const json* m = Field(body, "model")) {
    if (!m->is_string()) return Mistyped("model", "a string", *m);
    r->model = m->get<std::string>();
  }
  double t = 1.0, p = 1.0;
  if (auto e = ReadNumber(body, "temperature", 0, 2, &t)) return e;
  if (auto e = ReadNumber(body, "top_p", 0, 1, &p)) return e;
  if (Field(body, "top_p") && p <= 0) return BadRequest("'top_p' must be in (0, 1]", "top_p");
  r->sampling.temperature = static_cast<float>(t);
  r->sampling.top_p = static_cast<float>(p);
  std::optional<int64_t> i;
  if (auto e = ReadInt(body, "top_k", 0, INT32_MAX, &i)) return e;
  if (i) r->sampling.top_k = static_cast<int>(*i);
  i.reset();
  if (auto e = ReadInt(body, "seed", INT64_MIN, INT64_MAX, &i)) return e;
  if (i) {
    r->sampling.seed = static_cast<uint64_t>(*i);
    r->has_seed = true;
  }
  // max_completion_tokens is the newer name; either may be given, the newer wins.
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    i.reset();
    if (auto e = ReadInt(body, name, INT64_MIN, INT64_MAX, &i)) return e;
    if (!i) continue;
    if (*i < 1) return BadRequest(absl::StrCat("'", name, "' must be at least 1, not ", *i), name);
    r->max_tokens = static_cast<int>(std::min<int64_t>(*i, INT32_MAX));
  }
  if (const json* n = Field(body, "n")) {
    if (!n->is_number_integer()) return Mistyped("n", "an integer", *n);
    if (n->get<int64_t>() != 1) return BadRequest("only 'n': 1 is supported", "n");
  }
  if (const json* s = Field(body, "stop")) {
    if (s->is_string()) {
      if (!s->get<std::string>().empty()) r->stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > kMaxStopStrings) return BadRequest(absl::StrCat("'stop' has more than ", kMaxStopStrings, " strings"), "stop");
      for (const json& x : *s) {
        if (!x.is_string()) return Mistyped("stop", "a string or a list of strings", x);
        if (!x.get<std::string>().empty()) r->stop.push_back(x.get<std::string>());
      }
    } else {
      return Mistyped("stop", "a string or a list of strings", *s);
    }
  }
  if (const json* s = Field(body, "stream")) {
    if (!s->is_boolean()) return Mistyped("stream", "a boolean", *s);
    r->stream = s->get<bool>();
  }
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return Mistyped("stream_options", "an object", *so);
    if (const json* u = Field(*so, "include_usage")) {
      if (!u->is_boolean()) return Mistyped("stream_options.include_usage", "a boolean", *u);
      r->include_usage = u->get<bool>();
    }
  }
  return std::nullopt;
}

std::variant<json, ApiError> ParseBody(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadRequest("the request body is not valid JSON");
  if (!j.is_object()) return BadRequest(absl::StrCat("the request body must be a JSON object, not ", TypeName(j)));
  return j;
}

// A message's content: a string, or a list of text parts joined (the only kind a text model reads).
std::optional<ApiError> ReadContent(const json& c, size_t index, std::string* out) {
  const std::string field = absl::StrCat("messages[", index, "].content");
  if (c.is_null()) return std::nullopt;  // an assistant turn that only called tools
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return Mistyped(field, "a string or a list of content parts", c);
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string()) {
      return BadRequest(absl::StrCat("'", field, "': only parts {\"type\": \"text\", \"text\": ...} are supported"), field);
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

std::variant<GenerationRequest, ApiError> ParseChatRequest(std::string_view text) {
  auto parsed = ParseBody(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& body = std::get<json>(parsed);
  GenerationRequest r;
  r.is_chat = true;
  const json* messages = Field(body, "messages");
  if (!messages) return BadRequest("'messages' is required", "messages");
  if (!messages->is_array()) return Mistyped("messages", "a list", *messages);
  if (messages->empty()) return BadRequest("'messages' is empty", "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    if (!m.is_object()) return Mistyped(absl::StrCat("messages[", i, "]"), "an object", m);
    auto role = m.find("role");
    if (role == m.end()) return BadRequest(absl::StrCat("'messages[", i, "].role' is required"), "messages");
    if (!role->is_string()) return Mistyped(absl::StrCat("messages[", i, "].role"), "a string", *role);
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for the system turn
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
      return BadRequest(absl::StrCat("'messages[", i, "].role' must be system, developer, user, assistant or tool, not '",
                                     msg.role, "'"), "messages");
    }
    auto content = m.find("content");
    if (content == m.end() && msg.role != "assistant") {
      return BadRequest(absl::StrCat("'messages[", i, "].content' is required"), "messages");
    }
    if (content != m.end()) {
      if (auto e = ReadContent(*content, i, &msg.content)) return *e;
    }
    r.messages.push_back(std::move(msg));
  }
  if (auto e = ReadCommon(body, &r)) return *e;
  return r;
}

std::variant<GenerationRequest, ApiError> ParseCompletionRequest(std::string_view text) {
  auto parsed = ParseBody(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& body = std::get<json>(parsed);
  GenerationRequest r;
  const json* prompt = Field(body, "prompt");
  if (!prompt) return BadRequest("'prompt' is required", "prompt");
  // A list of one prompt is the same as the prompt; several prompts in one request are not served.
  const json* p = prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    r.prompt_is_ids = true;
    for (const json& id : *p) {
      if (!id.is_number_integer() || (id.is_number_unsigned() ? id.get<uint64_t>() > INT32_MAX : id.get<int64_t>() < 0) ||
          id.get<int64_t>() > INT32_MAX) {
        return BadRequest(absl::StrCat("'prompt' token ", id.dump(), " is not a token id"), "prompt");
      }
      r.prompt_ids.push_back(id.get<int32_t>());
    }
  } else if (p->is_array() && p->size() > 1) {
    return BadRequest("'prompt' holds several prompts; send one per request", "prompt");
  } else {
    return Mistyped("prompt", "a string or a list of token ids", *p);
  }
  if (r.prompt_is_ids ? r.prompt_ids.empty() : r.prompt_text.empty()) return BadRequest("'prompt' is empty", "prompt");
  for (const char* unsupported : {"echo", "suffix"}) {
    const json* v = Field(body, unsupported);
    if (v && !(v->is_boolean() && !v->get<bool>()) && !(v->is_string() && v->get<std::string>().empty())) {
      return BadRequest(absl::StrCat("'", unsupported, "' is not supported"), unsupported);
    }
  }
  if (auto e = ReadCommon(body, &r)) return *e;
  return r;
}

}  // namespace oneinfer::serve
