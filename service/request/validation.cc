#include "service/request/validation.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/generic_tools.h"
#include "runtime/common/field_error.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return FieldError(field, absl::StrCat(": ", what));
}

absl::Status CheckCount(absl::string_view field, size_t n,
                        const ApiLimits& limits) {
  if (n == 0) return Invalid(field, "at least one input is required");
  if (n > static_cast<size_t>(limits.max_inputs_per_request)) {
    return Invalid(field, absl::StrCat(n, " inputs exceed the limit of ",
                                       limits.max_inputs_per_request,
                                       " per request (--max-inputs-per-"
                                       "request); split the request"));
  }
  return absl::OkStatus();
}

absl::Status CheckIds(absl::string_view field, const std::vector<int64_t>& ids,
                      int64_t vocab_size) {
  for (int64_t id : ids) {
    if (id < 0 || id > INT32_MAX || (vocab_size > 0 && id >= vocab_size)) {
      return Invalid(field, absl::StrCat("id ", id,
                                         " is outside the vocabulary [0, ",
                                         vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' &&
        c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

absl::Status ValidateParametersSchema(const std::string& field,
                                      const std::string& parameters) {
  auto schema = nlohmann::json::parse(parameters, nullptr, false);
  if (schema.is_discarded()) {
    return Invalid(field, "is not JSON (a JSON Schema as text)");
  }
  if (!schema.is_object()) {
    return Invalid(field, "is not a JSON Schema (must be an object)");
  }
  if (auto ty = schema.find("type");
      ty != schema.end() && !(ty->is_string() && *ty == "object")) {
    return Invalid(field, "must describe an object (\"type\": \"object\")");
  }
  // The keywords every template reads (tool.parameters.properties).
  if (auto pr = schema.find("properties");
      pr != schema.end() && !pr->is_object()) {
    return Invalid(field, "is not a JSON Schema: properties must be an object");
  }
  if (auto rq = schema.find("required"); rq != schema.end()) {
    bool ok = rq->is_array();
    for (const auto& x : ok ? *rq : nlohmann::json::array()) ok &= x.is_string();
    if (!ok) {
      return Invalid(field, "is not a JSON Schema: required must be a list of "
                            "property names");
    }
  }
  return absl::OkStatus();
}

// Exactly one input; ids in the vocabulary.
absl::Status ValidatePromptInput(const GenerateInput& in,
                                 const ServedModelInfo& model) {
  const GenerateParams& p = in.params;
  const int given = (p.prompt.has_value() ? 1 : 0) +
                    (in.prompt_token_ids.has_value() ? 1 : 0) +
                    (p.messages.empty() ? 0 : 1);
  if (given > 1) {
    return Invalid(p.messages.empty() ? "prompt_token_ids" : "messages",
                   "give messages, prompt or prompt_token_ids, not several");
  }
  if (given == 0) {
    return Invalid("prompt", "set prompt, prompt_token_ids or messages");
  }
  if (in.prompt_token_ids.has_value()) {
    if (in.prompt_token_ids->empty()) {
      return Invalid("prompt_token_ids", "must not be empty");
    }
    RETURN_IF_ERROR(
        CheckIds("prompt_token_ids", *in.prompt_token_ids, model.vocab_size));
  }
  return ValidateMessages(p.messages);
}

absl::Status ValidateToolChoice(const GenerateInput& in) {
  const GenerateParams& p = in.params;
  const ToolChoice& tc = in.tool_choice;
  if (p.tools.empty()) {
    if (tc.mode != ToolChoice::Mode::kUnset &&
        tc.mode != ToolChoice::Mode::kNone) {
      return Invalid("tool_choice", "needs tools");
    }
    return absl::OkStatus();
  }
  if (p.messages.empty()) {
    return Invalid("tools", "need messages (a conversation for the chat "
                            "template), not a prompt");
  }
  RETURN_IF_ERROR(ValidateTools(p.tools));
  if (tc.mode == ToolChoice::Mode::kFunction) {
    bool found = false;
    for (const ChatTool& t : p.tools) found |= t.name == tc.function;
    if (!found) {
      return Invalid("tool_choice.function_name",
                     absl::StrCat("'", tc.function,
                                  "' is not one of the request's tools"));
    }
  }
  const bool constrained = tc.mode == ToolChoice::Mode::kFunction ||
                           tc.mode == ToolChoice::Mode::kRequired;
  if (constrained &&
      p.sampling.response_format.type != ResponseFormat::Type::kText) {
    return Invalid("response_format",
                   "cannot be combined with tool_choice required or a "
                   "named function (both constrain the output)");
  }
  return absl::OkStatus();
}

// Sampling ids against the vocabulary and max_tokens against the context
// (SamplingParams::Validate checks the ranges).
absl::Status ValidateSamplingForModel(const SamplingParams& s,
                                      const ServedModelInfo& model) {
  if (model.max_input_tokens > 0 && s.max_tokens > model.max_input_tokens) {
    return Invalid("sampling.max_tokens",
                   absl::StrCat(s.max_tokens, " exceeds the model's context "
                                "of ", model.max_input_tokens, " tokens"));
  }
  for (int32_t id : s.stop_token_ids) {
    if (id >= 0 && model.vocab_size > 0 && id >= model.vocab_size) {
      return Invalid("sampling.stop_token_ids",
                     absl::StrCat("id ", id, " is outside the vocabulary"));
    }
  }
  for (const auto& [id, bias] : s.logit_bias) {
    if (id >= 0 && model.vocab_size > 0 && id >= model.vocab_size) {
      return Invalid("sampling.logit_bias",
                     absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                  model.vocab_size, ")"));
    }
  }
  return s.Validate();
}

// The JSON Schema of a tool's arguments (an object schema).
nlohmann::ordered_json ArgumentsSchema(const ChatTool& t) {
  if (t.parameters.empty()) return {{"type", "object"}};
  return nlohmann::ordered_json::parse(t.parameters);
}

}  // namespace

absl::Status ValidateMessages(const std::vector<ChatMessage>& messages) {
  if (messages.size() > static_cast<size_t>(kMaxChatMessages)) {
    return Invalid("messages", absl::StrCat(messages.size(),
                                            " messages; at most ",
                                            kMaxChatMessages));
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role.empty()) {
      return Invalid(absl::StrCat("messages[", i, "].role"),
                     "must not be empty (e.g. \"user\")");
    }
    if (!m.tool_calls.empty() && m.role != "assistant") {
      return Invalid(absl::StrCat("messages[", i, "].tool_calls"),
                     "only assistant messages call tools");
    }
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      const ChatToolCall& t = m.tool_calls[j];
      const std::string field =
          absl::StrCat("messages[", i, "].tool_calls[", j, "]");
      if (t.name.empty()) {
        return Invalid(absl::StrCat(field, ".name"), "must not be empty");
      }
      if (!t.arguments.empty() &&
          nlohmann::json::parse(t.arguments, nullptr, false).is_discarded()) {
        return Invalid(absl::StrCat(field, ".arguments"), "must be JSON text");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTools(const std::vector<ChatTool>& tools) {
  if (tools.size() > static_cast<size_t>(kMaxTools)) {
    return Invalid("tools",
                   absl::StrCat(tools.size(), " tools; at most ", kMaxTools));
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const ChatTool& t = tools[i];
    if (!ValidToolName(t.name)) {
      return Invalid(absl::StrCat("tools[", i, "].name"),
                     "must be 1 to 64 letters, digits, '_', '-' or '.'");
    }
    for (size_t j = 0; j < i; ++j) {
      if (tools[j].name == t.name) {
        return Invalid(absl::StrCat("tools[", i, "].name"),
                       absl::StrCat("'", t.name, "' is defined twice"));
      }
    }
    if (!t.parameters.empty()) {
      RETURN_IF_ERROR(ValidateParametersSchema(
          absl::StrCat("tools[", i, "].parameters"), t.parameters));
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const GenerateInput& in, const ServedModelInfo& model) {
  RETURN_IF_ERROR(ValidatePromptInput(in, model));
  RETURN_IF_ERROR(ValidateToolChoice(in));
  RETURN_IF_ERROR(in.params.speculative.Validate());
  return ValidateSamplingForModel(in.params.sampling, model);
}

ToolPlan PlanTools(GenerateInput* in, bool generic) {
  ToolPlan plan;
  GenerateParams& p = in->params;
  if (p.tools.empty()) return plan;
  switch (in->tool_choice.mode) {
    case ToolChoice::Mode::kNone: plan.mode = ToolPlan::Mode::kNone; break;
    case ToolChoice::Mode::kRequired: plan.mode = ToolPlan::Mode::kRequired; break;
    case ToolChoice::Mode::kFunction:
      plan.mode = ToolPlan::Mode::kNamed;
      plan.function = in->tool_choice.function;
      break;
    default: plan.mode = ToolPlan::Mode::kAuto; break;
  }
  plan.generic = generic && plan.mode != ToolPlan::Mode::kNone;
  bool strict = true;
  for (const ChatTool& t : p.tools) {
    if (plan.mode != ToolPlan::Mode::kNamed || t.name == plan.function) {
      strict &= t.strict;
    }
  }
  // The constraint: llguidance keeps the schema's property order, so the
  // name comes before the arguments (ordered_json).
  nlohmann::ordered_json schema;
  ResponseFormat& format = p.sampling.response_format;
  if (plan.generic) {
    const GenericToolMode mode =
        plan.mode == ToolPlan::Mode::kAuto       ? GenericToolMode::kAuto
        : plan.mode == ToolPlan::Mode::kRequired ? GenericToolMode::kRequired
                                                 : GenericToolMode::kNamed;
    // Under auto, a response_format of the request's own wins: the answer
    // takes that shape and no call is possible.
    if (mode == GenericToolMode::kAuto &&
        format.type != ResponseFormat::Type::kText) {
      return plan;
    }
    schema = GenericToolSchema(p.tools, mode, plan.function,
                               in->parallel_tool_calls.value_or(true));
    format.or_text = mode == GenericToolMode::kAuto;
  } else if (plan.mode == ToolPlan::Mode::kNamed) {
    for (const ChatTool& t : p.tools) {
      if (t.name == plan.function) schema = ArgumentsSchema(t);
    }
  } else if (plan.mode == ToolPlan::Mode::kRequired) {
    // The same array of calls the generic format writes.
    schema = GenericToolSchema(p.tools, GenericToolMode::kRequired, "",
                               in->parallel_tool_calls.value_or(true));
  } else {
    return plan;
  }
  format.type = ResponseFormat::Type::kJsonSchema;
  format.spec = schema.dump();
  format.strict = strict;
  return plan;
}

absl::Status Validate(const EmbedInput& in, const ServedModelInfo& model,
                      const ApiLimits& limits) {
  const EmbedParams& p = in.params;
  if (!p.texts.empty() && !in.token_ids.empty()) {
    return FieldErrorMessage("token_ids",
                             "texts/token_ids: give texts or token_ids, not "
                             "both");
  }
  RETURN_IF_ERROR(
      CheckCount("texts", p.texts.size() + in.token_ids.size(), limits));
  for (const std::vector<int64_t>& ids : in.token_ids) {
    RETURN_IF_ERROR(CheckIds("token_ids", ids, model.vocab_size));
    if (ids.empty()) return Invalid("token_ids", "an input has no tokens");
  }
  if (p.dimensions < 0) return Invalid("dimensions", "must be positive");
  if (p.dimensions > 0 && model.embedding_dims > 0 &&
      p.dimensions > model.embedding_dims) {
    return Invalid("dimensions",
                   absl::StrCat(p.dimensions, " is larger than the model's "
                                "embedding size ", model.embedding_dims));
  }
  if (!p.prompt_name.empty() && !p.prompt.empty()) {
    return Invalid("prompt_name", "give prompt_name or prompt, not both");
  }
  if (!p.prompt_name.empty() &&
      std::find(model.prompt_names.begin(), model.prompt_names.end(),
                p.prompt_name) == model.prompt_names.end()) {
    return Invalid("prompt_name",
                   absl::StrCat("'", p.prompt_name, "' is not a prompt of "
                                "this model; it has: [",
                                absl::StrJoin(model.prompt_names, ", "), "]"));
  }
  if (!p.prompt.empty() && !in.token_ids.empty()) {
    return Invalid("prompt", "a prompt prefix needs texts, not token_ids");
  }
  // Whether the model has the sparse / multi-vector heads is the engine's
  // check (FAILED_PRECONDITION naming the missing file).
  if (p.want_sparse_tokens && !p.want_sparse) {
    return Invalid("outputs.sparse_tokens", "needs outputs.sparse");
  }
  return absl::OkStatus();
}

absl::Status Validate(const RerankInput& in, const ApiLimits& limits) {
  if (in.params.query.empty()) return Invalid("query", "must not be empty");
  if (in.top_n < 0) return Invalid("top_n", "must be 0 or more");
  return CheckCount("documents", in.params.documents.size(), limits);
}

absl::Status Validate(const ClassifyInput& in, const ApiLimits& limits) {
  const ClassifyParams& p = in.params;
  if (!p.texts.empty() && !p.pairs.empty()) {
    return FieldErrorMessage("pairs",
                             "texts/pairs: give texts or pairs, not both");
  }
  return CheckCount("texts", p.texts.size() + p.pairs.size(), limits);
}

absl::Status Validate(const TokenizeInput& in) {
  const bool chat = !in.messages.empty();
  if (!chat && !in.tools.empty()) return Invalid("tools", "need messages");
  if (chat && !in.text.empty()) {
    return Invalid("messages", "give text or messages, not both");
  }
  RETURN_IF_ERROR(ValidateMessages(in.messages));
  return ValidateTools(in.tools);
}

}  // namespace inferd
