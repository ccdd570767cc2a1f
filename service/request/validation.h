// One check per request type, for every front end: the request layer calls
// these on what a front end read from its wire format (requests.h). Errors
// are INVALID_ARGUMENT (FAILED_PRECONDITION where the model lacks
// something) whose payload names the field by its inferd.v1 path
// (runtime/common/field_error.h: `sampling.max_tokens`, `tools[1].name`),
// which each front end renames in its own terms. Pure functions;
// thread-safe.
#ifndef INFERD_SERVICE_REQUEST_VALIDATION_H_
#define INFERD_SERVICE_REQUEST_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/engine/model_info.h"
#include "service/request/requests.h"

namespace inferd {

// Input (one of prompt, prompt ids, messages; ids in the vocabulary),
// messages, tools and tool_choice, sampling ranges and ids, max_tokens
// against the model's context, speculative decoding.
absl::Status Validate(const GenerateInput& in, const ServedModelInfo& model);
absl::Status Validate(const EmbedInput& in, const ServedModelInfo& model,
                      const ApiLimits& limits);
absl::Status Validate(const RerankInput& in, const ApiLimits& limits);
absl::Status Validate(const ClassifyInput& in, const ApiLimits& limits);
absl::Status Validate(const TokenizeInput& in);

// The messages of a request: roles set, tool calls on assistant messages
// only, named, with JSON arguments.
absl::Status ValidateMessages(const std::vector<ChatMessage>& messages);
// The tools of a request: names (1 to 64 of [A-Za-z0-9_.-], each once),
// parameters an object JSON Schema.
absl::Status ValidateTools(const std::vector<ChatTool>& tools);

// What a validated Generate request asks of tool calling.
struct ToolPlan {
  enum class Mode {
    kOff,       // no tools
    kNone,      // tools rendered, output not parsed
    kAuto,      // the model's own format parsed
    kRequired,  // constrained to an array of {"name", "arguments"}
    kNamed,     // constrained to `function`'s arguments
  };
  Mode mode = Mode::kOff;
  std::string function;
  // The generic format (runtime/chat/generic_tools.h): the model's template
  // shows no tool-call format; tools described in a system message, output
  // a JSON array of calls (or text, under auto).
  bool generic = false;
};
// The plan of a validated request; for required or a named function it
// sets in->params.sampling.response_format to the constraint (the tools'
// parameters schemas; llguidance keeps their property order). `generic`:
// the model has no tool-call format of its own, so auto, required and named
// all take the generic format's constraint (auto: the calls or text,
// unless the request set a response_format of its own).
ToolPlan PlanTools(GenerateInput* in, bool generic = false);

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_VALIDATION_H_
