// oneinfer serve: request bodies of /v1/chat/completions and /v1/completions, each bad field
// refused with a 400 naming it.
#include "serve/request.h"

#include <string>

#include <gtest/gtest.h>

namespace oneinfer::serve {
namespace {

GenerationRequest Chat(const std::string& body) {
  auto r = ParseChatRequest(body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

ApiError ChatError(const std::string& body) {
  auto r = ParseChatRequest(body);
  if (!std::holds_alternative<ApiError>(r)) ADD_FAILURE() << body << " was accepted";
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

ApiError CompletionError(const std::string& body) {
  auto r = ParseCompletionRequest(body);
  if (!std::holds_alternative<ApiError>(r)) ADD_FAILURE() << body << " was accepted";
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(ServeRequest, ChatFieldsAreRead) {
  const GenerationRequest r = Chat(R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},
      {"role": "assistant", "content": null}, {"role": "user", "content": "again"}],
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "seed": 11, "max_completion_tokens": 7,
      "stop": ["\n\n", ""], "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(r.is_chat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hello");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_TRUE(r.has_seed);
  EXPECT_EQ(r.sampling.seed, 11u);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ServeRequest, ChatDefaultsFollowOpenAI) {
  const GenerationRequest r = Chat(R"({"messages": [{"role": "user", "content": "hi"}], "stop": "END"})");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);  // OpenAI's default; greedy needs temperature 0
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FALSE(r.has_seed);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
}

TEST(ServeRequest, BadChatBodiesNameTheField) {
  const std::string ok_messages = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::pair<std::string, std::string> cases[] = {
      {"", "not valid JSON"},
      {"{\"messages\": [", "not valid JSON"},
      {"[1, 2]", "must be a JSON object"},
      {"{}", "'messages' is required"},
      {R"({"messages": {}})", "'messages' must be a list"},
      {R"({"messages": []})", "'messages' is empty"},
      {R"({"messages": ["hi"]})", "'messages[0]' must be an object"},
      {R"({"messages": [{"content": "hi"}]})", "'messages[0].role' is required"},
      {R"({"messages": [{"role": 1, "content": "hi"}]})", "'messages[0].role' must be a string"},
      {R"({"messages": [{"role": "wizard", "content": "hi"}]})", "must be system, developer"},
      {R"({"messages": [{"role": "user"}]})", "'messages[0].content' is required"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "'messages[0].content' must be a string"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "only parts"},
      {"{" + ok_messages + R"(, "max_tokens": 0})", "'max_tokens' must be at least 1"},
      {"{" + ok_messages + R"(, "max_tokens": -3})", "'max_tokens' must be at least 1"},
      {"{" + ok_messages + R"(, "max_completion_tokens": 1.5})", "'max_completion_tokens' must be an integer"},
      {"{" + ok_messages + R"(, "max_tokens": "10"})", "'max_tokens' must be an integer, not a string"},
      {"{" + ok_messages + R"(, "temperature": "hot"})", "'temperature' must be a number"},
      {"{" + ok_messages + R"(, "temperature": 3})", "'temperature' must be in [0, 2]"},
      {"{" + ok_messages + R"(, "top_p": 0})", "'top_p' must be in (0, 1]"},
      {"{" + ok_messages + R"(, "top_k": -1})", "'top_k' must be in"},
      {"{" + ok_messages + R"(, "seed": "x"})", "'seed' must be an integer"},
      {"{" + ok_messages + R"(, "stop": 3})", "'stop' must be a string or a list"},
      {"{" + ok_messages + R"(, "stop": ["a", 1]})", "'stop' must be a string or a list"},
      {"{" + ok_messages + R"(, "stream": "yes"})", "'stream' must be a boolean"},
      {"{" + ok_messages + R"(, "stream_options": {"include_usage": 1}})", "include_usage' must be a boolean"},
      {"{" + ok_messages + R"(, "n": 2})", "only 'n': 1"},
      {"{" + ok_messages + R"(, "model": 7})", "'model' must be a string"},
  };
  for (const auto& [body, want] : cases) {
    const ApiError e = ChatError(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(e.message.find(want), std::string::npos) << body << " -> " << e.message;
    EXPECT_EQ(e.ToJson()["error"]["type"], "invalid_request_error");
  }
}

TEST(ServeRequest, CompletionPromptAsTextOrIds) {
  auto r = ParseCompletionRequest(R"({"prompt": "Once upon", "max_tokens": 3})");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  EXPECT_EQ(std::get<GenerationRequest>(r).prompt_text, "Once upon");
  EXPECT_FALSE(std::get<GenerationRequest>(r).is_chat);
  r = ParseCompletionRequest(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  EXPECT_TRUE(std::get<GenerationRequest>(r).prompt_is_ids);
  EXPECT_EQ(std::get<GenerationRequest>(r).prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  r = ParseCompletionRequest(R"({"prompt": ["one prompt"]})");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  EXPECT_EQ(std::get<GenerationRequest>(r).prompt_text, "one prompt");

  EXPECT_NE(CompletionError("{}").message.find("'prompt' is required"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": ""})").message.find("'prompt' is empty"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": ["a", "b"]})").message.find("several prompts"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": [1, -2]})").message.find("not a token id"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": [1, 1e12]})").message.find("not a token id"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": [1, 99999999999]})").message.find("not a token id"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": 5})").message.find("'prompt' must be a string or a list of token ids"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": "x", "echo": true})").message.find("'echo' is not supported"), std::string::npos);
  EXPECT_NE(CompletionError(R"({"prompt": "x", "max_tokens": 0})").message.find("at least 1"), std::string::npos);
}

TEST(ServeRequest, ErrorObjectsHaveOpenAIsShape) {
  ApiError e = BadRequest("bad", "field");
  const auto j = e.ToJson();
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "field");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(FromStatus(absl::ResourceExhaustedError("full")).status, 429);
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("x")).status, 400);
  EXPECT_EQ(FromStatus(absl::UnavailableError("x")).status, 503);
  EXPECT_EQ(FromStatus(absl::InternalError("x")).status, 500);
}

}  // namespace
}  // namespace oneinfer::serve
