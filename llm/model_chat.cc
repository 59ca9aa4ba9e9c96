// The chat format and end-of-turn ids of a model folder: one implementation for `oneinfer run
// --chat` and `oneinfer serve`, so both send a model exactly the same prompt.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "oneinfer/chat.h"
#include "oneinfer/tokenizer.h"

namespace oneinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// model_dir/name parsed into *j: false when there is no such file, an error naming the file
// when it does not parse.
absl::StatusOr<bool> ReadConfig(const fs::path& model_dir, const char* name, json* j) {
  std::error_code ec;
  if (!fs::exists(model_dir / name, ec)) return false;
  try {
    std::ifstream f(model_dir / name);
    *j = json::parse(f);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", e.what()));
  }
  return true;
}

}  // namespace

ModelChatFormat::ModelChatFormat() = default;
ModelChatFormat::~ModelChatFormat() = default;

absl::StatusOr<std::unique_ptr<ModelChatFormat>> ModelChatFormat::Find(const std::string& model_dir,
                                                                       const std::string& tokenizer_path) {
  std::unique_ptr<ModelChatFormat> f(new ModelChatFormat());
  const fs::path tok_dir = tokenizer_path.empty() ? fs::path() : fs::path(tokenizer_path).parent_path();
  for (const fs::path& dir : {fs::path(model_dir), tok_dir}) {
    const fs::path config = dir / "tokenizer_config.json";
    std::error_code ec;
    if (dir.empty() || !fs::exists(config, ec)) continue;
    auto tmpl = ChatTemplate::FromTokenizerConfig(config.string());
    if (absl::IsNotFound(tmpl.status())) continue;  // a config without a template
    if (!tmpl.ok()) return tmpl.status();
    f->template_ = std::move(*tmpl);
    break;
  }
  return f;
}

absl::StatusOr<std::string> ModelChatFormat::Render(const std::vector<ChatMessage>& messages,
                                                    bool add_generation_prompt) const {
  if (template_) return template_->Render(messages, add_generation_prompt);
  return FormatChatML(messages, add_generation_prompt);
}

absl::StatusOr<std::vector<int32_t>> ModelStopIds(const std::string& model_dir_s, const Tokenizer* tok) {
  const fs::path model_dir(model_dir_s);
  std::vector<int32_t> stop;
  auto add = [&](int32_t id) {
    if (std::find(stop.begin(), stop.end(), id) == stop.end()) stop.push_back(id);
  };
  auto add_ids = [&](const json& ids, const std::string& file) -> absl::Status {
    for (const json& id : ids.is_array() ? ids : json::array({ids})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": eos_token_id ", id.dump(), " is not a token id"));
      }
      add(id.get<int32_t>());
    }
    return absl::OkStatus();
  };
  json j;
  auto found = ReadConfig(model_dir, "generation_config.json", &j);
  if (!found.ok()) return found.status();
  if (*found && j.is_object() && j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    if (auto s = add_ids(j["eos_token_id"], "generation_config.json"); !s.ok()) return s;
  }
  found = ReadConfig(model_dir, "genai_config.json", &j);
  if (!found.ok()) return found.status();
  if (*found && j.is_object() && j.contains("model") && j["model"].is_object() && j["model"].contains("eos_token_id")) {
    if (auto s = add_ids(j["model"]["eos_token_id"], "genai_config.json"); !s.ok()) return s;
  }
  // Without generation or genai config, the tokenizer's usual ends of a Qwen turn and text.
  if (stop.empty() && tok) {
    for (const char* t : {"<|im_end|>", "<|endoftext|>"}) {
      if (auto id = tok->TokenId(t)) stop.push_back(*id);
    }
  }
  found = ReadConfig(model_dir, "tokenizer_config.json", &j);
  if (!found.ok()) return found.status();
  if (*found && tok && j.is_object() && j.contains("eos_token")) {
    const json& e = j["eos_token"];
    const json text = e.is_object() && e.contains("content") ? e["content"] : e;
    if (text.is_string()) {
      if (auto id = tok->TokenId(text.get<std::string>())) add(*id);
    }
  }
  return stop;
}

absl::StatusOr<int64_t> ModelContextLength(const std::string& model_dir) {
  json j;
  auto found = ReadConfig(fs::path(model_dir), "genai_config.json", &j);
  if (!found.ok()) return found.status();
  if (!*found || !j.is_object() || !j.contains("model") || !j["model"].is_object() ||
      !j["model"].contains("context_length")) {
    return 0;
  }
  const json& n = j["model"]["context_length"];
  if (!n.is_number_integer() || n.get<int64_t>() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("genai_config.json: model.context_length ", n.dump(),
                                                   " is not a positive integer"));
  }
  return n.get<int64_t>();
}

}  // namespace oneinfer
