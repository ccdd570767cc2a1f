#include "service/convert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
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

}  // namespace

absl::StatusOr<EmbedParams> ToEmbedParams(const v1::EmbedRequest& req,
                                          const ServedModelInfo& model,
                                          const ApiLimits& limits,
                                          absl::Time deadline) {
  EmbedParams p;
  if (req.texts_size() > 0 && req.token_ids_size() > 0) {
    return FieldErrorMessage("token_ids", "texts/token_ids: give texts or token_ids, not both");
  }
  size_t n = req.texts_size() + req.token_ids_size();
  if (auto s = CheckCount("texts", n, limits); !s.ok()) return s;
  p.texts.assign(req.texts().begin(), req.texts().end());
  for (const v1::TokenIds& t : req.token_ids()) {
    std::vector<int32_t> ids;
    for (uint32_t id : t.ids()) {
      if (static_cast<int64_t>(id) >= model.vocab_size) {
        return Invalid("token_ids", absl::StrCat("id ", id,
                                                 " is outside the vocabulary "
                                                 "[0, ", model.vocab_size, ")"));
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    if (ids.empty()) return Invalid("token_ids", "an input has no tokens");
    p.token_ids.push_back(std::move(ids));
  }
  if (req.has_normalize()) p.normalize = req.normalize();
  if (req.dimensions() > 0) {
    if (model.embedding_dims > 0 &&
        static_cast<int64_t>(req.dimensions()) > model.embedding_dims) {
      return Invalid("dimensions",
                     absl::StrCat(req.dimensions(), " is larger than the "
                                  "model's embedding size ",
                                  model.embedding_dims));
    }
    p.dimensions = req.dimensions();
  }
  p.truncate = req.truncate();
  p.truncate_left = req.truncation_side() == v1::TRUNCATION_SIDE_LEFT;
  switch (req.pooling()) {
    case v1::POOLING_CLS: p.pooling = "cls"; break;
    case v1::POOLING_MEAN: p.pooling = "mean"; break;
    case v1::POOLING_LAST: p.pooling = "last"; break;
    case v1::POOLING_MAX: p.pooling = "max"; break;
    default: break;
  }
  if (!req.prompt_name().empty() && !req.prompt().empty()) {
    return Invalid("prompt_name", "give prompt_name or prompt, not both");
  }
  if (!req.prompt_name().empty() &&
      std::find(model.prompt_names.begin(), model.prompt_names.end(),
                req.prompt_name()) == model.prompt_names.end()) {
    return Invalid("prompt_name",
                   absl::StrCat("'", req.prompt_name(), "' is not a prompt of "
                                "this model; it has: [",
                                absl::StrJoin(model.prompt_names, ", "), "]"));
  }
  if (!req.prompt().empty() && !req.token_ids().empty()) {
    return Invalid("prompt", "a prompt prefix needs texts, not token_ids");
  }
  p.prompt_name = req.prompt_name();
  p.prompt = req.prompt();
  // Whether the model has the sparse / multi-vector heads is the engine's
  // check (FAILED_PRECONDITION naming the missing file).
  const v1::EmbedOutputs& outputs = req.outputs();
  p.want_sparse = outputs.sparse();
  p.want_multi_vector = outputs.multi_vector();
  p.want_sparse_tokens = outputs.sparse_tokens();
  p.want_dense = outputs.dense() || (!p.want_sparse && !p.want_multi_vector);
  if (p.want_sparse_tokens && !p.want_sparse) {
    return Invalid("outputs.sparse_tokens", "needs outputs.sparse");
  }
  p.deadline = deadline;
  return p;
}

absl::StatusOr<ClassifyParams> ToClassifyParams(const v1::ClassifyRequest& req,
                                                const ApiLimits& limits,
                                                absl::Time deadline) {
  ClassifyParams p;
  if (req.texts_size() > 0 && req.pairs_size() > 0) {
    return FieldErrorMessage("pairs", "texts/pairs: give texts or pairs, not both");
  }
  if (auto s = CheckCount("texts", req.texts_size() + req.pairs_size(), limits);
      !s.ok()) {
    return s;
  }
  p.texts.assign(req.texts().begin(), req.texts().end());
  for (const v1::TextPair& pair : req.pairs()) {
    p.pairs.emplace_back(pair.first(), pair.second());
  }
  p.truncate = req.truncate();
  p.raw_scores = req.raw_scores();
  p.deadline = deadline;
  return p;
}

absl::StatusOr<RerankParams> ToRerankParams(const v1::RerankRequest& req,
                                            const ApiLimits& limits,
                                            absl::Time deadline) {
  RerankParams p;
  if (req.query().empty()) return Invalid("query", "must not be empty");
  if (auto s = CheckCount("documents", req.documents_size(), limits); !s.ok()) {
    return s;
  }
  p.query = req.query();
  p.documents.assign(req.documents().begin(), req.documents().end());
  p.truncate = req.has_truncate() ? req.truncate() : true;
  p.raw_scores = req.raw_scores();
  p.deadline = deadline;
  return p;
}

absl::Status ToChatMessages(
    const google::protobuf::RepeatedPtrField<v1::ChatMessage>& in,
    std::vector<ChatMessage>* out) {
  if (in.size() > kMaxChatMessages) {
    return Invalid("messages", absl::StrCat(in.size(), " messages; at most ",
                                            kMaxChatMessages));
  }
  for (int i = 0; i < in.size(); ++i) {
    if (in[i].role().empty()) {
      return Invalid(absl::StrCat("messages[", i, "].role"),
                     "must not be empty (e.g. \"user\")");
    }
    const v1::ChatMessage& m = in[i];
    ChatMessage c{m.role(), m.content()};
    if (m.tool_calls_size() > 0 && m.role() != "assistant") {
      return Invalid(absl::StrCat("messages[", i, "].tool_calls"),
                     "only assistant messages call tools");
    }
    for (int j = 0; j < m.tool_calls_size(); ++j) {
      const v1::ToolCall& t = m.tool_calls(j);
      const std::string field =
          absl::StrCat("messages[", i, "].tool_calls[", j, "]");
      if (t.name().empty()) {
        return Invalid(absl::StrCat(field, ".name"), "must not be empty");
      }
      if (!t.arguments().empty() &&
          nlohmann::json::parse(t.arguments(), nullptr, false).is_discarded()) {
        return Invalid(absl::StrCat(field, ".arguments"), "must be JSON text");
      }
      c.tool_calls.push_back(ChatToolCall{t.id(), t.name(), t.arguments()});
    }
    c.tool_call_id = m.tool_call_id();
    c.name = m.name();
    c.reasoning_content = m.reasoning_content();
    out->push_back(std::move(c));
  }
  return absl::OkStatus();
}

namespace {

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

// The JSON Schema of a tool's arguments (an object schema).
nlohmann::ordered_json ArgumentsSchema(const ChatTool& t) {
  if (t.parameters.empty()) return {{"type", "object"}};
  return nlohmann::ordered_json::parse(t.parameters);
}

}  // namespace

absl::Status ToChatTools(const google::protobuf::RepeatedPtrField<v1::Tool>& in,
                         std::vector<ChatTool>* out) {
  if (in.size() > kMaxTools) {
    return Invalid("tools", absl::StrCat(in.size(), " tools; at most ",
                                         kMaxTools));
  }
  for (int i = 0; i < in.size(); ++i) {
    const v1::Tool& t = in[i];
    if (!ValidToolName(t.name())) {
      return Invalid(absl::StrCat("tools[", i, "].name"),
                     "must be 1 to 64 letters, digits, '_', '-' or '.'");
    }
    for (int j = 0; j < i; ++j) {
      if (in[j].name() == t.name()) {
        return Invalid(absl::StrCat("tools[", i, "].name"),
                       absl::StrCat("'", t.name(), "' is defined twice"));
      }
    }
    if (!t.parameters().empty()) {
      auto schema = nlohmann::json::parse(t.parameters(), nullptr, false);
      if (schema.is_discarded()) {
        return Invalid(absl::StrCat("tools[", i, "].parameters"),
                       "is not JSON (a JSON Schema as text)");
      }
      if (!schema.is_object()) {
        return Invalid(absl::StrCat("tools[", i, "].parameters"),
                       "is not a JSON Schema (must be an object)");
      }
      if (auto ty = schema.find("type");
          ty != schema.end() && !(ty->is_string() && *ty == "object")) {
        return Invalid(absl::StrCat("tools[", i, "].parameters"),
                       "must describe an object (\"type\": \"object\")");
      }
      // The keywords every template reads (tool.parameters.properties).
      if (auto pr = schema.find("properties");
          pr != schema.end() && !pr->is_object()) {
        return Invalid(absl::StrCat("tools[", i, "].parameters"),
                       "is not a JSON Schema: properties must be an object");
      }
      if (auto rq = schema.find("required"); rq != schema.end()) {
        bool ok = rq->is_array();
        for (const auto& x : ok ? *rq : nlohmann::json::array()) ok &= x.is_string();
        if (!ok) {
          return Invalid(absl::StrCat("tools[", i, "].parameters"),
                         "is not a JSON Schema: required must be a list of "
                         "property names");
        }
      }
    }
    out->push_back(ChatTool{t.name(), t.description(), t.parameters()});
  }
  return absl::OkStatus();
}

absl::StatusOr<ToolPlan> ToToolPlan(const v1::GenerateRequest& req,
                                    GenerateParams* p) {
  ToolPlan plan;
  if (req.tools_size() == 0) {
    if (req.has_tool_choice() &&
        !(req.tool_choice().choice_case() == v1::ToolChoice::kMode &&
          (req.tool_choice().mode() == v1::TOOL_CHOICE_MODE_NONE ||
           req.tool_choice().mode() == v1::TOOL_CHOICE_MODE_UNSPECIFIED))) {
      return Invalid("tool_choice", "needs tools");
    }
    return plan;
  }
  if (req.messages_size() == 0) {
    return Invalid("tools", "need messages (a conversation for the chat "
                            "template), not a prompt");
  }
  RETURN_IF_ERROR(ToChatTools(req.tools(), &p->tools));
  plan.mode = ToolPlan::Mode::kAuto;
  if (req.has_tool_choice()) {
    const v1::ToolChoice& tc = req.tool_choice();
    if (tc.choice_case() == v1::ToolChoice::kFunctionName) {
      plan.mode = ToolPlan::Mode::kNamed;
      plan.function = tc.function_name();
      bool found = false;
      for (const ChatTool& t : p->tools) found |= t.name == plan.function;
      if (!found) {
        return Invalid("tool_choice.function_name",
                       absl::StrCat("'", plan.function,
                                    "' is not one of the request's tools"));
      }
    } else if (tc.mode() == v1::TOOL_CHOICE_MODE_NONE) {
      plan.mode = ToolPlan::Mode::kNone;
    } else if (tc.mode() == v1::TOOL_CHOICE_MODE_REQUIRED) {
      plan.mode = ToolPlan::Mode::kRequired;
    } else if (tc.mode() != v1::TOOL_CHOICE_MODE_AUTO &&
               tc.mode() != v1::TOOL_CHOICE_MODE_UNSPECIFIED) {
      return Invalid("tool_choice.mode", "unknown value");
    }
  }
  if (plan.mode != ToolPlan::Mode::kNamed &&
      plan.mode != ToolPlan::Mode::kRequired) {
    return plan;
  }
  if (p->sampling.response_format.type != ResponseFormat::Type::kText) {
    return Invalid("response_format",
                   "cannot be combined with tool_choice required or a "
                   "named function (both constrain the output)");
  }
  // The constraint: llguidance keeps the schema's property order, so the
  // name comes before the arguments (ordered_json).
  nlohmann::ordered_json schema;
  if (plan.mode == ToolPlan::Mode::kNamed) {
    for (const ChatTool& t : p->tools) {
      if (t.name == plan.function) schema = ArgumentsSchema(t);
    }
  } else {
    nlohmann::ordered_json any = nlohmann::ordered_json::array();
    for (const ChatTool& t : p->tools) {
      any.push_back({{"type", "object"},
                     {"properties",
                      {{"name", {{"type", "string"}, {"const", t.name}}},
                       {"arguments", ArgumentsSchema(t)}}},
                     {"required", {"name", "arguments"}},
                     {"additionalProperties", false}});
    }
    schema = {{"type", "array"}, {"minItems", 1}};
    if (req.has_parallel_tool_calls() && !req.parallel_tool_calls()) {
      schema["maxItems"] = 1;
    }
    schema["items"] = {{"anyOf", std::move(any)}};
  }
  bool strict = true;
  for (const v1::Tool& t : req.tools()) {
    if (plan.mode == ToolPlan::Mode::kRequired || t.name() == plan.function) {
      strict &= t.strict();
    }
  }
  p->sampling.response_format.type = ResponseFormat::Type::kJsonSchema;
  p->sampling.response_format.spec = schema.dump();
  p->sampling.response_format.strict = strict;
  return plan;
}

namespace {

// The request's input: messages, a prompt or prompt ids (exactly one).
absl::Status ToPromptInput(const v1::GenerateRequest& req,
                           const ServedModelInfo& model, GenerateParams* p) {
  if (req.messages_size() > 0) {
    if (req.input_case() != v1::GenerateRequest::INPUT_NOT_SET) {
      return Invalid("messages",
                     "give messages, prompt or prompt_token_ids, not several");
    }
    RETURN_IF_ERROR(ToChatMessages(req.messages(), &p->messages));
    p->add_generation_prompt =
        req.has_add_generation_prompt() ? req.add_generation_prompt() : true;
  }
  switch (p->messages.empty() ? req.input_case()
                              : v1::GenerateRequest::INPUT_NOT_SET) {
    case v1::GenerateRequest::kPrompt:
      p->prompt = req.prompt();
      break;
    case v1::GenerateRequest::kPromptTokenIds:
      for (uint32_t id : req.prompt_token_ids().ids()) {
        if (static_cast<int64_t>(id) >= model.vocab_size) {
          return Invalid("prompt_token_ids",
                         absl::StrCat("id ", id, " is outside the vocabulary "
                                      "[0, ", model.vocab_size, ")"));
        }
        p->prompt_token_ids.push_back(static_cast<int32_t>(id));
      }
      if (p->prompt_token_ids.empty()) {
        return Invalid("prompt_token_ids", "must not be empty");
      }
      break;
    default:
      if (p->messages.empty()) {
        return Invalid("prompt", "set prompt, prompt_token_ids or messages");
      }
      break;
  }
  // A chat template writes its own special tokens.
  p->add_special_tokens = req.has_add_special_tokens()
                              ? req.add_special_tokens()
                              : p->messages.empty();
  return absl::OkStatus();
}

int32_t ClampU32(uint32_t v) {
  return static_cast<int32_t>(std::min<uint32_t>(v, INT32_MAX));
}

ResponseFormat ToResponseFormat(const v1::ResponseFormat& rf) {
  ResponseFormat out;
  switch (rf.format_case()) {
    case v1::ResponseFormat::kJsonSchema:
      out.type = ResponseFormat::Type::kJsonSchema;
      out.spec = rf.json_schema();
      break;
    case v1::ResponseFormat::kRegex:
      out.type = ResponseFormat::Type::kRegex;
      out.spec = rf.regex();
      break;
    case v1::ResponseFormat::kChoice:
      out.type = ResponseFormat::Type::kChoice;
      out.choices.assign(rf.choice().values().begin(),
                         rf.choice().values().end());
      break;
    case v1::ResponseFormat::kGrammar:
      out.type = ResponseFormat::Type::kGrammar;
      out.spec = rf.grammar();
      break;
    case v1::ResponseFormat::FORMAT_NOT_SET:
      break;
  }
  out.strict = rf.strict();
  out.flexible_whitespace = rf.flexible_whitespace();
  return out;
}

// SamplingParams; ids are checked against the vocabulary here, ranges by
// SamplingParams::Validate.
absl::Status ToSamplingParams(const v1::SamplingParams& s,
                              const ServedModelInfo& model,
                              SamplingParams* o) {
  o->max_tokens = ClampU32(s.max_tokens());
  if (model.max_input_tokens > 0 && o->max_tokens > model.max_input_tokens) {
    return Invalid("sampling.max_tokens",
                   absl::StrCat(o->max_tokens, " exceeds the model's context "
                                "of ", model.max_input_tokens, " tokens"));
  }
  o->min_tokens = ClampU32(s.min_tokens());
  o->temperature = s.has_temperature() ? s.temperature() : 1.0f;
  o->top_k = s.top_k() == -1 ? 0 : s.top_k();
  o->top_p = s.has_top_p() ? s.top_p() : 1.0f;
  o->min_p = s.min_p();
  if (s.has_seed()) o->seed = s.seed();
  o->repetition_penalty =
      s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f;
  o->presence_penalty = s.presence_penalty();
  o->frequency_penalty = s.frequency_penalty();
  o->stop.assign(s.stop().begin(), s.stop().end());
  for (uint32_t id : s.stop_token_ids()) {
    if (static_cast<int64_t>(id) >= model.vocab_size) {
      return Invalid("sampling.stop_token_ids",
                     absl::StrCat("id ", id, " is outside the vocabulary"));
    }
    o->stop_token_ids.push_back(static_cast<int32_t>(id));
  }
  for (const auto& [id, bias] : s.logit_bias()) {
    if (static_cast<int64_t>(id) >= model.vocab_size) {
      return Invalid("sampling.logit_bias",
                     absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                  model.vocab_size, ")"));
    }
    o->logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  std::sort(o->logit_bias.begin(), o->logit_bias.end());
  o->ignore_eos = s.ignore_eos();
  o->logprobs = ClampU32(s.logprobs());
  o->prompt_logprobs = ClampU32(s.prompt_logprobs());
  // 0 (unset) means one sample; the cap is checked by Validate.
  o->n = s.n() == 0 ? 1 : ClampU32(s.n());
  o->skip_special_tokens =
      s.has_skip_special_tokens() ? s.skip_special_tokens() : true;
  o->include_stop_str_in_output = s.include_stop_str_in_output();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerateParams> ToGenerateParams(const v1::GenerateRequest& req,
                                                const ServedModelInfo& model,
                                                absl::Time deadline) {
  GenerateParams p;
  p.request_id = req.request_id();
  RETURN_IF_ERROR(ToPromptInput(req, model, &p));
  p.disable_prefix_cache = req.disable_prefix_cache();
  if (req.has_speculative()) {
    const v1::SpeculativeDecoding& sp = req.speculative();
    p.speculative.num_draft_tokens =
        sp.has_num_draft_tokens() ? ClampU32(sp.num_draft_tokens()) : -1;
    p.speculative.min_ngram = ClampU32(sp.min_ngram());
    p.speculative.max_ngram = ClampU32(sp.max_ngram());
    RETURN_IF_ERROR(p.speculative.Validate());
  }
  RETURN_IF_ERROR(ToSamplingParams(req.sampling(), model, &p.sampling));
  p.sampling.response_format = ToResponseFormat(req.response_format());
  // One set of range checks for every front end (the ranges documented in
  // inference.proto).
  RETURN_IF_ERROR(p.sampling.Validate());
  p.deadline = deadline;
  return p;
}

void FillEmbedResponse(const EmbedResult& result, const v1::EmbedRequest& req,
                       v1::EmbedResponse* resp) {
  resp->set_id(req.id());
  const bool packed =
      req.encoding() == v1::EMBEDDING_ENCODING_PACKED_F32;
  for (size_t i = 0; i < result.embeddings.size(); ++i) {
    const std::vector<float>& e = result.embeddings[i];
    v1::Embedding* out = resp->add_embeddings();
    out->set_dims(static_cast<uint32_t>(e.size()));
    if (i < result.tokens.size()) out->set_tokens(result.tokens[i]);
    if (i < result.sparse.size()) {
      const SparseVector& sv = result.sparse[i];
      v1::SparseEmbedding* sp = out->mutable_sparse();
      for (int32_t id : sv.token_ids) sp->add_token_ids(static_cast<uint32_t>(id));
      sp->mutable_weights()->Assign(sv.weights.begin(), sv.weights.end());
      for (const std::string& t : sv.tokens) sp->add_tokens(t);
    }
    if (i < result.multi_vectors.size()) {
      const std::vector<float>& mv = result.multi_vectors[i];
      out->mutable_multi_vector()->Assign(mv.begin(), mv.end());
      out->set_multi_vector_dims(static_cast<uint32_t>(result.multi_vector_dims));
    }
    if (e.empty()) continue;  // dense not asked for
    if (packed) {
      std::string bytes(e.size() * 4, '\0');
      for (size_t j = 0; j < e.size(); ++j) {
        uint32_t bits;
        std::memcpy(&bits, &e[j], 4);
        for (int b = 0; b < 4; ++b) {
          bytes[j * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
        }
      }
      out->set_packed(std::move(bytes));
    } else {
      out->mutable_values()->Assign(e.begin(), e.end());
    }
  }
  resp->mutable_usage()->set_total_tokens(
      static_cast<uint32_t>(result.total_tokens));
  resp->mutable_usage()->set_prompt_tokens(
      static_cast<uint32_t>(result.total_tokens));
  resp->mutable_timings()->set_queue_seconds(result.timings.queue_seconds);
  resp->mutable_timings()->set_total_seconds(result.timings.total_seconds);
}

void FillClassifyResponse(const ClassifyResult& result,
                          const ServedModelInfo& model, v1::ClassifyResponse* resp) {
  for (const std::vector<float>& scores : result.scores) {
    v1::Classification* c = resp->add_results();
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    for (size_t idx : order) {
      v1::LabelScore* l = c->add_labels();
      l->set_index(static_cast<uint32_t>(idx));
      l->set_label(idx < model.labels.size() ? model.labels[idx]
                                             : absl::StrCat("LABEL_", idx));
      l->set_score(scores[idx]);
    }
  }
  resp->mutable_usage()->set_total_tokens(
      static_cast<uint32_t>(result.total_tokens));
  resp->mutable_usage()->set_prompt_tokens(
      static_cast<uint32_t>(result.total_tokens));
}

void FillRerankResponse(const RerankResult& result,
                        const v1::RerankRequest& req,
                        v1::RerankResponse* resp) {
  std::vector<size_t> order(result.scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return result.scores[a] > result.scores[b];
  });
  size_t n = order.size();
  if (req.top_n() > 0) n = std::min<size_t>(n, req.top_n());
  for (size_t k = 0; k < n; ++k) {
    size_t i = order[k];
    v1::RerankResult* r = resp->add_results();
    r->set_index(static_cast<uint32_t>(i));
    r->set_score(result.scores[i]);
    if (req.return_documents()) r->set_document(req.documents(i));
  }
  resp->mutable_usage()->set_total_tokens(
      static_cast<uint32_t>(result.total_tokens));
  resp->mutable_usage()->set_prompt_tokens(
      static_cast<uint32_t>(result.total_tokens));
}

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case FinishReason::kEos: return v1::FINISH_REASON_EOS;
    case FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kError: return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

namespace {

void FillToken(int32_t id, float logprob, const TokenNaming& naming,
               v1::TokenLogprob* out) {
  out->set_token_id(static_cast<uint32_t>(id));
  out->set_token(naming.token(id));
  if (naming.text_bytes) out->set_text_bytes(naming.text_bytes(id));
  out->set_logprob(logprob);
}

void FillLogprobs(const TokenLogprobs& lp, const TokenNaming& naming,
                  v1::SampledLogprobs* out) {
  FillToken(lp.sampled.token_id, lp.sampled.logprob, naming,
            out->mutable_sampled());
  for (const TokenLogprobValue& t : lp.top) {
    FillToken(t.token_id, t.logprob, naming, out->add_top());
  }
}

}  // namespace

void FillGenerateResponse(const GenerateChunk& c,
                          const std::string& request_id,
                          const TokenNaming& naming,
                          v1::GenerateResponse* resp) {
  resp->set_request_id(request_id);
  resp->set_sample_index(static_cast<uint32_t>(std::max(c.sample_index, 0)));
  for (const TokenLogprobs& lp : c.prompt_logprobs) {
    FillLogprobs(lp, naming, resp->add_prompt_logprobs());
  }
  resp->set_text(c.text);
  for (int32_t id : c.token_ids) resp->add_token_ids(id);
  for (const TokenLogprobs& lp : c.logprobs) {
    FillLogprobs(lp, naming, resp->add_logprobs());
  }
  if (c.finish == FinishReason::kNone) return;
  resp->set_finish_reason(ToProtoFinishReason(c.finish));
  resp->set_stop_reason(c.stop_reason);
  v1::Usage* u = resp->mutable_usage();
  u->set_prompt_tokens(static_cast<uint32_t>(c.prompt_tokens));
  u->set_completion_tokens(static_cast<uint32_t>(c.completion_tokens));
  u->set_cached_prompt_tokens(static_cast<uint32_t>(c.cached_prompt_tokens));
  u->set_draft_tokens(static_cast<uint32_t>(c.draft_tokens));
  u->set_accepted_draft_tokens(static_cast<uint32_t>(c.accepted_draft_tokens));
  u->set_total_tokens(
      static_cast<uint32_t>(c.prompt_tokens + c.completion_tokens));
  v1::Timings* t = resp->mutable_timings();
  t->set_queue_seconds(c.timings.queue_seconds);
  t->set_time_to_first_token_seconds(c.timings.time_to_first_token_seconds);
  t->set_total_seconds(c.timings.total_seconds);
}

void FillModelInfo(const ServedModelInfo& info, v1::ModelInfo* out) {
  out->set_name(info.name);
  out->set_path(info.path);
  out->set_architecture(info.architecture);
  out->set_workflow(info.workflow);
  for (Task t : info.tasks) {
    switch (t) {
      case Task::kGenerate: out->add_tasks(v1::TASK_GENERATE); break;
      case Task::kEmbed: out->add_tasks(v1::TASK_EMBED); break;
      case Task::kRerank: out->add_tasks(v1::TASK_RERANK); break;
      case Task::kClassify: out->add_tasks(v1::TASK_CLASSIFY); break;
    }
  }
  out->set_max_input_tokens(static_cast<uint32_t>(info.max_input_tokens));
  out->set_hidden_size(static_cast<uint32_t>(info.hidden_size));
  out->set_embedding_dims(static_cast<uint32_t>(info.embedding_dims));
  out->set_vocab_size(static_cast<uint32_t>(info.vocab_size));
  out->set_dtype(info.dtype);
  out->set_activations(info.activations);
  out->set_pooling(info.pooling);
  for (const auto& [kind, name] : info.components) {
    (*out->mutable_components())[kind] = name;
  }
  switch (info.state) {
    case ModelState::kLoading: out->set_state(v1::MODEL_STATE_LOADING); break;
    case ModelState::kReady: out->set_state(v1::MODEL_STATE_READY); break;
    case ModelState::kFailed: out->set_state(v1::MODEL_STATE_FAILED); break;
  }
  out->set_error(info.error);
  for (const std::string& l : info.labels) out->add_labels(l);
  for (const std::string& p : info.prompt_names) out->add_prompt_names(p);
  for (const std::string& o : info.embed_outputs) out->add_embed_outputs(o);
  out->set_weight_bytes(static_cast<uint64_t>(info.weight_bytes));
  out->set_kv_cache_bytes(static_cast<uint64_t>(info.kv_cache_bytes));
  out->set_kv_cache_tokens(static_cast<uint64_t>(info.kv_cache_tokens));
}

}  // namespace inferd
