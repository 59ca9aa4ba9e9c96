#include "oneinfer/chat.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "llm/jinja.h"

namespace oneinfer {

using ojson = nlohmann::ordered_json;

std::string FormatChatML(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

struct ChatTemplate::Impl {
  jinja::Template main;
  std::optional<jinja::Template> tool_use;  // the "tool_use" entry of a named-template list
  ojson special_tokens = ojson::object();  // bos_token, eos_token, ... as strings
  std::string bos, eos;
};

ChatTemplate::ChatTemplate() : impl_(std::make_unique<Impl>()) {}
ChatTemplate::~ChatTemplate() = default;

namespace {

constexpr size_t kMaxTemplateBytes = 4 << 20;

// A special token as tokenizer_config.json writes it: a string, or an AddedToken object.
std::optional<std::string> TokenText(const ojson& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return std::nullopt;
}

absl::StatusOr<jinja::Template> ParseTemplate(std::string_view source, const std::string& what) {
  if (source.size() > kMaxTemplateBytes) return absl::InvalidArgumentError(absl::StrCat(what, ": the chat template is larger than 4 MiB"));
  auto t = jinja::Template::Parse(source);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.status().message()));
  return t;
}

}  // namespace

absl::Status ChatTemplate::LoadConfig(std::string_view json, const std::string& dir) {
  Impl& impl = *impl_;
  ojson config;
  try {
    config = ojson::parse(json);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer_config.json is not valid JSON: ", e.what()));
  }
  if (!config.is_object()) return absl::InvalidArgumentError("tokenizer_config.json is not a JSON object");
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    if (auto t = TokenText(config[key])) impl.special_tokens[key] = *t;
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    ojson extra = ojson::array();
    for (const auto& t : config["additional_special_tokens"]) {
      if (auto s = TokenText(t)) extra.push_back(*s);
    }
    impl.special_tokens["additional_special_tokens"] = extra;
  }
  impl.bos = impl.special_tokens.value("bos_token", "");
  impl.eos = impl.special_tokens.value("eos_token", "");

  std::string source;
  const ojson tmpl = config.contains("chat_template") ? config["chat_template"] : ojson();
  if (tmpl.is_string()) {
    source = tmpl.get<std::string>();
  } else if (tmpl.is_array()) {
    bool found = false;
    for (const auto& entry : tmpl) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
          !entry["template"].is_string()) {
        return absl::InvalidArgumentError("tokenizer_config.json: chat_template list entries must be {\"name\", \"template\"} strings");
      }
      const std::string name = entry["name"].get<std::string>();
      if (name == "default") {
        source = entry["template"].get<std::string>();
        found = true;
      } else if (name == "tool_use") {
        auto t = ParseTemplate(entry["template"].get<std::string>(), "chat_template 'tool_use'");
        if (!t.ok()) return t.status();
        impl.tool_use = std::move(*t);
      }
    }
    if (!found) return absl::InvalidArgumentError("tokenizer_config.json: chat_template list has no template named 'default'");
  } else if (!tmpl.is_null()) {
    return absl::InvalidArgumentError("tokenizer_config.json: chat_template must be a string or a list of named templates");
  } else if (!dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "chat_template.jinja")) {
    std::ifstream f(std::filesystem::path(dir) / "chat_template.jinja", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    source = ss.str();
  } else {
    return absl::NotFoundError("tokenizer_config.json has no chat_template (and there is no chat_template.jinja beside it)");
  }
  auto t = ParseTemplate(source, "chat_template");
  if (!t.ok()) return t.status();
  impl.main = std::move(*t);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromTokenizerConfigJson(std::string_view json) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  if (auto s = t->LoadConfig(json, ""); !s.ok()) return s;
  return t;
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromTokenizerConfig(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (auto s = t->LoadConfig(ss.str(), dir.empty() ? "." : dir); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromSource(std::string_view source, const std::string& bos_token,
                                                                       const std::string& eos_token) {
  auto parsed = ParseTemplate(source, "chat_template");
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->impl_->main = std::move(*parsed);
  t->impl_->bos = bos_token;
  t->impl_->eos = eos_token;
  if (!bos_token.empty()) t->impl_->special_tokens["bos_token"] = bos_token;
  if (!eos_token.empty()) t->impl_->special_tokens["eos_token"] = eos_token;
  return t;
}

const std::string& ChatTemplate::bos_token() const { return impl_->bos; }
const std::string& ChatTemplate::eos_token() const { return impl_->eos; }

absl::StatusOr<std::string> ChatTemplate::RenderJson(std::string_view messages_json, bool add_generation_prompt,
                                                     std::string_view tools_json, std::string_view extra_json) const {
  ojson vars = impl_->special_tokens;
  auto parse = [](std::string_view text, const char* what, ojson* out) -> absl::Status {
    try {
      *out = ojson::parse(text);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON: ", e.what()));
    }
    return absl::OkStatus();
  };
  ojson messages, tools, extra = ojson::object();
  if (auto s = parse(messages_json, "messages", &messages); !s.ok()) return s;
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a JSON list");
  if (!tools_json.empty()) {
    if (auto s = parse(tools_json, "tools", &tools); !s.ok()) return s;
    if (!tools.is_array() && !tools.is_null()) return absl::InvalidArgumentError("tools must be a JSON list");
  }
  if (!extra_json.empty()) {
    if (auto s = parse(extra_json, "extra variables", &extra); !s.ok()) return s;
    if (!extra.is_object()) return absl::InvalidArgumentError("extra variables must be a JSON object");
  }
  // As transformers' apply_chat_template: messages, tools (None when absent), documents,
  // add_generation_prompt, the special tokens, then the caller's variables.
  vars["messages"] = messages;
  vars["tools"] = tools;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [k, v] : extra.items()) vars[k] = v;
  const jinja::Template& t = (impl_->tool_use && tools.is_array() && !tools.empty()) ? *impl_->tool_use : impl_->main;
  return t.Render(vars);
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  ojson list = ojson::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return RenderJson(list.dump(), add_generation_prompt);
}

}  // namespace oneinfer
