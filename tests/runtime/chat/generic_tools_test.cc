// The generic tool-call format's prompt side (runtime/chat/generic_tools.h):
// the instructions, the calls schema, and earlier tool turns rewritten so
// that templates without a tool format (real ones from tests/data) render
// them.
#include "runtime/chat/generic_tools.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/chat_format.h"

namespace inferd {
namespace {

using Json = nlohmann::json;

std::vector<ChatTool> WeatherTools() {
  ChatTool get;
  get.name = "get_weather";
  get.description = "Current weather of a city";
  get.parameters =
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})";
  ChatTool time;
  time.name = "get_time";
  return {get, time};
}

std::vector<ChatMessage> AgentTurns() {
  std::vector<ChatMessage> m;
  m.emplace_back("user", "Weather and time in Paris?");
  ChatMessage calls("assistant", "");
  calls.tool_calls.push_back({"call_1", "get_weather", R"({"city": "Paris"})"});
  calls.tool_calls.push_back({"call_2", "get_time", "{}"});
  m.push_back(calls);
  ChatMessage r1("tool", R"({"temp": 21})");
  r1.tool_call_id = "call_1";
  ChatMessage r2("tool", "12:00");
  r2.tool_call_id = "call_2";
  r2.name = "get_time";
  m.push_back(r1);
  m.push_back(r2);
  return m;
}

TEST(GenericToolsTest, InstructionsListTheToolsAndTheReplyShape) {
  const std::string auto_text = GenericToolInstructions(
      WeatherTools(), GenericToolMode::kAuto, "");
  EXPECT_NE(auto_text.find("\"name\":\"get_weather\""), std::string::npos)
      << auto_text;
  EXPECT_NE(auto_text.find("Current weather of a city"), std::string::npos);
  EXPECT_NE(auto_text.find("\"name\":\"get_time\""), std::string::npos);
  EXPECT_NE(auto_text.find("[{\"name\": \"<tool name>\""),
            std::string::npos);
  EXPECT_NE(auto_text.find("plain text"), std::string::npos);
  const std::string named = GenericToolInstructions(
      WeatherTools(), GenericToolMode::kNamed, "get_time");
  EXPECT_EQ(named.find("get_weather"), std::string::npos) << named;
  EXPECT_NE(named.find("Call the tool get_time"), std::string::npos);
  EXPECT_EQ(GenericToolInstructions(WeatherTools(), GenericToolMode::kRequired,
                                    "")
                .find("plain text"),
            std::string::npos);
}

TEST(GenericToolsTest, SchemaHasEachToolAndTheCallLimits) {
  const Json calls =
      GenericToolSchema(WeatherTools(), GenericToolMode::kAuto, "", true);
  EXPECT_EQ(calls["type"], "array");
  EXPECT_EQ(calls["minItems"], 1);
  EXPECT_FALSE(calls.contains("maxItems"));
  ASSERT_EQ(calls["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(calls["items"]["anyOf"][0]["properties"]["name"]["const"],
            "get_weather");
  EXPECT_EQ(calls["items"]["anyOf"][0]["properties"]["arguments"]["required"],
            Json::array({"city"}));
  // A tool without parameters takes any object.
  EXPECT_EQ(calls["items"]["anyOf"][1]["properties"]["arguments"],
            Json({{"type", "object"}}));
  EXPECT_EQ(GenericToolSchema(WeatherTools(), GenericToolMode::kAuto, "",
                              false)["maxItems"],
            1);
  Json named = GenericToolSchema(WeatherTools(), GenericToolMode::kNamed,
                                 "get_time", true);
  EXPECT_EQ(named["maxItems"], 1);
  ASSERT_EQ(named["items"]["anyOf"].size(), 1u);
  EXPECT_EQ(named["items"]["anyOf"][0]["properties"]["name"]["const"],
            "get_time");
}

TEST(GenericToolsTest, ToolTurnsBecomeText) {
  EXPECT_TRUE(HasToolTurns(AgentTurns()));
  EXPECT_FALSE(HasToolTurns({ChatMessage("user", "hi")}));
  std::vector<ChatMessage> out =
      GenericToolConversation(AgentTurns(), "INSTRUCTIONS", false);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_EQ(out[0].content, "INSTRUCTIONS");
  EXPECT_EQ(out[1].role, "user");
  EXPECT_EQ(out[2].role, "assistant");
  EXPECT_TRUE(out[2].tool_calls.empty());
  EXPECT_EQ(Json::parse(out[2].content),
            Json::parse(R"([
              {"name": "get_weather", "arguments": {"city": "Paris"}},
              {"name": "get_time", "arguments": {}}])"));
  // Both results in one user turn, each naming its call and tool (the
  // first found from the call id).
  EXPECT_EQ(out[3].role, "user");
  std::istringstream lines(out[3].content);
  std::string line;
  std::vector<Json> results;
  while (std::getline(lines, line)) results.push_back(Json::parse(line));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["tool_result"]["name"], "get_weather");
  EXPECT_EQ(results[0]["tool_result"]["tool_call_id"], "call_1");
  EXPECT_EQ(results[0]["tool_result"]["content"], Json({{"temp", 21}}));
  EXPECT_EQ(results[1]["tool_result"]["name"], "get_time");
  EXPECT_EQ(results[1]["tool_result"]["content"], "12:00");
  // An existing system message gets the instructions after its text; or
  // they lead the first user turn.
  std::vector<ChatMessage> with_system = AgentTurns();
  with_system.insert(with_system.begin(), ChatMessage("system", "Be brief."));
  out = GenericToolConversation(with_system, "INSTRUCTIONS", false);
  EXPECT_EQ(out[0].content, "Be brief.\n\nINSTRUCTIONS");
  out = GenericToolConversation(AgentTurns(), "INSTRUCTIONS", true);
  EXPECT_EQ(out[0].role, "user");
  EXPECT_EQ(out[0].content, "INSTRUCTIONS\n\nWeather and time in Paris?");
}

std::string Template(const std::string& name) {
  std::ifstream f(std::string(INFERD_SOURCE_DIR) +
                  "/tests/data/chat_templates/" + name + ".jinja");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Real templates without a tool format render the rewritten conversation:
// SmolLM2 (ChatML) with a system turn, Gemma 2 (which refuses system and
// tool roles and demands alternating turns) with the instructions in the
// first user turn.
TEST(GenericToolsTest, TemplatesWithoutAToolFormatRenderTheConversation) {
  auto smol = ChatFormat::Create("smol", Template("SmolLM2-135M-Instruct"),
                                 "", "<|im_end|>");
  ASSERT_TRUE(smol->has_template());
  EXPECT_EQ(smol->tool_parser(), "");
  const std::string text = GenericToolInstructions(
      WeatherTools(), GenericToolMode::kAuto, "");
  absl::StatusOr<std::string> p = smol->Render(
      GenericToolConversation(AgentTurns(), text, false), true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NE(p->find("<|im_start|>system\nYou can call these tools"),
            std::string::npos)
      << *p;
  EXPECT_NE(p->find("{\"tool_result\""), std::string::npos);

  auto gemma = ChatFormat::Create("gemma", Template("google-gemma-2-2b-it"),
                                  "<bos>", "<eos>");
  ASSERT_TRUE(gemma->has_template());
  EXPECT_EQ(gemma->tool_parser(), "");
  // The original conversation fails on Gemma 2 (a tool role); so does the
  // system turn; the instructions in the user turn pass.
  EXPECT_FALSE(gemma->Render(AgentTurns(), true).ok());
  absl::StatusOr<std::string> sys = gemma->Render(
      GenericToolConversation(AgentTurns(), text, false), true);
  EXPECT_EQ(sys.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> user = gemma->Render(
      GenericToolConversation(AgentTurns(), text, true), true);
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_NE(user->find("<start_of_turn>user\nYou can call these tools"),
            std::string::npos)
      << *user;
  EXPECT_NE(user->find("<start_of_turn>model\n[{\"name\""),
            std::string::npos)
      << *user;
}

}  // namespace
}  // namespace inferd
