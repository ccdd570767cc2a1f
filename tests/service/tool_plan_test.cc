// Tools through the gRPC adapter (ToGenerateInput), the request checks
// (Validate) and the tool plan (PlanTools): tools / tool_choice validation
// and the constraint it builds.
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/grpc/convert.h"
#include "service/request/validation.h"

namespace inferd {
namespace {

constexpr char kWeather[] =
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})";

v1::GenerateRequest Request() {
  v1::GenerateRequest r;
  r.add_messages()->set_role("user");
  v1::Tool* t = r.add_tools();
  t->set_name("get_weather");
  t->set_description("weather");
  t->set_parameters(kWeather);
  r.add_tools()->set_name("get_time");
  return r;
}

// The plan of `r`; `p`'s response_format (if any) is the request's own, and
// `p` gets the request's parameters.
absl::StatusOr<ToolPlan> Plan(const v1::GenerateRequest& r, GenerateParams* p,
                              bool generic = false) {
  absl::StatusOr<GenerateInput> in = ToGenerateInput(r, absl::InfiniteFuture());
  if (!in.ok()) return in.status();
  in->params.sampling.response_format = p->sampling.response_format;
  ServedModelInfo model;
  model.vocab_size = 1000;
  model.max_input_tokens = 512;
  if (absl::Status s = Validate(*in, model); !s.ok()) return s;
  ToolPlan plan = PlanTools(&*in, generic);
  *p = in->params;
  return plan;
}

// A model without a tool format of its own: every mode but none takes the
// generic calls object; auto may also be text.
TEST(ToolPlanTest, GenericFormatConstrainsEveryModeToTheCallsObject) {
  GenerateParams p;
  auto plan = Plan(Request(), &p, /*generic=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, ToolPlan::Mode::kAuto);
  EXPECT_TRUE(plan->generic);
  ASSERT_EQ(p.sampling.response_format.type, ResponseFormat::Type::kJsonSchema);
  EXPECT_TRUE(p.sampling.response_format.or_text);
  auto s = nlohmann::ordered_json::parse(p.sampling.response_format.spec);
  EXPECT_EQ(s["type"], "array");
  EXPECT_EQ(s["items"]["anyOf"].size(), 2u);

  v1::GenerateRequest r = Request();
  r.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_REQUIRED);
  p = GenerateParams();
  plan = Plan(r, &p, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->generic);
  EXPECT_FALSE(p.sampling.response_format.or_text);
  EXPECT_EQ(nlohmann::ordered_json::parse(
                p.sampling.response_format.spec)["minItems"],
            1);
  // A model's own format takes the same array under required.
  GenerateParams native;
  ASSERT_TRUE(Plan(r, &native, false).ok());
  EXPECT_EQ(native.sampling.response_format.spec,
            p.sampling.response_format.spec);

  r.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_NONE);
  p = GenerateParams();
  plan = Plan(r, &p, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->generic);
  EXPECT_EQ(p.sampling.response_format.type, ResponseFormat::Type::kText);

  // Under auto a response_format of the request's own wins.
  GenerateParams own;
  own.sampling.response_format.type = ResponseFormat::Type::kJsonSchema;
  own.sampling.response_format.spec = R"({"type": "object"})";
  plan = Plan(Request(), &own, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(own.sampling.response_format.spec, R"({"type": "object"})");
  EXPECT_FALSE(own.sampling.response_format.or_text);
}

TEST(ToolPlanTest, AutoByDefaultLeavesTheOutputFree) {
  GenerateParams p;
  auto plan = Plan(Request(), &p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, ToolPlan::Mode::kAuto);
  ASSERT_EQ(p.tools.size(), 2u);
  EXPECT_EQ(p.tools[0].name, "get_weather");
  EXPECT_EQ(p.tools[0].parameters, kWeather);
  EXPECT_EQ(p.sampling.response_format.type, ResponseFormat::Type::kText);
}

TEST(ToolPlanTest, RequiredConstrainsToAnArrayOfCallsNameFirst) {
  v1::GenerateRequest r = Request();
  r.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_REQUIRED);
  GenerateParams p;
  auto plan = Plan(r, &p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, ToolPlan::Mode::kRequired);
  ASSERT_EQ(p.sampling.response_format.type, ResponseFormat::Type::kJsonSchema);
  auto s = nlohmann::ordered_json::parse(p.sampling.response_format.spec);
  EXPECT_EQ(s["type"], "array");
  EXPECT_EQ(s["minItems"], 1);
  EXPECT_FALSE(s.contains("maxItems"));
  const auto& any = s["items"]["anyOf"];
  ASSERT_EQ(any.size(), 2u);
  // llguidance keeps property order: the name comes before the arguments.
  EXPECT_EQ(any[0]["properties"].begin().key(), "name");
  EXPECT_EQ(any[0]["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(any[0]["properties"]["arguments"],
            nlohmann::ordered_json::parse(kWeather));
  EXPECT_EQ(any[1]["properties"]["arguments"],
            (nlohmann::ordered_json{{"type", "object"}}));
  EXPECT_FALSE(p.sampling.response_format.strict);

  r.set_parallel_tool_calls(false);
  GenerateParams one;
  ASSERT_TRUE(Plan(r, &one).ok());
  EXPECT_EQ(
      nlohmann::json::parse(one.sampling.response_format.spec)["maxItems"], 1);
}

TEST(ToolPlanTest, NamedConstrainsToItsArguments) {
  v1::GenerateRequest r = Request();
  r.mutable_tool_choice()->set_function_name("get_weather");
  r.mutable_tools(0)->set_strict(true);
  GenerateParams p;
  auto plan = Plan(r, &p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, ToolPlan::Mode::kNamed);
  EXPECT_EQ(plan->function, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.sampling.response_format.spec),
            nlohmann::json::parse(kWeather));
  EXPECT_TRUE(p.sampling.response_format.strict);
}

TEST(ToolPlanTest, NoneRendersButParsesNothing) {
  v1::GenerateRequest r = Request();
  r.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_NONE);
  GenerateParams p;
  auto plan = Plan(r, &p);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->mode, ToolPlan::Mode::kNone);
  EXPECT_EQ(p.tools.size(), 2u);
  EXPECT_EQ(p.sampling.response_format.type, ResponseFormat::Type::kText);
}

void ExpectInvalid(const v1::GenerateRequest& r, const std::string& field) {
  GenerateParams p;
  auto plan = Plan(r, &p);
  ASSERT_FALSE(plan.ok()) << field;
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message().substr(0, field.size() + 1), field + ":")
      << plan.status();
}

TEST(ToolPlanTest, BadInputNamesTheField) {
  v1::GenerateRequest r = Request();
  r.mutable_tool_choice()->set_function_name("nope");
  ExpectInvalid(r, "tool_choice.function_name");

  r = Request();
  r.mutable_tools(1)->set_name("get_weather");
  ExpectInvalid(r, "tools[1].name");
  r = Request();
  r.mutable_tools(0)->set_name("has space");
  ExpectInvalid(r, "tools[0].name");
  r = Request();
  r.mutable_tools(0)->set_parameters("{not json");
  ExpectInvalid(r, "tools[0].parameters");
  r = Request();
  r.mutable_tools(0)->set_parameters("[1]");
  ExpectInvalid(r, "tools[0].parameters");
  r = Request();
  r.mutable_tools(0)->set_parameters(R"({"type": "string"})");
  ExpectInvalid(r, "tools[0].parameters");
  r = Request();
  r.mutable_tools(0)->set_parameters(R"({"type": "object", "properties": 5})");
  ExpectInvalid(r, "tools[0].parameters");
  r = Request();
  r.mutable_tools(0)->set_parameters(
      R"({"type": "object", "required": "city"})");
  ExpectInvalid(r, "tools[0].parameters");

  r = Request();
  r.clear_messages();
  r.set_prompt("x");
  ExpectInvalid(r, "tools");

  v1::GenerateRequest no_tools;
  no_tools.add_messages()->set_role("user");
  no_tools.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_REQUIRED);
  ExpectInvalid(no_tools, "tool_choice");
  // "none" without tools is harmless, as OpenAI's API takes it.
  no_tools.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_NONE);
  GenerateParams p;
  auto off = Plan(no_tools, &p);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->mode, ToolPlan::Mode::kOff);

  r = Request();
  r.mutable_tool_choice()->set_mode(v1::TOOL_CHOICE_MODE_REQUIRED);
  GenerateParams with_format;
  with_format.sampling.response_format.type = ResponseFormat::Type::kRegex;
  auto both = Plan(r, &with_format);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("response_format"), std::string::npos);
}

TEST(ToolPlanTest, ChatMessagesKeepToolFields) {
  v1::GenerateRequest req;
  google::protobuf::RepeatedPtrField<v1::ChatMessage>& in = *req.mutable_messages();
  v1::ChatMessage* a = in.Add();
  a->set_role("assistant");
  v1::ToolCall* c = a->add_tool_calls();
  c->set_id("call_1");
  c->set_name("get_weather");
  c->set_arguments(R"({"city": "Paris"})");
  v1::ChatMessage* t = in.Add();
  t->set_role("tool");
  t->set_tool_call_id("call_1");
  t->set_name("get_weather");
  t->set_content("sunny");
  absl::StatusOr<GenerateInput> converted =
      ToGenerateInput(req, absl::InfiniteFuture());
  ASSERT_TRUE(converted.ok());
  const std::vector<ChatMessage>& out = converted->params.messages;
  ASSERT_TRUE(ValidateMessages(out).ok());
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].tool_calls.size(), 1u);
  EXPECT_EQ(out[0].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(out[1].tool_call_id, "call_1");
  EXPECT_EQ(out[1].name, "get_weather");

  auto check = [&req] {
    return ValidateMessages(
        ToGenerateInput(req, absl::InfiniteFuture())->params.messages);
  };
  c->set_arguments("{broken");
  auto s = check();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().substr(0, 35), "messages[0].tool_calls[0].arguments");
  a->set_role("user");
  EXPECT_EQ(check().message().substr(0, 22), "messages[0].tool_calls");
}

}  // namespace
}  // namespace inferd
