#include "runtime/chat/tool_parser.h"

#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inferd {
namespace {

using Factory = std::function<std::unique_ptr<OutputParser>()>;

ToolCallIdFn Counter() {
  auto n = std::make_shared<int>(0);
  return [n] { return "id" + std::to_string((*n)++); };
}

Factory Tools(const std::string& name) {
  return [name] { return NewToolParser(name, Counter()); };
}

struct Result {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> calls;
  std::vector<ToolCallDelta> deltas;
  int tool_calls = 0;
};

// Feeds `pieces` then finishes.
Result Run(const Factory& make, const std::vector<std::string>& pieces) {
  std::unique_ptr<OutputParser> p = make();
  ParsedDelta all;
  for (const std::string& piece : pieces) all.Append(p->Feed(piece));
  all.Append(p->Finish());
  Result r;
  r.content = all.content;
  r.reasoning = all.reasoning;
  r.calls = JoinToolCalls(all.tool_calls);
  r.deltas = all.tool_calls;
  r.tool_calls = p->tool_calls();
  return r;
}

Result Whole(const Factory& make, const std::string& text) {
  return Run(make, {text});
}

void ExpectSame(const Result& a, const Result& b, const std::string& where) {
  EXPECT_EQ(a.content, b.content) << where;
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << where;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
  }
}

// Every cut into two pieces, and byte by byte, give the whole-text parse.
void ExpectSplitInvariant(const Factory& make, const std::string& text) {
  const Result whole = Whole(make, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ExpectSame(whole, Run(make, {text.substr(0, cut), text.substr(cut)}),
               "cut at " + std::to_string(cut) + " of: " + text);
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ExpectSame(whole, Run(make, bytes), "byte by byte: " + text);
}

nlohmann::json Args(const ToolCall& c) {
  return nlohmann::json::parse(c.arguments);
}

TEST(ToolParserTest, HermesSplitsContentAndCalls) {
  const Result r = Whole(
      Tools("hermes"),
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "id0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(Args(r.calls[0]),
            nlohmann::json::parse(R"({"city": "Paris", "days": [1, 2]})"));
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(Args(r.calls[1]), nlohmann::json::object());
  EXPECT_EQ(r.tool_calls, 2);
}

TEST(ToolParserTest, HermesPlainTextIsUnchanged) {
  const std::string text = "Paris is sunny <b>today</b> < tool_call\n\n";
  const Result r = Whole(Tools("hermes"), text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.tool_calls, 0);
}

TEST(ToolParserTest, HermesArgumentsStreamInPieces) {
  std::unique_ptr<OutputParser> p = NewToolParser("hermes", Counter());
  const std::string text =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"xyz\", \"b\": 1}}"
      "</tool_call>";
  std::vector<ToolCallDelta> deltas;
  for (char c : text) {
    ParsedDelta d = p->Feed(std::string(1, c));
    EXPECT_EQ(d.content, "");
    for (auto& t : d.tool_calls) deltas.push_back(t);
  }
  ASSERT_GT(deltas.size(), 3u);  // name first, then arguments byte by byte
  EXPECT_EQ(deltas[0].name, "f");
  EXPECT_EQ(deltas[0].id, "id0");
  EXPECT_EQ(deltas[0].arguments, "");
  std::string args;
  for (size_t i = 1; i < deltas.size(); ++i) {
    EXPECT_EQ(deltas[i].name, "");
    EXPECT_EQ(deltas[i].index, 0);
    args += deltas[i].arguments;
  }
  EXPECT_EQ(args, "{\"a\": \"xyz\", \"b\": 1}");
}

TEST(ToolParserTest, HermesArgumentsBeforeNameAndStringArguments) {
  Result r = Whole(Tools("hermes"),
                   "<tool_call>{\"arguments\": {\"q\": \"}\"}, \"name\": \"s\"}"
                   "</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "s");
  EXPECT_EQ(Args(r.calls[0]), nlohmann::json::parse(R"({"q": "}"})"));
  r = Whole(Tools("hermes"),
            "<tool_call>{\"name\": \"s\", \"arguments\": \"{\\\"q\\\": 1}\"}"
            "</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(Args(r.calls[0]), nlohmann::json::parse(R"({"q": 1})"));
}

TEST(ToolParserTest, HermesBrokenCallIsContent) {
  const std::string text = "<tool_call>\nnot json\n</tool_call>";
  const Result r = Whole(Tools("hermes"), text);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_NE(r.content.find("not json"), std::string::npos);
  // A call cut short (max_tokens) keeps its name and the arguments so far.
  const Result cut = Whole(
      Tools("hermes"), "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1");
  ASSERT_EQ(cut.calls.size(), 1u);
  EXPECT_EQ(cut.calls[0].arguments, "{\"a\": 1");
  EXPECT_EQ(cut.content, "");
}

TEST(ToolParserTest, Llama3Json) {
  Result r =
      Whole(Tools("llama3_json"),
            "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}; "
            "{\"name\": \"g\", \"parameters\": {}}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(Args(r.calls[0]), nlohmann::json::parse(R"({"a": 1})"));
  EXPECT_EQ(r.calls[1].name, "g");
  EXPECT_EQ(r.content, "");
  r = Whole(Tools("llama3_json"),
            "{\"name\": \"f\", \"arguments\": {\"x\": null}}");
  ASSERT_EQ(r.calls.size(), 1u);
  // Not calls: text, and JSON without a name.
  EXPECT_EQ(Whole(Tools("llama3_json"), "Hello {\"name\": 1}").content,
            "Hello {\"name\": 1}");
  const Result j = Whole(Tools("llama3_json"), "{\"answer\": 42}");
  EXPECT_EQ(j.content, "{\"answer\": 42}");
  EXPECT_TRUE(j.calls.empty());
}

TEST(ToolParserTest, MistralBothForms) {
  Result r = Whole(Tools("mistral"),
                   "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, "
                   "{\"name\": \"g\", \"arguments\": {\"b\": [2]}}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "g");
  EXPECT_EQ(Args(r.calls[1]), nlohmann::json::parse(R"({"b": [2]})"));
  EXPECT_EQ(r.content, "");
  r = Whole(Tools("mistral"),
            "Sure [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"
            "[TOOL_CALLS]g[ARGS]{}");
  EXPECT_EQ(r.content, "Sure");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(Args(r.calls[0]), nlohmann::json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(r.calls[1].arguments, "{}");
  // Mistral's own ids: 9 letters and digits.
  r = Whole([] { return NewToolParser("mistral"); }, "[TOOL_CALLS]f[ARGS]{}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].id.size(), 9u);
}

TEST(ToolParserTest, RequiredAndNamed) {
  Result r = Whole([] { return NewRequiredToolParser(Counter()); },
                   "[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, "
                   "{\"name\": \"g\", \"arguments\": {}}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[1].name, "g");
  EXPECT_EQ(r.content, "");
  r = Whole([] { return NewNamedToolParser("f", Counter()); }, "{\"a\": 1}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": 1}");
  // Even nothing generated is a call of the named function.
  EXPECT_EQ(
      Whole([] { return NewNamedToolParser("f", Counter()); }, "").tool_calls,
      1);
}

TEST(ToolParserTest, ThinkSplitsReasoning) {
  Result r = Whole([] { return NewThinkParser(nullptr); },
                   "<think>\nStep 1.\n</think>\n\nThe answer.");
  EXPECT_EQ(r.reasoning, "\nStep 1.\n");
  EXPECT_EQ(r.content, "The answer.");
  r = Whole([] { return NewThinkParser(nullptr); },
            "No thinking <think>x</think>");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "No thinking <think>x</think>");
  r = Whole(
      [] { return NewThinkParser(NewToolParser("hermes", Counter())); },
      "<think>call f</think>\n<tool_call>{\"name\": \"f\", \"arguments\": "
      "{}}</tool_call>");
  EXPECT_EQ(r.reasoning, "call f");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
}

TEST(ToolParserTest, GenericCallsArrayOrText) {
  Result r = Whole(Tools("generic"),
                   "[{\"name\": \"f\", \"arguments\": "
                   "{\"a\": [1, {\"b\": \"}]\"}]}}, {\"name\": \"g\", "
                   "\"arguments\": {}}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "id0");
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": [1, {\"b\": \"}]\"}]}");
  EXPECT_EQ(r.calls[1].name, "g");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.tool_calls, 2);
  // A text answer, brackets and all, is content.
  r = Whole(Tools("generic"), "It is 21 C [as of now] {sunny}.");
  EXPECT_EQ(r.content, "It is 21 C [as of now] {sunny}.");
  EXPECT_TRUE(r.calls.empty());
  // An array that is not calls is content, whole.
  for (const std::string text : {"[1, 2]", "[{\"x\": 1}]"}) {
    r = Whole(Tools("generic"), text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
  }
  // Whitespace inside and around.
  r = Whole(Tools("generic"),
            " \n[ {\"name\":\"f\",\"arguments\":{}} ]\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "");
  ExpectSplitInvariant(Tools("generic"),
                       "[{\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Paris\"}}]");
  ExpectSplitInvariant(Tools("generic"), "[\"tool\" is a word]");
  ExpectSplitInvariant(Tools("generic"), "Plain [text].");
}

TEST(ToolParserTest, ReasoningOpenedByThePrompt) {
  // QwQ / DeepSeek-R1 templates end the prompt with "<think>\n": the output
  // starts inside the reasoning and only closes it.
  EXPECT_TRUE(ReasoningOpenedByPrompt(
      "think", "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(ReasoningOpenedByPrompt(
      "think", "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(ReasoningOpenedByPrompt("think", "<|im_start|>assistant\n"));
  EXPECT_FALSE(ReasoningOpenedByPrompt("none", "<think>\n"));
  EXPECT_FALSE(ReasoningOpenedByPrompt("no_such_format", "<think>\n"));
  const Factory opened = [] {
    return NewReasoningParser("think", nullptr, /*opened=*/true);
  };
  Result r = Whole(opened, "Step 1, step 2.\n</think>\n\nThe answer.");
  EXPECT_EQ(r.reasoning, "Step 1, step 2.\n");
  EXPECT_EQ(r.content, "The answer.");
  // Cut off before the block closes: all of it is reasoning.
  r = Whole(opened, "Still thinking <thi");
  EXPECT_EQ(r.reasoning, "Still thinking <thi");
  EXPECT_EQ(r.content, "");
  ExpectSplitInvariant(opened, "a</think>b");
  ExpectSplitInvariant(
      [] {
        return NewReasoningParser("think", NewToolParser("hermes", Counter()),
                                  /*opened=*/true);
      },
      "x</think>\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  // Not opened: the same text is content.
  r = Whole([] { return NewReasoningParser("think", nullptr); },
            "Step 1.</think>The answer.");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Step 1.</think>The answer.");
}

TEST(ToolParserTest, EveryCutGivesTheWholeTextParse) {
  const std::vector<std::pair<Factory, std::vector<std::string>>> cases = {
      {Tools("hermes"),
       {"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
        "\"arguments\": "
        "{\"city\": \"Pa\\\"ris}\", \"n\": [1, {\"x\": null}]}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"t\", \"arguments\": "
        "{}}\n</tool_call>\nDone.",
        "plain < text <tool_ca ll> with </tool_call> markup-like bits  ",
        "<tool_call>broken</tool_call> after",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru",
        "héllo 世界 <tool_call>{\"name\": \"é\", \"arguments\": {\"ü\": "
        "\"🙂\"}}"
        "</tool_call>"}},
      {Tools("llama3_json"),
       {"<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}; "
        "{\"name\": \"g\", \"parameters\": {}}",
        "  {\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}", "Just text.",
        "{\"answer\": [1, 2]} trailing", "<|python", ""}},
      {Tools("mistral"),
       {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, "
        "{\"name\": \"g\", \"arguments\": {\"b\": \"]\"}}]",
        "Sure. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
        "text [TOOL_CALL not a marker"}},
      {[] { return NewRequiredToolParser(Counter()); },
       {"[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, "
        "{\"name\": \"g\", \"arguments\": {\"s\": \"[x]\"}}]"}},
      {[] { return NewNamedToolParser("f", Counter()); }, {"{\"a\": [1, 2]}"}},
      {[] { return NewThinkParser(NewToolParser("hermes", Counter())); },
       {"<think>\nhmm </think\n</think>\n\nok <tool_call>{\"name\": \"f\", "
        "\"arguments\": {}}</tool_call>",
        "  <thin", "<think>never closed"}},
  };
  for (const auto& [make, texts] : cases) {
    for (const std::string& text : texts) ExpectSplitInvariant(make, text);
  }
}

TEST(ToolParserTest, MarkupNeverLeaksIntoContent) {
  for (const std::string name : {"hermes", "mistral", "llama3_json"}) {
    const Result r = Whole(
        Tools(name),
        name == "hermes"
            ? "a <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"
        : name == "mistral"
            ? "a [TOOL_CALLS]f[ARGS]{}"
            : "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}");
    ASSERT_EQ(r.calls.size(), 1u) << name;
    EXPECT_EQ(r.content.find("tool_call"), std::string::npos) << name;
    EXPECT_EQ(r.content.find("TOOL_CALLS"), std::string::npos) << name;
    EXPECT_EQ(r.content.find("python_tag"), std::string::npos) << name;
  }
}

TEST(ToolParserTest, DetectsTheFormatFromTheTemplate) {
  EXPECT_EQ(DetectToolParser("{{ '<tool_call>\\n' }}"), "hermes");
  EXPECT_EQ(DetectToolParser("[TOOL_CALLS] {{ x }}"), "mistral");
  EXPECT_EQ(DetectToolParser("{{ '<|python_tag|>' }}"), "llama3_json");
  EXPECT_EQ(DetectToolParser("{{ '<|im_start|>' }}"), "");
  // The pythonic templates' wording, even beside Llama's <|python_tag|>.
  EXPECT_EQ(DetectToolParser(
                "{{- '<|start_header_id|>system<|end_header_id|>' }}"
                "{{- 'Call tools in the format of [func_name1(params_name1="
                "params_value1, params_name2=params_value2...), "
                "func_name2(params)]' }}"
                "{{- '<|python_tag|>[' + tool_call.function.name + '(' }}"),
            "pythonic");
  EXPECT_EQ(DetectToolParser("[func_name1(param1=value1), func_name2(...)]"),
            "pythonic");
  EXPECT_EQ(DetectReasoningParser("<think>"), "think");
  EXPECT_EQ(NewToolParser("nope"), nullptr);
  EXPECT_TRUE(IsToolParser("hermes"));
  EXPECT_TRUE(IsToolParser("pythonic"));
  EXPECT_FALSE(IsToolParser("qwen"));
}

TEST(ToolParserTest, PythonicCallsWithTheirArgumentsAsJson) {
  const Result r = Whole(
      Tools("pythonic"),
      R"([get_weather(city="San Francisco", unit='celsius'), )"
      R"(find(query="x", n=3, exact=True, tags=["a", "b"], opts={"k": None})])");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "id0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments,
            R"({"city":"San Francisco","unit":"celsius"})");
  EXPECT_EQ(r.calls[1].id, "id1");
  EXPECT_EQ(r.calls[1].name, "find");
  EXPECT_EQ(r.calls[1].arguments,
            R"({"query":"x","n":3,"exact":true,"tags":["a","b"],)"
            R"("opts":{"k":null}})");
  // One delta per call: index, id, name and the whole arguments.
  ASSERT_EQ(r.deltas.size(), 2u);
  EXPECT_EQ(r.deltas[1].index, 1);
  EXPECT_EQ(r.deltas[1].name, "find");
  EXPECT_EQ(r.deltas[1].arguments, r.calls[1].arguments);
  EXPECT_EQ(r.tool_calls, 2);
}

TEST(ToolParserTest, PythonicLiteralValues) {
  Result r = Whole(Tools("pythonic"),
                   "[f(a=-1, b=2.5, c=-.5e-3, d=1E3, e=5., f=+7, "
                   "g=18446744073709551615, h=(1, 'x'), i=(), j=(7,), k=(8), "
                   "l=[[1, [2]], {'k': [True, False]}], m={}, "
                   "n={\"a\": 1, 'b': (None,), \"a\": 2})]");
  ASSERT_EQ(r.calls.size(), 1u) << r.content;
  EXPECT_EQ(
      r.calls[0].arguments,
      R"({"a":-1,"b":2.5,"c":-0.0005,"d":1000.0,"e":5.0,"f":7,)"
      R"("g":18446744073709551615,"h":[1,"x"],"i":[],"j":[7],"k":8,)"
      R"("l":[[1,[2]],{"k":[true,false]}],"m":{},"n":{"a":2,"b":[null]}})");
  // Whitespace and newlines wherever Python allows them; trailing commas.
  r = Whole(Tools("pythonic"),
            "[\n  f(\n    a = [1 ,2 ,] ,\n    b={ 'x' : 1 , } ,\n  ) ,\n]");
  ASSERT_EQ(r.calls.size(), 1u) << r.content;
  EXPECT_EQ(r.calls[0].arguments, R"({"a":[1,2],"b":{"x":1}})");
  EXPECT_EQ(r.content, "");
}

TEST(ToolParserTest, PythonicStringEscapesAndUnicode) {
  const Result r = Whole(
      Tools("pythonic"),
      R"PY([f(a="q\"b\\s\n\t", b='it\'s', c="\u00e9\U0001F600\ud83d\ude00\x41",)PY"
      R"PY( d="""two
lines "quoted" """, e='''x''', f="héllo 世界 🙂", g="\0\d", h="\udc00",)PY"
      R"PY( i='', j="a\
b", k='\101\7')])PY");
  ASSERT_EQ(r.calls.size(), 1u) << r.content;
  EXPECT_EQ(r.calls[0].arguments,
            R"({"a":"q\"b\\s\n\t","b":"it's","c":"é😀😀A",)"
            R"("d":"two\nlines \"quoted\" ","e":"x","f":"héllo 世界 🙂",)"
            R"("g":"\u0000\\d","h":"�","i":"","j":"ab","k":"A\u0007"})");
  EXPECT_EQ(r.content, "");
}

TEST(ToolParserTest, PythonicEmptyArgumentsMarkersAndTrailingText) {
  Result r = Whole(Tools("pythonic"), "[f()]");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.content, "");
  // Llama 4: the list between <|python_start|> and <|python_end|>.
  r = Whole(Tools("pythonic"),
            " \n<|python_start|> [get_time(), ns.get-weather(city='Oslo')] "
            "<|python_end|>\n\nDone.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[1].name, "ns.get-weather");
  EXPECT_EQ(r.calls[1].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.content, "Done.");
  r = Whole(Tools("pythonic"), "<|python_tag|>[f(a=1)]");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "");
  // Text after the list is content.
  r = Whole(Tools("pythonic"), "[f(a=1)] I called f.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "I called f.");
  // No markup reaches the content.
  r = Whole(Tools("pythonic"), "<|python_start|>[f()]<|python_end|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "");
  EXPECT_TRUE(ToolParserNeedsSpecialTokens("pythonic"));
}

TEST(ToolParserTest, PythonicNotACallListIsContentUnchanged) {
  for (const std::string text : {"[1, 2] is a list",
                                 "See [link](url).",
                                 "[link](url)",
                                 "[foo(x=1",
                                 "Hello [f()]",
                                 "[]",
                                 "[f(1)]",
                                 "[f(x=1, x=2)]",
                                 "[f(x=y)]",
                                 "[f(x=Truth)]",
                                 "[f(x='a\nb')]",
                                 "[f(x=\"unterminated)]",
                                 "[f(x=1.2.3)]",
                                 "[f(x={1: 2})]",
                                 "[f(x=0x10)]",
                                 "[f(x=g(1))]",
                                 "[(x=1)]",
                                 "[f(,)]",
                                 "<|python_start|>",
                                 "<|python_start|>Hi",
                                 "<|python_sta",
                                 "  \n",
                                 ""}) {
    const Result r = Whole(Tools("pythonic"), text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.tool_calls, 0) << text;
  }
  // A broken call after whole ones: the calls, then its text as content.
  Result r = Whole(Tools("pythonic"), "[f(x=1), 2]");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "2]");
  r = Whole(Tools("pythonic"), "[f(x=1) g()]");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "g()]");
  r = Whole(Tools("pythonic"), "[f(x=1), g(y=\"ab");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(r.content, "g(y=\"ab");
  // A list cut short (max_tokens) after a whole call: the call.
  for (const std::string text : {"[f(x=1)", "[f(x=1), "}) {
    r = Whole(Tools("pythonic"), text);
    ASSERT_EQ(r.calls.size(), 1u) << text;
    EXPECT_EQ(r.content, "") << text;
  }
}

TEST(ToolParserTest, PythonicCallComesOutWhenItsParenCloses) {
  std::unique_ptr<OutputParser> p = NewToolParser("pythonic", Counter());
  const std::string text = "<|python_start|>[f(a=\"x)\"), g(b=[1])]";
  std::vector<std::pair<size_t, ToolCallDelta>> deltas;
  for (size_t i = 0; i < text.size(); ++i) {
    ParsedDelta d = p->Feed(text.substr(i, 1));
    EXPECT_EQ(d.content, "") << i;
    for (auto& t : d.tool_calls) deltas.emplace_back(i, t);
  }
  EXPECT_TRUE(p->Finish().empty());
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[0].first, text.find("\")") + 1);
  EXPECT_EQ(deltas[0].second.index, 0);
  EXPECT_EQ(deltas[0].second.id, "id0");
  EXPECT_EQ(deltas[0].second.name, "f");
  EXPECT_EQ(deltas[0].second.arguments, R"J({"a":"x)"})J");
  EXPECT_EQ(deltas[1].first, text.size() - 2);
  EXPECT_EQ(deltas[1].second.index, 1);
  EXPECT_EQ(deltas[1].second.id, "id1");
  EXPECT_EQ(deltas[1].second.arguments, R"({"b":[1]})");
  // Plain text goes out as soon as it cannot be a call list.
  p = NewToolParser("pythonic", Counter());
  EXPECT_EQ(p->Feed(" ").content, "");
  EXPECT_EQ(p->Feed("[").content, "");
  EXPECT_EQ(p->Feed("1").content, " [1");
  EXPECT_EQ(p->Feed("]").content, "]");
}

TEST(ToolParserTest, PythonicEveryCutGivesTheWholeTextParse) {
  for (const std::string text :
       {R"([get_weather(city="San Francisco", unit='celsius'), )"
        R"(find(query="x", n=3, exact=True, tags=["a", "b"], )"
        R"(opts={"k": None})])",
        "[f(a=-1, b=2.5e+3, c=(1,), d=(), e={'k': [True, None]}, "
        "f='''x''', g=\"\"\"y\"\"\", h='', i=\"\")]",
        R"PY([f(s="\u00e9\ud83d\ude00\x41\n\\\"\'", t='\101\0')])PY",
        "  <|python_start|>[f(), g(x=\"héllo 世界\")]<|python_end|> Done.",
        "<|python_tag|>[f(x=1)]",
        "[f(x=1), 2]",
        "[f(x=1), g(y=\"ab",
        "[1, 2] is a list",
        "[link](url)",
        "[foo(x=1",
        "plain text",
        "<|python_start|>",
        "<|python_end|>",
        "[f(x=1)] after",
        "[]",
        "[f(x=Tru)]",
        "[f(x=-)]",
        "[f(x=1e)]",
        "[f(x=1), ",
        ""}) {
    ExpectSplitInvariant(Tools("pythonic"), text);
  }
}

std::string ReadTemplate(const std::string& name) {
  std::ifstream f(std::string(INFERD_SOURCE_DIR) +
                  "/tests/data/chat_templates/" + name + ".jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ToolParserTest, RealTemplatesPickTheirModelsFormats) {
  const std::vector<std::tuple<std::string, std::string, std::string>> want = {
      {"Qwen-Qwen2.5-7B-Instruct", "hermes", ""},
      {"Qwen-Qwen3-0.6B", "hermes", "think"},
      {"Qwen-QwQ-32B", "hermes", "think"},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "hermes", ""},
      {"meta-llama-Llama-3.1-8B-Instruct", "llama3_json", ""},
      {"meta-llama-Llama-3.2-3B-Instruct", "llama3_json", ""},
      {"mistralai-Mistral-Nemo-Instruct-2407", "mistral", ""},
      {"mistralai-Mistral-Small-3.2-24B-Instruct-2506", "mistral", ""},
      {"SmolLM2-135M-Instruct", "", ""},
      {"google-gemma-2-2b-it", "", ""},
  };
  for (const auto& [name, tools, reasoning] : want) {
    const std::string t = ReadTemplate(name);
    ASSERT_FALSE(t.empty()) << name;
    EXPECT_EQ(DetectToolParser(t), tools) << name;
    EXPECT_EQ(DetectReasoningParser(t), reasoning) << name;
  }
}

TEST(ToolParserTest, RegistryTakesMoreFormats) {
  ToolParserFormat f;
  f.make = [](ToolCallIdFn ids) {
    return NewNamedToolParser("echo", std::move(ids));
  };
  f.priority = -1;  // before the built-ins
  f.matches_template = [](absl::string_view t) {
    return t.find("<echo_call>") != absl::string_view::npos;
  };
  ASSERT_TRUE(RegisterToolParser("test_echo", "a test format", f).ok());
  EXPECT_EQ(RegisterToolParser("test_echo", "again", f).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterToolParser("hermes", "clash", f).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(IsToolParser("test_echo"));
  EXPECT_EQ(DetectToolParser("<echo_call> <tool_call>"), "test_echo");
  EXPECT_EQ(DetectToolParser("<tool_call>"), "hermes");
  const Result r = Whole(Tools("test_echo"), "{}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "echo");
  EXPECT_FALSE(ToolParserNeedsSpecialTokens("test_echo"));
  EXPECT_TRUE(ToolParserNeedsSpecialTokens("mistral"));
}

TEST(ToolParserTest, ReasoningFormatsAreARegistryToo) {
  EXPECT_EQ(ReasoningParserNames(), (std::vector<std::string>{"none", "think"}));
  EXPECT_TRUE(IsReasoningParser("think"));
  EXPECT_FALSE(IsReasoningParser("deepseek"));
  EXPECT_EQ(NewReasoningParser("deepseek", nullptr), nullptr);
  // The registered `think` is the think parser over the inner one.
  Result r = Whole(
      [] {
        return NewReasoningParser("think", NewToolParser("hermes", Counter()));
      },
      "<think>plan</think><tool_call>{\"name\": \"f\", \"arguments\": "
      "{}}</tool_call>");
  EXPECT_EQ(r.reasoning, "plan");
  ASSERT_EQ(r.calls.size(), 1u);
  // `none` hands the text to the inner parser untouched.
  r = Whole([] { return NewReasoningParser("none", NewNamedToolParser("f")); },
            "<think>{}</think>");
  EXPECT_EQ(r.reasoning, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "<think>{}</think>");
  // A new format: its own markers, picked from a template that writes them.
  ReasoningParserFormat f;
  f.make = [](std::unique_ptr<OutputParser> inner) {
    return NewThinkParser(std::move(inner));
  };
  f.matches_template = [](absl::string_view t) {
    return t.find("<reflect>") != absl::string_view::npos;
  };
  ASSERT_TRUE(RegisterReasoningParser("test_reflect", "a test", f, "t.so").ok());
  EXPECT_EQ(RegisterReasoningParser("think", "clash", f).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterReasoningParser("no_make", "x", ReasoningParserFormat())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DetectReasoningParser("{{ '<reflect>' }}"), "test_reflect");
  EXPECT_EQ(DetectReasoningParser("{{ '<|im_start|>' }}"), "");
}

TEST(ToolParserTest, RandomIds) {
  const std::string a = RandomToolCallId(), b = RandomToolCallId();
  EXPECT_EQ(a.substr(0, 5), "call_");
  EXPECT_EQ(a.size(), 29u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace inferd
