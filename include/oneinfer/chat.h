// Chat formatting: a conversation turned into the prompt text a chat model was trained on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "oneinfer/export.h"

namespace oneinfer {

class Tokenizer;

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

// The ChatML form Qwen models use: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then
// "<|im_start|>assistant\n" when add_generation_prompt (the model's turn to answer).
ONEINFER_API std::string FormatChatML(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

// A model's own prompt format: the Jinja chat_template of its tokenizer_config.json, rendered as
// Hugging Face transformers renders it (trim_blocks, lstrip_blocks, raise_exception, tojson,
// strftime_now; the special tokens and `tools` as variables). Templates are downloaded files:
// every error (syntax, an unknown filter, raise_exception, a loop or output limit) is a Status
// naming the line, never a crash.
class ONEINFER_API ChatTemplate {
 public:
  // tokenizer_config.json: chat_template as a string or as a list of {"name", "template"} (the one
  // named "default"; "tool_use" when tools are given and it exists), else chat_template.jinja
  // beside the file. bos_token, eos_token, unk_token, pad_token, ... (strings or AddedToken
  // objects) become the variables of the same names. NotFound when there is no template.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromTokenizerConfig(const std::string& path);
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromTokenizerConfigJson(std::string_view json);
  // A template's source with these special tokens.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromSource(std::string_view source, const std::string& bos_token = "",
                                                                  const std::string& eos_token = "");
  ~ChatTemplate();

  // messages_json: a JSON list of messages ({"role", "content": a string or a list of parts,
  // "tool_calls", ...}, passed to the template as they are); tools_json: a JSON list of tool
  // schemas, or "" for none (the template sees None); extra_json: a JSON object of further
  // variables such as {"enable_thinking": false}, or "".
  absl::StatusOr<std::string> RenderJson(std::string_view messages_json, bool add_generation_prompt = true,
                                         std::string_view tools_json = "", std::string_view extra_json = "") const;
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;

  // The special tokens the template sees ("" when the config has none).
  const std::string& bos_token() const;
  const std::string& eos_token() const;

 private:
  ChatTemplate();
  // Reads a tokenizer_config.json's text; dir ("" for none) is where chat_template.jinja may be.
  absl::Status LoadConfig(std::string_view json, const std::string& dir);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A model folder's prompt format, found as `oneinfer run --chat` and `oneinfer serve` find it: the
// chat_template of tokenizer_config.json beside the model, else beside the tokenizer; Qwen's
// ChatML (FormatChatML) when neither has one.
class ONEINFER_API ModelChatFormat {
 public:
  // model_dir: the model's folder; tokenizer_path: its tokenizer.json ("" for none). A config that
  // exists but cannot be read, or whose template does not parse, is an error.
  static absl::StatusOr<std::unique_ptr<ModelChatFormat>> Find(const std::string& model_dir, const std::string& tokenizer_path);
  ~ModelChatFormat();

  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // The model's own template, or nullptr when the format is ChatML.
  const ChatTemplate* chat_template() const { return template_.get(); }

 private:
  ModelChatFormat();
  std::unique_ptr<ChatTemplate> template_;
};

// The ids that end a model's turn: eos_token_id of generation_config.json and of genai_config.json
// ("model") beside the model (without either, the tokenizer's <|im_end|> and <|endoftext|>), and
// the eos_token of tokenizer_config.json. InvalidArgument for a config that does not parse or an
// id that is not a token id.
ONEINFER_API absl::StatusOr<std::vector<int32_t>> ModelStopIds(const std::string& model_dir, const Tokenizer* tokenizer);

// The positions a model folder says its model takes: genai_config.json's model.context_length
// beside the model (0 without one). InvalidArgument for a config that does not parse or a length
// that is not a positive integer. Generator::LimitContext checks it against the graph.
ONEINFER_API absl::StatusOr<int64_t> ModelContextLength(const std::string& model_dir);

}  // namespace oneinfer
