// The generic tool-call format: tool calling on a model whose chat template
// shows no tool-call syntax of its own (SmolLM2, Gemma, Phi-3 ...). The
// tools are described in a system message, the output is constrained (by
// the request's structured output) to one JSON array of calls
//   [{"name": ..., "arguments": {...}}, ...]
// or, under tool_choice auto, to a plain text answer that does not start
// with '[' (nor whitespace); the `generic` tool parser (tool_parser.h) reads
// it back. (An object {"tool_calls": [...]} was tried first: SmolLM2-135M,
// told to write it, repeats the same call until max_tokens; told to write
// the array, it writes one call and closes it.) Earlier turns are rewritten
// into what such a template can show: an assistant's calls become that JSON
// as its text, tool results become a user turn. Pure functions;
// thread-safe.
#ifndef INFERD_RUNTIME_CHAT_GENERIC_TOOLS_H_
#define INFERD_RUNTIME_CHAT_GENERIC_TOOLS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/chat/chat_template.h"

namespace inferd {

// What the request asks of the tools.
enum class GenericToolMode {
  kAuto,      // a call or a text answer
  kRequired,  // at least one call
  kNamed,     // one call of `function`
};

// The instructions and tool list for the system message.
std::string GenericToolInstructions(const std::vector<ChatTool>& tools,
                                    GenericToolMode mode,
                                    const std::string& function);

// The JSON Schema of the calls: an array (at least one) whose items are
// each tool's {"name": const, "arguments": its parameters}; kNamed allows
// `function` only, once; `parallel` false allows one call.
nlohmann::ordered_json GenericToolSchema(const std::vector<ChatTool>& tools,
                                         GenericToolMode mode,
                                         const std::string& function,
                                         bool parallel);

// The conversation with the instructions in its system message (appended
// to the first one, or a new first message) and earlier tool turns
// rewritten: an assistant's tool_calls become its text (the calls array),
// a run of tool results one user message naming each call. With
// `system_in_user`, the instructions lead the first user message instead
// (templates that refuse a system role).
std::vector<ChatMessage> GenericToolConversation(
    std::vector<ChatMessage> messages, const std::string& instructions,
    bool system_in_user);

// Whether a conversation has tool turns (assistant tool_calls or a tool
// message).
bool HasToolTurns(const std::vector<ChatMessage>& messages);

}  // namespace inferd

#endif  // INFERD_RUNTIME_CHAT_GENERIC_TOOLS_H_
