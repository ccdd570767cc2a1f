// Tool-call and reasoning parsers: turn a model's generated text into
// content, reasoning and tool calls, incrementally (a generation's text
// arrives in pieces) or whole (the same parser fed once). The formats are
// the models' own: `hermes` (<tool_call>{json}</tool_call>, Qwen2.5/Qwen3/
// SmolLM3/Hermes), `llama3_json` (an optional <|python_tag|>, then
// {"name": ..., "parameters"|"arguments": ...} objects separated by ';'),
// `mistral` ([TOOL_CALLS][{...}, ...] and [TOOL_CALLS]name[ARGS]{...}),
// `pythonic` (a Python list of calls, [f(a=1), g(b="x")], Llama 3.2/4 and
// ToolACE; pythonic_parser.cc), plus the JSON forms a tool_choice constraint
// produces (`required`: an array of {"name", "arguments"}; a named function:
// its arguments object) and `generic` (that array, or a text answer:
// generic_tools.h, for templates without a format of their own).
// Reasoning: `think` splits <think>...</think> off as reasoning (also when
// the prompt opened the block and the output only closes it). Both kinds
// are registries (runtime/common/registry.h) a plug-in can add to.
//
// A parser's decisions depend only on the text seen so far, never on where
// the pieces were cut, so the concatenation of the deltas equals what one
// Feed of the whole text returns. Markup never reaches `content`.
// Not thread-safe: one parser per generated sample. The registry functions
// are thread-safe.
#ifndef INFERD_RUNTIME_CHAT_TOOL_PARSER_H_
#define INFERD_RUNTIME_CHAT_TOOL_PARSER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/common/registry.h"

namespace inferd {

// A piece of one tool call: the first delta of call `index` has its id and
// name, later ones add `arguments` text (JSON, concatenated in order).
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

// What a piece of generated text turned into.
struct ParsedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const {
    return content.empty() && reasoning.empty() && tool_calls.empty();
  }
  void Append(ParsedDelta other);
};

// A whole tool call (the deltas of one index joined).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};
// Joins deltas by index, in index order.
std::vector<ToolCall> JoinToolCalls(const std::vector<ToolCallDelta>& deltas);

// Makes a tool call's id.
using ToolCallIdFn = std::function<std::string()>;
// OpenAI's shape: "call_" + 24 random letters and digits.
std::string RandomToolCallId();
// Mistral's templates demand 9 letters and digits.
std::string RandomMistralToolCallId();

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  // The next piece of generated text.
  virtual ParsedDelta Feed(absl::string_view text) = 0;
  // The end of the generation: whatever was held back.
  virtual ParsedDelta Finish() = 0;
  // How many tool calls were started so far.
  virtual int tool_calls() const { return 0; }
};

// A tool-call format, as registered in the tool_parser kind (ToolParsers();
// the built-ins hermes, mistral, llama3_json and pythonic are registered by
// RegisterChatBuiltins; a plug-in may add more).
struct ToolParserFormat {
  // A parser; `ids` null: the format's own id maker.
  std::function<std::unique_ptr<OutputParser>(ToolCallIdFn ids)> make;
  // Its markers are special tokens that decoding must keep.
  bool keep_special_tokens = false;
  // DetectToolParser tries formats by priority (lower first), then name.
  int priority = 100;
  // Whether a chat template writes this format (may be null: never picked
  // from a template, only by tool_parser=).
  std::function<bool(absl::string_view chat_template)> matches_template;
};

// A reasoning format, as registered in the reasoning_parser kind
// (ReasoningParsers(); the built-ins are `think` and `none`).
struct ReasoningParserFormat {
  // The parser: reasoning first, then the rest of the text goes to `inner`
  // (may be null: content). `none` returns `inner` itself.
  std::function<std::unique_ptr<OutputParser>(
      std::unique_ptr<OutputParser> inner)>
      make;
  // Whether a chat template writes this format (may be null).
  std::function<bool(absl::string_view chat_template)> matches_template;
  // The parser when the prompt opened the reasoning block (QwQ,
  // DeepSeek-R1 and Qwen3 templates end the prompt inside <think>): the
  // output starts as reasoning. May be null (the format has no such form).
  std::function<std::unique_ptr<OutputParser>(
      std::unique_ptr<OutputParser> inner)>
      make_opened;
  // Whether a rendered prompt opened the block (may be null).
  std::function<bool(absl::string_view prompt)> opened_by_prompt;
};

// The tool_parser kind's registry (the `tool_parser=` values).
Registry<ToolParserFormat>& ToolParsers();
// The reasoning_parser kind's registry (the `reasoning_parser=` values).
Registry<ReasoningParserFormat>& ReasoningParsers();

// Registers the chat layer's built-ins: the tool-call formats hermes,
// mistral, llama3_json, pythonic and the reasoning parsers think and none.
// Called once at start-up (RegisterBuiltins, or the main of a tool that links
// only this layer); idempotent.
void RegisterChatBuiltins();

// ALREADY_EXISTS when the name is taken; INVALID_ARGUMENT without `make`.
absl::Status RegisterToolParser(std::string name, std::string description,
                                ToolParserFormat format,
                                std::string origin = "builtin");
absl::Status RegisterReasoningParser(std::string name,
                                     std::string description,
                                     ReasoningParserFormat format,
                                     std::string origin = "builtin");

// The tool-call formats by name (the `tool_parser=` values), sorted.
std::vector<std::string> ToolParserNames();
bool IsToolParser(absl::string_view name);
// The format a chat template writes, from its text (empty when it shows
// none): <tool_call> -> hermes, [TOOL_CALLS] -> mistral, <|python_tag|> or
// Llama 3's "parameters" JSON -> llama3_json, the pythonic templates'
// "[func_name1(params_name1=params_value1, ...)]" -> pythonic (the first
// registered format, by priority, whose matches_template says so).
std::string DetectToolParser(absl::string_view chat_template);
// The reasoning format a template writes (`think` when it writes <think>),
// else empty.
std::string DetectReasoningParser(absl::string_view chat_template);
// The `reasoning_parser=` values, sorted.
std::vector<std::string> ReasoningParserNames();
bool IsReasoningParser(absl::string_view name);
// Whether the format's markers are special tokens that decoding must keep
// (Mistral's [TOOL_CALLS], Llama's <|python_tag|> and <|python_start|>).
bool ToolParserNeedsSpecialTokens(absl::string_view name);

// A parser for `name` (nullptr if unknown). `ids` null: the format's
// default id maker.
std::unique_ptr<OutputParser> NewToolParser(absl::string_view name,
                                            ToolCallIdFn ids = nullptr);
// tool_choice "required": the text is a JSON array of {"name", "arguments"}.
std::unique_ptr<OutputParser> NewRequiredToolParser(ToolCallIdFn ids = nullptr);
// tool_choice naming `function`: the text is its arguments object.
std::unique_ptr<OutputParser> NewNamedToolParser(std::string function,
                                                 ToolCallIdFn ids = nullptr);
// The `pythonic` format: the output is a Python list of calls with keyword
// arguments, [f(a=1, b="x"), g()], optionally after <|python_start|> (and
// closed by <|python_end|>) or <|python_tag|>; the arguments' Python
// literals become JSON. Output that is no such list is content, unchanged.
std::unique_ptr<OutputParser> NewPythonicToolParser(ToolCallIdFn ids = nullptr);
// <think>...</think> at the start of the output becomes reasoning; the rest
// goes to `inner` (may be null: content).
std::unique_ptr<OutputParser> NewThinkParser(
    std::unique_ptr<OutputParser> inner);
// The reasoning parser `name` over `inner`; nullptr if `name` is unknown.
// `opened`: the prompt opened the reasoning block (ReasoningOpenedByPrompt).
std::unique_ptr<OutputParser> NewReasoningParser(
    absl::string_view name, std::unique_ptr<OutputParser> inner,
    bool opened = false);
// Whether the rendered `prompt` ends inside format `name`'s reasoning block
// (a <think> not closed, for `think`).
bool ReasoningOpenedByPrompt(absl::string_view name, absl::string_view prompt);

}  // namespace inferd

#endif  // INFERD_RUNTIME_CHAT_TOOL_PARSER_H_
