// Tool-call and reasoning parsers: turn a model's generated text into
// content, reasoning and tool calls, incrementally (a generation's text
// arrives in pieces) or whole (the same parser fed once). The formats are
// the models' own: `hermes` (<tool_call>{json}</tool_call>, Qwen2.5/Qwen3/
// SmolLM3/Hermes), `llama3_json` (an optional <|python_tag|>, then
// {"name": ..., "parameters"|"arguments": ...} objects separated by ';'),
// `mistral` ([TOOL_CALLS][{...}, ...] and [TOOL_CALLS]name[ARGS]{...}),
// plus the JSON forms a tool_choice constraint produces (`required`: an
// array of {"name", "arguments"}; a named function: its arguments object).
// Reasoning: `think` splits <think>...</think> off as reasoning.
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

namespace registry_kind {
// A tool-call format's name -> its ToolParserFormat.
inline constexpr char kToolParser[] = "tool_parser";
// The `reasoning_parser=` values (listed by --list-components).
inline constexpr char kReasoningParser[] = "reasoning_parser";
}  // namespace registry_kind

// A tool-call format, as registered (kind "tool_parser" in the process's
// Registry; the built-ins hermes, mistral and llama3_json register
// themselves on first use; a plug-in may add more).
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
// ALREADY_EXISTS when the name is taken.
absl::Status RegisterToolParser(std::string name, std::string description,
                                ToolParserFormat format,
                                std::string origin = "builtin");

// The tool-call formats by name (the `tool_parser=` values), sorted.
std::vector<std::string> ToolParserNames();
bool IsToolParser(absl::string_view name);
// The format a chat template writes, from its text (empty when it shows
// none): <tool_call> -> hermes, [TOOL_CALLS] -> mistral, <|python_tag|> or
// Llama 3's "parameters" JSON -> llama3_json (the first registered format,
// by priority, whose matches_template says so).
std::string DetectToolParser(absl::string_view chat_template);
// "think" when the template writes <think> (the `reasoning_parser=` values
// are "think" and "none"), else empty.
std::string DetectReasoningParser(absl::string_view chat_template);
bool IsReasoningParser(absl::string_view name);
// Whether the format's markers are special tokens that decoding must keep
// (Mistral's [TOOL_CALLS], Llama's <|python_tag|>).
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
// <think>...</think> at the start of the output becomes reasoning; the rest
// goes to `inner` (may be null: content).
std::unique_ptr<OutputParser> NewThinkParser(
    std::unique_ptr<OutputParser> inner);

}  // namespace inferd

#endif  // INFERD_RUNTIME_CHAT_TOOL_PARSER_H_
