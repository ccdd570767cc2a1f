// ChatTemplate (runtime/chat/chat_template.h): the conversation API around
// the interpreter; real-template agreement with transformers is checked by
// chat_template_test.py.
#include "runtime/chat/chat_template.h"

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

using ::testing::HasSubstr;

std::string ReadTemplate(const std::string& name) {
  std::ifstream in(std::string(INFERD_SOURCE_DIR) + "/tests/data/chat_templates/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChatTemplateTest, RendersSmolLM2Conversation) {
  auto t = ChatTemplate::Parse(ReadTemplate("SmolLM2-135M-Instruct.jinja"));
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = (*t)->Render({{"user", "Hi"}}, /*add_generation_prompt=*/true, "", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
            "Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, JsonContextDefaultsToolsAndGenerationPrompt) {
  auto t = ChatTemplate::Parse(
      "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} "
      "{{ messages[0].content }}{{ eos_token }}");
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = (*t)->Render(nlohmann::json::parse(
      R"({"messages": [{"role": "user", "content": "x"}], "eos_token": "</s>"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "True True False x</s>");
}

TEST(ChatTemplateTest, OrderedJsonKeepsKeyOrderForToJson) {
  auto t = ChatTemplate::Parse("{{ tools|tojson }}");
  ASSERT_TRUE(t.ok());
  auto r = (*t)->Render(nlohmann::ordered_json::parse(R"({"tools": {"z": 1, "a": 2}})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "{\"z\": 1, \"a\": 2}");
}

TEST(ChatTemplateTest, GemmaRejectsSystemRole) {
  auto t = ChatTemplate::Parse(ReadTemplate("google-gemma-2-2b-it.jinja"));
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = (*t)->Render({{"system", "s"}, {"user", "u"}}, true, "<bos>", "<eos>");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("System role not supported"));
}

TEST(ChatTemplateTest, SyntaxErrorIsInvalidArgument) {
  auto t = ChatTemplate::Parse("{% if %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("line 1:"));
}

TEST(ChatTemplateTest, ContextMustBeAnObject) {
  auto t = ChatTemplate::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->Render(nlohmann::json::array()).ok());
}

TEST(ChatTemplateTest, RenderIsThreadSafe) {
  auto t = ChatTemplate::Parse(ReadTemplate("Qwen-Qwen3-0.6B.jinja"));
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<ChatMessage> conv = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
  auto expected = (*t)->Render(conv, true, "", "<|im_end|>");
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        auto r = (*t)->Render(conv, true, "", "<|im_end|>");
        ok[i] += r.ok() && *r == *expected;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ok[i], 50);
}

}  // namespace
}  // namespace inferd
