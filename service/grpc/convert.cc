#include "service/grpc/convert.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"

namespace inferd {
namespace {

int32_t ClampU32(uint32_t v) {
  return static_cast<int32_t>(std::min<uint32_t>(v, INT32_MAX));
}

std::vector<int32_t> Ids(const google::protobuf::RepeatedField<uint32_t>& ids) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  // Ids past INT32_MAX stay out of every vocabulary (validation refuses
  // them) without wrapping to a valid one.
  for (uint32_t id : ids) out.push_back(ClampU32(id));
  return out;
}

std::vector<int64_t> WideIds(
    const google::protobuf::RepeatedField<uint32_t>& ids) {
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<ChatMessage> ToChatMessages(
    const google::protobuf::RepeatedPtrField<v1::ChatMessage>& in) {
  std::vector<ChatMessage> out;
  out.reserve(in.size());
  for (const v1::ChatMessage& m : in) {
    ChatMessage c{m.role(), m.content()};
    for (const v1::ToolCall& t : m.tool_calls()) {
      c.tool_calls.push_back(ChatToolCall{t.id(), t.name(), t.arguments()});
    }
    c.tool_call_id = m.tool_call_id();
    c.name = m.name();
    c.reasoning_content = m.reasoning_content();
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ChatTool> ToChatTools(
    const google::protobuf::RepeatedPtrField<v1::Tool>& in) {
  std::vector<ChatTool> out;
  out.reserve(in.size());
  for (const v1::Tool& t : in) {
    out.push_back(ChatTool{t.name(), t.description(), t.parameters(), t.strict()});
  }
  return out;
}

absl::StatusOr<ToolChoice> ToToolChoice(const v1::GenerateRequest& req) {
  ToolChoice out;
  if (!req.has_tool_choice()) return out;
  const v1::ToolChoice& tc = req.tool_choice();
  if (tc.choice_case() == v1::ToolChoice::kFunctionName) {
    out.mode = ToolChoice::Mode::kFunction;
    out.function = tc.function_name();
    return out;
  }
  switch (tc.mode()) {
    case v1::TOOL_CHOICE_MODE_UNSPECIFIED: break;
    case v1::TOOL_CHOICE_MODE_NONE: out.mode = ToolChoice::Mode::kNone; break;
    case v1::TOOL_CHOICE_MODE_AUTO: out.mode = ToolChoice::Mode::kAuto; break;
    case v1::TOOL_CHOICE_MODE_REQUIRED:
      out.mode = ToolChoice::Mode::kRequired;
      break;
    default:
      return FieldError("tool_choice.mode", ": unknown value");
  }
  return out;
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

void ToSamplingParams(const v1::SamplingParams& s, SamplingParams* o) {
  o->max_tokens = ClampU32(s.max_tokens());
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
  o->stop_token_ids = Ids(s.stop_token_ids());
  for (const auto& [id, bias] : s.logit_bias()) {
    o->logit_bias.emplace_back(ClampU32(id), bias);
  }
  std::sort(o->logit_bias.begin(), o->logit_bias.end());
  o->ignore_eos = s.ignore_eos();
  o->logprobs = ClampU32(s.logprobs());
  o->prompt_logprobs = ClampU32(s.prompt_logprobs());
  // 0 (unset) means one sample; the cap is checked by Validate.
  o->n = s.n() == 0 ? 1 : ClampU32(s.n());
  o->include_stop_str_in_output = s.include_stop_str_in_output();
}

void FillToken(const NamedToken& t, v1::TokenLogprob* out) {
  out->set_token_id(static_cast<uint32_t>(t.id));
  out->set_token(t.token);
  out->set_text_bytes(t.text_bytes);
  out->set_logprob(t.logprob);
}

void FillLogprobs(const NamedLogprobs& lp, v1::SampledLogprobs* out) {
  FillToken(lp.sampled, out->mutable_sampled());
  for (const NamedToken& t : lp.top) FillToken(t, out->add_top());
}

}  // namespace

absl::StatusOr<GenerateInput> ToGenerateInput(const v1::GenerateRequest& req,
                                              absl::Time deadline) {
  GenerateInput in;
  in.model = req.model();
  GenerateParams& p = in.params;
  p.request_id = req.request_id();
  p.messages = ToChatMessages(req.messages());
  switch (req.input_case()) {
    case v1::GenerateRequest::kPrompt:
      p.prompt = req.prompt();
      break;
    case v1::GenerateRequest::kPromptTokenIds:
      in.prompt_token_ids = WideIds(req.prompt_token_ids().ids());
      break;
    default:
      break;
  }
  if (req.has_add_generation_prompt()) {
    p.add_generation_prompt = req.add_generation_prompt();
  }
  if (req.has_add_special_tokens()) {
    in.add_special_tokens = req.add_special_tokens();
  }
  p.tools = ToChatTools(req.tools());
  auto choice = ToToolChoice(req);
  if (!choice.ok()) return choice.status();
  in.tool_choice = *std::move(choice);
  if (req.has_parallel_tool_calls()) {
    in.parallel_tool_calls = req.parallel_tool_calls();
  }
  p.disable_prefix_cache = req.disable_prefix_cache();
  if (req.has_speculative()) {
    const v1::SpeculativeDecoding& sp = req.speculative();
    p.speculative.num_draft_tokens =
        sp.has_num_draft_tokens() ? ClampU32(sp.num_draft_tokens()) : -1;
    p.speculative.min_ngram = ClampU32(sp.min_ngram());
    p.speculative.max_ngram = ClampU32(sp.max_ngram());
  }
  ToSamplingParams(req.sampling(), &p.sampling);
  if (req.sampling().has_skip_special_tokens()) {
    in.skip_special_tokens = req.sampling().skip_special_tokens();
  }
  p.sampling.response_format = ToResponseFormat(req.response_format());
  p.deadline = deadline;
  return in;
}

EmbedInput ToEmbedInput(const v1::EmbedRequest& req, absl::Time deadline) {
  EmbedInput in;
  in.model = req.model();
  EmbedParams& p = in.params;
  p.texts.assign(req.texts().begin(), req.texts().end());
  for (const v1::TokenIds& t : req.token_ids()) {
    in.token_ids.push_back(WideIds(t.ids()));
  }
  if (req.has_normalize()) p.normalize = req.normalize();
  p.dimensions = req.dimensions();
  p.truncate = req.truncate();
  p.truncate_left = req.truncation_side() == v1::TRUNCATION_SIDE_LEFT;
  switch (req.pooling()) {
    case v1::POOLING_CLS: p.pooling = "cls"; break;
    case v1::POOLING_MEAN: p.pooling = "mean"; break;
    case v1::POOLING_LAST: p.pooling = "last"; break;
    case v1::POOLING_MAX: p.pooling = "max"; break;
    default: break;
  }
  p.prompt_name = req.prompt_name();
  p.prompt = req.prompt();
  const v1::EmbedOutputs& outputs = req.outputs();
  p.want_sparse = outputs.sparse();
  p.want_multi_vector = outputs.multi_vector();
  p.want_sparse_tokens = outputs.sparse_tokens();
  p.want_dense = outputs.dense() || (!p.want_sparse && !p.want_multi_vector);
  p.deadline = deadline;
  return in;
}

RerankInput ToRerankInput(const v1::RerankRequest& req, absl::Time deadline) {
  RerankInput in;
  in.model = req.model();
  in.params.query = req.query();
  in.params.documents.assign(req.documents().begin(), req.documents().end());
  in.params.truncate = req.has_truncate() ? req.truncate() : true;
  in.params.raw_scores = req.raw_scores();
  in.params.deadline = deadline;
  in.top_n = req.top_n();
  in.return_documents = req.return_documents();
  return in;
}

ClassifyInput ToClassifyInput(const v1::ClassifyRequest& req,
                              absl::Time deadline) {
  ClassifyInput in;
  in.model = req.model();
  in.params.texts.assign(req.texts().begin(), req.texts().end());
  for (const v1::TextPair& pair : req.pairs()) {
    in.params.pairs.emplace_back(pair.first(), pair.second());
  }
  in.params.truncate = req.truncate();
  in.params.raw_scores = req.raw_scores();
  in.params.deadline = deadline;
  return in;
}

TokenizeInput ToTokenizeInput(const v1::TokenizeRequest& req) {
  TokenizeInput in;
  in.model = req.model();
  in.text = req.text();
  in.messages = ToChatMessages(req.messages());
  in.tools = ToChatTools(req.tools());
  if (req.has_add_special_tokens()) {
    in.add_special_tokens = req.add_special_tokens();
  }
  if (req.has_add_generation_prompt()) {
    in.add_generation_prompt = req.add_generation_prompt();
  }
  in.return_offsets = req.return_offsets();
  return in;
}

DetokenizeInput ToDetokenizeInput(const v1::DetokenizeRequest& req) {
  DetokenizeInput in;
  in.model = req.model();
  in.token_ids.assign(req.token_ids().begin(), req.token_ids().end());
  if (req.has_skip_special_tokens()) {
    in.skip_special_tokens = req.skip_special_tokens();
  }
  return in;
}

void FillGenerateResponse(const GenerateOutput& out,
                          v1::GenerateResponse* resp) {
  resp->set_request_id(out.request_id);
  resp->set_sample_index(static_cast<uint32_t>(out.sample_index));
  for (const NamedLogprobs& lp : out.prompt_logprobs) {
    FillLogprobs(lp, resp->add_prompt_logprobs());
  }
  resp->set_text(out.text);
  resp->set_reasoning(out.reasoning);
  for (const ToolCallDelta& t : out.tool_calls) {
    v1::ToolCallDelta* d = resp->add_tool_calls();
    d->set_index(static_cast<uint32_t>(t.index));
    d->set_id(t.id);
    d->set_name(t.name);
    d->set_arguments(t.arguments);
  }
  for (int32_t id : out.token_ids) resp->add_token_ids(id);
  for (const NamedLogprobs& lp : out.logprobs) {
    FillLogprobs(lp, resp->add_logprobs());
  }
  if (out.finish == FinishReason::kNone) return;
  resp->set_finish_reason(out.tool_calls_finish
                              ? v1::FINISH_REASON_TOOL_CALLS
                              : ToProtoFinishReason(out.finish));
  resp->set_stop_reason(out.stop_reason);
  v1::Usage* u = resp->mutable_usage();
  const GenerateUsage& n = out.usage;
  u->set_prompt_tokens(static_cast<uint32_t>(n.prompt_tokens));
  u->set_completion_tokens(static_cast<uint32_t>(n.completion_tokens));
  u->set_cached_prompt_tokens(static_cast<uint32_t>(n.cached_prompt_tokens));
  u->set_draft_tokens(static_cast<uint32_t>(n.draft_tokens));
  u->set_accepted_draft_tokens(static_cast<uint32_t>(n.accepted_draft_tokens));
  u->set_total_tokens(
      static_cast<uint32_t>(n.prompt_tokens + n.completion_tokens));
  v1::Timings* t = resp->mutable_timings();
  t->set_queue_seconds(out.timings.queue_seconds);
  t->set_time_to_first_token_seconds(out.timings.time_to_first_token_seconds);
  t->set_total_seconds(out.timings.total_seconds);
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

void FillRerankResponse(const RerankAnswer& answer,
                        v1::RerankResponse* resp) {
  for (const RerankAnswer::Item& item : answer.results) {
    v1::RerankResult* r = resp->add_results();
    r->set_index(static_cast<uint32_t>(item.index));
    r->set_score(item.score);
    if (item.document.has_value()) r->set_document(*item.document);
  }
  resp->mutable_usage()->set_total_tokens(
      static_cast<uint32_t>(answer.total_tokens));
  resp->mutable_usage()->set_prompt_tokens(
      static_cast<uint32_t>(answer.total_tokens));
}

void FillClassifyResponse(const ClassifyAnswer& answer,
                          v1::ClassifyResponse* resp) {
  for (const std::vector<ClassifyAnswer::Label>& labels : answer.results) {
    v1::Classification* c = resp->add_results();
    for (const ClassifyAnswer::Label& label : labels) {
      v1::LabelScore* l = c->add_labels();
      l->set_index(static_cast<uint32_t>(label.index));
      l->set_label(label.label);
      l->set_score(label.score);
    }
  }
  resp->mutable_usage()->set_total_tokens(
      static_cast<uint32_t>(answer.total_tokens));
  resp->mutable_usage()->set_prompt_tokens(
      static_cast<uint32_t>(answer.total_tokens));
}

void FillTokenizeResponse(const TokenizeAnswer& answer,
                          v1::TokenizeResponse* resp) {
  for (size_t i = 0; i < answer.token_ids.size(); ++i) {
    resp->add_token_ids(static_cast<uint32_t>(answer.token_ids[i]));
    if (i < answer.tokens.size()) resp->add_tokens(answer.tokens[i]);
    if (i < answer.offsets.size()) {
      v1::Offset* o = resp->add_offsets();
      o->set_start(static_cast<uint32_t>(answer.offsets[i].first));
      o->set_end(static_cast<uint32_t>(answer.offsets[i].second));
    }
  }
  resp->set_rendered_prompt(answer.rendered_prompt);
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
    case ModelState::kUnloaded:
      out->set_state(v1::MODEL_STATE_UNLOADED);
      break;
    case ModelState::kUnloading:
      out->set_state(v1::MODEL_STATE_UNLOADING);
      break;
  }
  out->set_error(info.error);
  for (const std::string& l : info.labels) out->add_labels(l);
  for (const std::string& p : info.prompt_names) out->add_prompt_names(p);
  for (const std::string& o : info.embed_outputs) out->add_embed_outputs(o);
  out->set_weight_bytes(static_cast<uint64_t>(info.weight_bytes));
  out->set_kv_cache_bytes(static_cast<uint64_t>(info.kv_cache_bytes));
  out->set_kv_cache_tokens(static_cast<uint64_t>(info.kv_cache_tokens));
  out->set_source(info.source);
  out->set_download_bytes_done(static_cast<uint64_t>(info.download_bytes_done));
  out->set_download_bytes_total(
      static_cast<uint64_t>(info.download_bytes_total));
  out->set_on_demand(info.on_demand);
  out->set_keep_alive_seconds(info.keep_alive_seconds);
  out->set_active_requests(static_cast<uint32_t>(info.active_requests));
  out->set_idle_seconds(info.idle_seconds);
  out->set_loads(static_cast<uint32_t>(info.loads));
}

}  // namespace inferd
