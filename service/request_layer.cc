#include "service/request_layer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/field_error.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace {

// The model for Tokenize/Detokenize: any task.
absl::StatusOr<const ServedModel*> ResolveAnyModel(const ModelManager& models,
                                                   const std::string& name) {
  const ServedModel* model = nullptr;
  if (name.empty()) {
    if (models.models().size() != 1) {
      return FieldError("model",
                        ": this server has several models; set the request's "
                        "model field (see ListModels)");
    }
    model = models.models()[0].get();
  } else {
    auto found = models.Find(name);
    if (!found.ok()) return found.status();
    model = *found;
  }
  if (model->state() == ModelState::kLoading) {
    return absl::UnavailableError(
        absl::StrCat("model '", model->name(), "' is still loading"));
  }
  if (model->state() == ModelState::kFailed) {
    return absl::UnavailableError(absl::StrCat(
        "model '", model->name(), "' failed to load: ", model->info().error));
  }
  return model;
}

// A parameters schema the constraint engine refused names the tools.
absl::Status ToolConstraintError(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument ||
      !absl::StartsWith(s.message(), "response_format")) {
    return s;
  }
  return FieldError(
      "tools",
      absl::StrCat(": a parameters schema cannot constrain the tool call "
                   "(tool_choice required or a function): ",
                   s.message()));
}

// One generation's bookkeeping between engine chunks: the response
// messages, and for the observer the gaps between output tokens (per
// sample: n > 1 interleaves them) and the completion tokens of every
// sample.
class GenerateStream {
 public:
  // `parsers` (may be null): makes each sample's output parser (tool calls,
  // reasoning); `tool_constraint`: the output was constrained to calls
  // (tool_choice required or a function).
  GenerateStream(RequestLayer::GenerateSink sink, std::string request_id,
                 const ServedModel* model, RpcObserver* observer,
                 std::function<std::unique_ptr<OutputParser>()> parsers,
                 bool tool_constraint)
      : sink_(std::move(sink)),
        request_id_(std::move(request_id)),
        model_(model->name()),
        observer_(observer),
        new_parser_(std::move(parsers)),
        tool_constraint_(tool_constraint) {
    naming_.token = [model](int32_t id) {
      return model->tokenizer().IdToToken(id);
    };
    naming_.text_bytes = [model](int32_t id) {
      return model->TokenTextBytes(id);
    };
  }

  void OnChunk(const absl::StatusOr<GenerateChunk>& chunk) {
    if (!chunk.ok()) {
      sink_(tool_constraint_ ? ToolConstraintError(chunk.status())
                             : chunk.status(),
            /*last=*/true);
      return;
    }
    const GenerateChunk& c = *chunk;
    const bool last = c.finish != FinishReason::kNone && !c.more_samples;
    if (observer_ != nullptr) Observe(c, last);
    v1::GenerateResponse resp;
    FillGenerateResponse(c, request_id_, naming_, &resp);
    if (new_parser_ != nullptr) Parse(c, &resp);
    sink_(std::move(resp), last);
  }

 private:
  // The sample's text through its parser: content, reasoning, tool calls.
  void Parse(const GenerateChunk& c, v1::GenerateResponse* resp) {
    absl::MutexLock lock(&parse_mu_);
    const size_t sample = static_cast<size_t>(std::max(c.sample_index, 0));
    if (sample >= parsers_.size()) parsers_.resize(sample + 1);
    std::unique_ptr<OutputParser>& parser = parsers_[sample];
    if (parser == nullptr) parser = new_parser_();
    ParsedDelta d = parser->Feed(c.text);
    const bool finished = c.finish != FinishReason::kNone;
    if (finished) d.Append(parser->Finish());
    resp->set_text(std::move(d.content));
    resp->set_reasoning(std::move(d.reasoning));
    for (ToolCallDelta& t : d.tool_calls) {
      // One entry per call in a message: the pieces of a call joined.
      const int n = resp->tool_calls_size();
      if (n > 0 && resp->tool_calls(n - 1).index() ==
                       static_cast<uint32_t>(t.index)) {
        resp->mutable_tool_calls(n - 1)->mutable_arguments()->append(t.arguments);
        continue;
      }
      v1::ToolCallDelta* out = resp->add_tool_calls();
      out->set_index(static_cast<uint32_t>(t.index));
      out->set_id(std::move(t.id));
      out->set_name(std::move(t.name));
      out->set_arguments(std::move(t.arguments));
    }
    if (finished && parser->tool_calls() > 0 &&
        (c.finish == FinishReason::kStop || c.finish == FinishReason::kEos)) {
      resp->set_finish_reason(v1::FINISH_REASON_TOOL_CALLS);
    }
  }


  void Observe(const GenerateChunk& c, bool last) {
    absl::MutexLock lock(&mu_);
    const size_t sample = static_cast<size_t>(std::max(c.sample_index, 0));
    if (sample >= last_token_.size()) {
      last_token_.resize(sample + 1, absl::InfinitePast());
    }
    absl::Time& last_token = last_token_[sample];
    if (!c.token_ids.empty()) {
      const absl::Time now = absl::Now();
      if (last_token != absl::InfinitePast()) {
        const double gap = absl::ToDoubleSeconds(now - last_token) /
                           static_cast<double>(c.token_ids.size());
        inter_token_seconds_.insert(inter_token_seconds_.end(),
                                    c.token_ids.size(), gap);
      } else if (c.token_ids.size() > 1) {
        inter_token_seconds_.insert(inter_token_seconds_.end(),
                                    c.token_ids.size() - 1, 0.0);
      }
      last_token = now;
    }
    if (c.finish != FinishReason::kNone) {
      completion_tokens_ += c.completion_tokens;
    }
    if (last) {
      // One generation per call: with n > 1, the prompt once and every
      // sample's tokens.
      GenerateChunk done = c;
      done.completion_tokens = completion_tokens_;
      observer_->OnGenerateDone(model_, done, inter_token_seconds_);
    }
  }

  const RequestLayer::GenerateSink sink_;
  const std::string request_id_;
  const std::string model_;
  TokenNaming naming_;
  RpcObserver* const observer_;
  const std::function<std::unique_ptr<OutputParser>()> new_parser_;
  const bool tool_constraint_;
  absl::Mutex parse_mu_;
  std::vector<std::unique_ptr<OutputParser>> parsers_ ABSL_GUARDED_BY(parse_mu_);
  absl::Mutex mu_;
  std::vector<absl::Time> last_token_ ABSL_GUARDED_BY(mu_);
  int64_t completion_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> inter_token_seconds_ ABSL_GUARDED_BY(mu_);
};

// The output parser of each sample of a chat request: tool calls (by the
// tool plan) under the model's reasoning parser. Null when neither
// applies. FAILED_PRECONDITION for tool_choice auto on a model whose
// tool-call format is unknown.
absl::StatusOr<std::function<std::unique_ptr<OutputParser>()>> OutputParsers(
    const ServedModel& model, const v1::GenerateRequest& req,
    const ToolPlan& plan) {
  if (req.messages_size() == 0) return nullptr;
  const ModelOverrides& o = model.spec().overrides;
  std::string reasoning = o.reasoning_parser.value_or(
      model.chat_format()->reasoning_parser());
  if (reasoning == "none") reasoning.clear();
  std::string tool_format;
  if (plan.mode == ToolPlan::Mode::kAuto) {
    tool_format = o.tool_parser.value_or(model.chat_format()->tool_parser());
    if (tool_format.empty()) {
      return FieldError(
          "tool_choice",
          absl::StrCat(": auto needs the model's tool-call format, and the "
                       "chat template of model '", model.name(), "' shows "
                       "none; start the server with --model ", model.name(),
                       "=PATH,tool_parser=NAME (",
                       absl::StrJoin(ToolParserNames(), ", "),
                       ") or use tool_choice required or a named function"),
          absl::StatusCode::kFailedPrecondition);
    }
  }
  if (reasoning.empty() && tool_format.empty() &&
      plan.mode != ToolPlan::Mode::kRequired &&
      plan.mode != ToolPlan::Mode::kNamed) {
    return nullptr;
  }
  return [reasoning, tool_format, plan]() -> std::unique_ptr<OutputParser> {
    std::unique_ptr<OutputParser> tools;
    switch (plan.mode) {
      case ToolPlan::Mode::kAuto: tools = NewToolParser(tool_format); break;
      case ToolPlan::Mode::kRequired: tools = NewRequiredToolParser(); break;
      case ToolPlan::Mode::kNamed: tools = NewNamedToolParser(plan.function); break;
      default: break;
    }
    if (reasoning.empty()) return tools;
    return NewThinkParser(std::move(tools));
  };
}

void ReportPrefill(RpcObserver* observer, absl::string_view task,
                   absl::string_view model, int64_t inputs, int64_t tokens,
                   const RequestTimings& timings) {
  if (observer != nullptr) {
    observer->OnPrefillDone(task, model, inputs, tokens, timings);
  }
}

// The shared flow of the prefill tasks after conversion: resolve, submit,
// answer. `submit` converts and calls the engine; `fill` builds the
// response from the result.
template <typename Result, typename Response>
absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitPrefill(
    const RequestLayer& layer, const std::string& model_name, Task task,
    absl::string_view task_label, std::string* resolved,
    const std::function<absl::StatusOr<std::shared_ptr<RequestHandle>>(
        ServedModel&, ResultCallback<Result>)>& submit,
    std::function<int64_t(const Result&)> outputs,
    std::function<void(const ServedModelInfo&, const Result&, Response*)> fill,
    RequestLayer::Sink<Response> done) {
  if (absl::Status s = layer.CheckAccepting(); !s.ok()) return s;
  auto model = layer.models()->Resolve(model_name, task);
  if (!model.ok()) return model.status();
  if (resolved != nullptr) *resolved = (*model)->name();
  ServedModelInfo info = (*model)->info();
  return submit(
      **model, [observer = layer.observer(), info, label = std::string(task_label),
                outputs = std::move(outputs), fill = std::move(fill),
                done = std::move(done)](absl::StatusOr<Result> result) {
        if (!result.ok()) {
          done(result.status());
          return;
        }
        ReportPrefill(observer, label, info.name, outputs(*result),
                      result->total_tokens, result->timings);
        Response resp;
        fill(info, *result, &resp);
        done(std::move(resp));
      });
}

}  // namespace

RequestLayer::RequestLayer(ModelManager* models, ApiLimits limits,
                           RpcObserver* observer)
    : models_(models), limits_(limits), observer_(observer) {}

absl::Status RequestLayer::CheckAccepting() const {
  if (accepting()) return absl::OkStatus();
  return absl::UnavailableError(
      "the server is shutting down and takes no new requests");
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Generate(
    const v1::GenerateRequest& req, absl::Time deadline, GenerateSink sink,
    std::string* model_name) {
  RETURN_IF_ERROR(CheckAccepting());
  auto model = models_->Resolve(req.model(), Task::kGenerate);
  if (!model.ok()) return model.status();
  if (model_name != nullptr) *model_name = (*model)->name();
  auto params = ToGenerateParams(req, (*model)->info(), deadline);
  if (!params.ok()) return params.status();
  ASSIGN_OR_RETURN(ToolPlan plan, ToToolPlan(req, &*params));
  if (plan.mode != ToolPlan::Mode::kOff &&
      !(*model)->chat_format()->has_template()) {
    return FieldError("tools", absl::StrCat(": model '", (*model)->name(),
                                            "' has no usable chat template "
                                            "to show tools to"));
  }
  ASSIGN_OR_RETURN(auto parsers, OutputParsers(**model, req, plan));
  if (plan.mode == ToolPlan::Mode::kAuto &&
      !req.sampling().has_skip_special_tokens()) {
    const std::string format = (*model)->spec().overrides.tool_parser.value_or(
        (*model)->chat_format()->tool_parser());
    // Mistral's [TOOL_CALLS] and Llama's <|python_tag|> are special tokens.
    if (ToolParserNeedsSpecialTokens(format)) {
      params->sampling.skip_special_tokens = false;
    }
  }
  if (params->request_id.empty()) {
    params->request_id = absl::StrCat("gen-", absl::ToUnixNanos(absl::Now()));
  }
  const bool constrained = plan.mode == ToolPlan::Mode::kRequired ||
                           plan.mode == ToolPlan::Mode::kNamed;
  auto stream = std::make_shared<GenerateStream>(
      std::move(sink), params->request_id, *model, observer_,
      std::move(parsers), constrained);
  auto handle = (*model)->engine().SubmitGenerate(
      std::move(params).value(),
      [stream](const absl::StatusOr<GenerateChunk>& chunk) {
        stream->OnChunk(chunk);
      });
  if (!handle.ok() && constrained) return ToolConstraintError(handle.status());
  return handle;
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Embed(
    const v1::EmbedRequest& req, absl::Time deadline,
    Sink<v1::EmbedResponse> done, std::string* model_name) {
  // Only id and encoding are needed to build the answer.
  v1::EmbedRequest shape;
  shape.set_id(req.id());
  shape.set_encoding(req.encoding());
  return SubmitPrefill<EmbedResult, v1::EmbedResponse>(
      *this, req.model(), Task::kEmbed, "embed", model_name,
      [this, &req, deadline](ServedModel& model,
                             ResultCallback<EmbedResult> cb)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        auto params = ToEmbedParams(req, model.info(), limits_, deadline);
        if (!params.ok()) return params.status();
        return model.engine().SubmitEmbed(std::move(params).value(),
                                          std::move(cb));
      },
      [](const EmbedResult& r) {
        return static_cast<int64_t>(r.embeddings.size());
      },
      [shape](const ServedModelInfo&, const EmbedResult& r,
              v1::EmbedResponse* resp) { FillEmbedResponse(r, shape, resp); },
      std::move(done));
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Rerank(
    const v1::RerankRequest& req, absl::Time deadline,
    Sink<v1::RerankResponse> done, std::string* model_name) {
  // The answer repeats documents only when asked to.
  auto shape = std::make_shared<v1::RerankRequest>();
  shape->set_top_n(req.top_n());
  shape->set_return_documents(req.return_documents());
  if (req.return_documents()) *shape->mutable_documents() = req.documents();
  return SubmitPrefill<RerankResult, v1::RerankResponse>(
      *this, req.model(), Task::kRerank, "rerank", model_name,
      [this, &req, deadline](ServedModel& model,
                             ResultCallback<RerankResult> cb)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        auto params = ToRerankParams(req, limits_, deadline);
        if (!params.ok()) return params.status();
        return model.engine().SubmitRerank(std::move(params).value(),
                                           std::move(cb));
      },
      [](const RerankResult& r) {
        return static_cast<int64_t>(r.scores.size());
      },
      [shape](const ServedModelInfo&, const RerankResult& r,
              v1::RerankResponse* resp) {
        FillRerankResponse(r, *shape, resp);
      },
      std::move(done));
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Classify(
    const v1::ClassifyRequest& req, absl::Time deadline,
    Sink<v1::ClassifyResponse> done, std::string* model_name) {
  return SubmitPrefill<ClassifyResult, v1::ClassifyResponse>(
      *this, req.model(), Task::kClassify, "classify", model_name,
      [this, &req, deadline](ServedModel& model,
                             ResultCallback<ClassifyResult> cb)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        auto params = ToClassifyParams(req, limits_, deadline);
        if (!params.ok()) return params.status();
        return model.engine().SubmitClassify(std::move(params).value(),
                                             std::move(cb));
      },
      [](const ClassifyResult& r) {
        return static_cast<int64_t>(r.scores.size());
      },
      [](const ServedModelInfo& info, const ClassifyResult& r,
         v1::ClassifyResponse* resp) { FillClassifyResponse(r, info, resp); },
      std::move(done));
}

absl::StatusOr<v1::TokenizeResponse> RequestLayer::Tokenize(
    const v1::TokenizeRequest& req, std::string* model_name) const {
  RETURN_IF_ERROR(CheckAccepting());
  auto model = ResolveAnyModel(*models_, req.model());
  if (!model.ok()) return model.status();
  if (model_name != nullptr) *model_name = (*model)->name();
  const bool chat = req.messages_size() > 0;
  if (!chat && req.tools_size() > 0) {
    return FieldError("tools", ": need messages");
  }
  if (chat && !req.text().empty()) {
    return FieldError("messages", ": give text or messages, not both");
  }
  // A chat template writes its own special tokens.
  const bool add_special =
      req.has_add_special_tokens() ? req.add_special_tokens() : !chat;
  v1::TokenizeResponse resp;
  std::string rendered;
  if (chat) {
    std::vector<ChatMessage> messages;
    RETURN_IF_ERROR(ToChatMessages(req.messages(), &messages));
    std::vector<ChatTool> tools;
    RETURN_IF_ERROR(ToChatTools(req.tools(), &tools));
    ASSIGN_OR_RETURN(
        rendered,
        (*model)->chat_format()->Render(messages,
                                        req.has_add_generation_prompt()
                                            ? req.add_generation_prompt()
                                            : true,
                                        tools));
    resp.set_rendered_prompt(rendered);
  }
  ASSIGN_OR_RETURN(
      Encoding enc,
      (*model)->tokenizer().Encode(chat ? rendered : req.text(), add_special));
  for (size_t i = 0; i < enc.ids.size(); ++i) {
    resp.add_token_ids(static_cast<uint32_t>(enc.ids[i]));
    if (i < enc.tokens.size()) resp.add_tokens(enc.tokens[i]);
    if (req.return_offsets() && i < enc.offsets.size()) {
      v1::Offset* o = resp.add_offsets();
      o->set_start(enc.offsets[i].first);
      o->set_end(enc.offsets[i].second);
    }
  }
  return resp;
}

absl::StatusOr<v1::DetokenizeResponse> RequestLayer::Detokenize(
    const v1::DetokenizeRequest& req, std::string* model_name) const {
  RETURN_IF_ERROR(CheckAccepting());
  auto model = ResolveAnyModel(*models_, req.model());
  if (!model.ok()) return model.status();
  if (model_name != nullptr) *model_name = (*model)->name();
  const Tokenizer& tok = (*model)->tokenizer();
  std::vector<int32_t> ids;
  ids.reserve(req.token_ids_size());
  for (uint32_t id : req.token_ids()) {
    if (id >= tok.vocab_size()) {
      return FieldError("token_ids",
                        absl::StrCat(": id ", id,
                                     " is outside the vocabulary [0, ",
                                     tok.vocab_size(), ")"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  const bool skip =
      req.has_skip_special_tokens() ? req.skip_special_tokens() : true;
  ASSIGN_OR_RETURN(std::string text, tok.Decode(ids, skip));
  v1::DetokenizeResponse resp;
  resp.set_text(std::move(text));
  return resp;
}

v1::ListModelsResponse RequestLayer::ListModels() const {
  v1::ListModelsResponse resp;
  for (const ServedModelInfo& info : models_->List()) {
    FillModelInfo(info, resp.add_models());
  }
  return resp;
}

absl::StatusOr<v1::ModelInfo> RequestLayer::GetModel(
    const v1::GetModelRequest& req) const {
  if (req.name().empty()) {
    return FieldError("name", ": set the model name (see ListModels)");
  }
  ASSIGN_OR_RETURN(const ServedModel* model, models_->Find(req.name()));
  v1::ModelInfo info;
  FillModelInfo(model->info(), &info);
  return info;
}

}  // namespace inferd
