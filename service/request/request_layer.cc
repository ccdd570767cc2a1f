#include "service/request/request_layer.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/chat/generic_tools.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/field_error.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/tokenizer.h"
#include "service/request/validation.h"

namespace inferd {
namespace {

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

// Names tokens for answers: their vocabulary entries and text bytes.
class TokenNamer {
 public:
  explicit TokenNamer(const ServedModel* model) : model_(model) {}
  NamedToken Name(int32_t id, float logprob) const {
    return NamedToken{id, model_->tokenizer().IdToToken(id),
                      model_->TokenTextBytes(id), logprob};
  }
  std::vector<NamedLogprobs> Name(const std::vector<TokenLogprobs>& lps) const {
    std::vector<NamedLogprobs> out;
    out.reserve(lps.size());
    for (const TokenLogprobs& lp : lps) {
      NamedLogprobs n;
      n.sampled = Name(lp.sampled.token_id, lp.sampled.logprob);
      for (const TokenLogprobValue& t : lp.top) {
        n.top.push_back(Name(t.token_id, t.logprob));
      }
      out.push_back(std::move(n));
    }
    return out;
  }

 private:
  const ServedModel* model_;
};

// One generation's bookkeeping between engine chunks: the outputs (tokens
// named, text through each sample's output parser, the prompt echoed), and
// for the observer the gaps between output tokens (per sample: n > 1
// interleaves them) and the completion tokens of every sample.
class GenerateStream {
 public:
  // `parsers` (may be null): makes each sample's output parser (tool calls,
  // reasoning); `tool_constraint`: the output was constrained to calls
  // (tool_choice required or a function); `echo`: the prompt text to echo
  // (nothing: no echo; "" with prompt ids: their decoding).
  GenerateStream(RequestLayer::GenerateSink sink, std::string request_id,
                 ModelLease model, RpcObserver* observer,
                 std::function<std::unique_ptr<OutputParser>()> parsers,
                 bool tool_constraint, std::optional<std::string> echo)
      : sink_(std::move(sink)),
        request_id_(std::move(request_id)),
        model_(model.get()),
        namer_(model.get()),
        lease_(std::move(model)),
        observer_(observer),
        new_parser_(std::move(parsers)),
        tool_constraint_(tool_constraint),
        echo_(std::move(echo)) {}

  void OnChunk(const absl::StatusOr<GenerateChunk>& chunk) {
    if (!chunk.ok()) {
      sink_(tool_constraint_ ? ToolConstraintError(chunk.status())
                             : chunk.status());
      ReleaseModel();
      return;
    }
    const GenerateChunk& c = *chunk;
    const bool last = c.finish != FinishReason::kNone && !c.more_samples;
    if (observer_ != nullptr) Observe(c, last);
    GenerateOutput out = Output(c);
    out.last = last;
    if (new_parser_ != nullptr) Parse(c, &out);
    sink_(std::move(out));
    if (last) ReleaseModel();
  }

  // The request's last output is out: an unload need not wait for it.
  void ReleaseModel() {
    absl::MutexLock lock(&lease_mu_);
    lease_.Release();
  }

 private:
  GenerateOutput Output(const GenerateChunk& c) {
    GenerateOutput out;
    out.request_id = request_id_;
    out.sample_index = std::max(c.sample_index, 0);
    out.text = c.text;
    out.token_ids = c.token_ids;
    out.logprobs = namer_.Name(c.logprobs);
    out.prompt_logprobs = namer_.Name(c.prompt_logprobs);
    if (!c.prompt_token_ids.empty()) out.echo = Echo(c.prompt_token_ids);
    out.finish = c.finish;
    if (c.finish == FinishReason::kNone) return out;
    out.stop_reason = c.stop_reason;
    out.usage = c.usage;
    out.timings = c.timings;
    return out;
  }

  // The prompt once, on the first output that carries its ids.
  std::optional<PromptEcho> Echo(const std::vector<int32_t>& ids) {
    absl::MutexLock lock(&echo_mu_);
    if (!echo_.has_value() || echo_sent_) return std::nullopt;
    echo_sent_ = true;
    PromptEcho e;
    e.token_ids = ids;
    const Tokenizer& tok = model_->tokenizer();
    if (!echo_->empty()) {
      e.text = *echo_;
    } else if (absl::StatusOr<std::string> text = tok.Decode(ids, true);
               text.ok()) {
      e.text = *std::move(text);
    }
    if (absl::StatusOr<std::string> first =
            tok.Decode(absl::MakeConstSpan(ids).subspan(0, 1), false);
        first.ok()) {
      e.first_token = *std::move(first);
    }
    return e;
  }

  // The sample's text through its parser: content, reasoning, tool calls.
  void Parse(const GenerateChunk& c, GenerateOutput* out) {
    absl::MutexLock lock(&parse_mu_);
    const size_t sample = static_cast<size_t>(std::max(c.sample_index, 0));
    if (sample >= parsers_.size()) parsers_.resize(sample + 1);
    std::unique_ptr<OutputParser>& parser = parsers_[sample];
    if (parser == nullptr) parser = new_parser_();
    ParsedDelta d = parser->Feed(c.text);
    const bool finished = c.finish != FinishReason::kNone;
    if (finished) d.Append(parser->Finish());
    out->text = std::move(d.content);
    out->reasoning = std::move(d.reasoning);
    for (ToolCallDelta& t : d.tool_calls) {
      // One entry per call in an output: the pieces of a call joined.
      if (!out->tool_calls.empty() && out->tool_calls.back().index == t.index) {
        out->tool_calls.back().arguments.append(t.arguments);
        continue;
      }
      out->tool_calls.push_back(std::move(t));
    }
    if (finished && parser->tool_calls() > 0 &&
        (c.finish == FinishReason::kStop || c.finish == FinishReason::kEos)) {
      out->tool_calls_finish = true;
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
      completion_tokens_ += c.usage.completion_tokens;
    }
    if (last) {
      // One generation per call: with n > 1, the prompt once and every
      // sample's tokens.
      GenerateChunk done = c;
      done.usage.completion_tokens = completion_tokens_;
      observer_->OnGenerateDone(model_->name(), done, inter_token_seconds_);
    }
  }

  const RequestLayer::GenerateSink sink_;
  const std::string request_id_;
  const ServedModel* const model_;
  const TokenNamer namer_;
  absl::Mutex lease_mu_;
  ModelLease lease_ ABSL_GUARDED_BY(lease_mu_);
  RpcObserver* const observer_;
  const std::function<std::unique_ptr<OutputParser>()> new_parser_;
  const bool tool_constraint_;
  absl::Mutex echo_mu_;
  const std::optional<std::string> echo_;
  bool echo_sent_ ABSL_GUARDED_BY(echo_mu_) = false;
  absl::Mutex parse_mu_;
  std::vector<std::unique_ptr<OutputParser>> parsers_ ABSL_GUARDED_BY(parse_mu_);
  absl::Mutex mu_;
  std::vector<absl::Time> last_token_ ABSL_GUARDED_BY(mu_);
  int64_t completion_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> inter_token_seconds_ ABSL_GUARDED_BY(mu_);
};

// The tool-call format a model writes: tool_parser= or its template's;
// empty when neither shows one (the generic format then).
std::string NativeToolFormat(const ServedModel& model) {
  return model.spec().overrides.tool_parser.value_or(
      model.chat_format()->tool_parser());
}

// The generic tool format's conversation (generic_tools.h): the
// instructions in a system turn (or the first user turn, for a template
// that refuses a system role) and earlier tool turns as text. The tools go
// no further (the template shows no format for them).
void PrepareGenericConversation(const ServedModel& model, const ToolPlan& plan,
                                GenerateParams* p) {
  std::string instructions;
  if (plan.generic) {
    instructions = GenericToolInstructions(
        p->tools,
        plan.mode == ToolPlan::Mode::kAuto       ? GenericToolMode::kAuto
        : plan.mode == ToolPlan::Mode::kRequired ? GenericToolMode::kRequired
                                                 : GenericToolMode::kNamed,
        plan.function);
  }
  if (instructions.empty() && !HasToolTurns(p->messages)) return;
  std::vector<ChatMessage> messages =
      GenericToolConversation(p->messages, instructions, false);
  if (!instructions.empty()) {
    absl::StatusOr<std::string> rendered =
        model.chat_format()->Render(messages, p->add_generation_prompt);
    if (!rendered.ok() &&
        rendered.status().code() == absl::StatusCode::kInvalidArgument) {
      messages = GenericToolConversation(p->messages, instructions, true);
    }
  }
  p->messages = std::move(messages);
  if (plan.generic) p->tools.clear();
}

// The output parser of each sample of a chat request: tool calls (by the
// tool plan) under the model's reasoning parser, started inside the
// reasoning when the prompt opened it. Null when neither applies.
std::function<std::unique_ptr<OutputParser>()> OutputParsers(
    const ServedModel& model, const GenerateParams& p, const ToolPlan& plan) {
  if (p.messages.empty()) return nullptr;
  std::string reasoning = model.spec().overrides.reasoning_parser.value_or(
      model.chat_format()->reasoning_parser());
  if (reasoning == "none") reasoning.clear();
  std::string tool_format;
  if (plan.generic) {
    tool_format = "generic";
  } else if (plan.mode == ToolPlan::Mode::kAuto) {
    tool_format = NativeToolFormat(model);
  }
  if (reasoning.empty() && tool_format.empty() &&
      plan.mode != ToolPlan::Mode::kRequired &&
      plan.mode != ToolPlan::Mode::kNamed) {
    return nullptr;
  }
  bool opened = false;
  if (!reasoning.empty()) {
    absl::StatusOr<std::string> prompt = model.chat_format()->Render(
        p.messages, p.add_generation_prompt, p.tools);
    opened = prompt.ok() && ReasoningOpenedByPrompt(reasoning, *prompt);
  }
  return [reasoning, tool_format, plan,
          opened]() -> std::unique_ptr<OutputParser> {
    std::unique_ptr<OutputParser> tools;
    if (!tool_format.empty()) {
      tools = NewToolParser(tool_format);
    } else if (plan.mode == ToolPlan::Mode::kRequired) {
      tools = NewRequiredToolParser();
    } else if (plan.mode == ToolPlan::Mode::kNamed) {
      tools = NewNamedToolParser(plan.function);
    }
    if (reasoning.empty()) return tools;
    return NewReasoningParser(reasoning, std::move(tools), opened);
  };
}

void ReportPrefill(RpcObserver* observer, absl::string_view task,
                   absl::string_view model, int64_t inputs, int64_t tokens,
                   const RequestTimings& timings) {
  if (observer != nullptr) {
    observer->OnPrefillDone(task, model, inputs, tokens, timings);
  }
}

// The shared flow of the prefill tasks: resolve, validate and submit
// (`submit`), answer (`answer` builds it from the engine's result).
template <typename Result, typename Answer>
absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitPrefill(
    const RequestLayer& layer, const std::string& model_name, Task task,
    absl::string_view task_label, std::string* resolved,
    const std::function<absl::StatusOr<std::shared_ptr<RequestHandle>>(
        ServedModel&, ResultCallback<Result>)>& submit,
    std::function<int64_t(const Result&)> outputs,
    std::function<Answer(const ServedModelInfo&, Result)> answer,
    RequestLayer::Sink<Answer> done) {
  if (absl::Status s = layer.CheckAccepting(); !s.ok()) return s;
  auto model = layer.models()->Resolve(model_name, task);
  if (!model.ok()) return model.status();
  if (resolved != nullptr) *resolved = (*model)->name();
  ServedModelInfo info = (*model)->info();
  ServedModel& served = **model;
  // Held until the answer is out (an unload waits for it).
  auto lease = std::make_shared<ModelLease>(*std::move(model));
  return submit(
      served, [observer = layer.observer(), info, label = std::string(task_label),
               outputs = std::move(outputs), answer = std::move(answer),
               done = std::move(done), lease](absl::StatusOr<Result> result) {
        if (!result.ok()) {
          done(result.status());
          lease->Release();
          return;
        }
        ReportPrefill(observer, label, info.name, outputs(*result),
                      result->total_tokens, result->timings);
        done(answer(info, *std::move(result)));
        lease->Release();
      });
}

// Indices of `scores`, best first (ties in input order).
std::vector<size_t> BestFirst(const std::vector<float>& scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
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
    GenerateInput in, GenerateSink sink, std::string* model_name) {
  RETURN_IF_ERROR(CheckAccepting());
  ASSIGN_OR_RETURN(ModelLease model,
                   models_->Resolve(in.model, Task::kGenerate));
  if (model_name != nullptr) *model_name = model->name();
  RETURN_IF_ERROR(Validate(in, model->info()));
  const std::string native_tools = NativeToolFormat(*model);
  const bool generic = native_tools.empty() || native_tools == "generic";
  const ToolPlan plan = PlanTools(&in, generic);
  if (plan.mode != ToolPlan::Mode::kOff &&
      !model->chat_format()->has_template()) {
    return FieldError("tools", absl::StrCat(": model '", model->name(),
                                            "' has no usable chat template "
                                            "to show tools to"));
  }
  GenerateParams& p = in.params;
  if (generic && !p.messages.empty()) {
    PrepareGenericConversation(*model, plan, &p);
  }
  auto parsers = OutputParsers(*model, p, plan);
  if (in.prompt_token_ids.has_value()) {
    // In the vocabulary (Validate), so in int32.
    p.prompt_token_ids.assign(in.prompt_token_ids->begin(),
                              in.prompt_token_ids->end());
  }
  p.add_special_tokens = in.add_special_tokens.value_or(p.messages.empty());
  bool skip = in.skip_special_tokens.value_or(true);
  if (plan.mode == ToolPlan::Mode::kAuto && !plan.generic &&
      !in.skip_special_tokens) {
    // Mistral's [TOOL_CALLS] and Llama's <|python_tag|> are special tokens.
    skip = !ToolParserNeedsSpecialTokens(native_tools);
  }
  p.sampling.skip_special_tokens = skip;
  if (p.request_id.empty()) {
    p.request_id = absl::StrCat("gen-", absl::ToUnixNanos(absl::Now()));
  }
  std::optional<std::string> echo;
  if (in.echo_prompt) {
    p.return_prompt_token_ids = true;
    echo = p.prompt.value_or("");
  }
  const bool constrained = plan.mode == ToolPlan::Mode::kRequired ||
                           plan.mode == ToolPlan::Mode::kNamed ||
                           p.sampling.response_format.or_text;
  Engine& engine = model->engine();
  auto stream = std::make_shared<GenerateStream>(
      std::move(sink), p.request_id, std::move(model), observer_,
      std::move(parsers), constrained, std::move(echo));
  auto handle = engine.SubmitGenerate(
      std::move(p), [stream](const absl::StatusOr<GenerateChunk>& chunk) {
        stream->OnChunk(chunk);
      });
  if (!handle.ok() && constrained) return ToolConstraintError(handle.status());
  return handle;
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Embed(
    EmbedInput in, Sink<EmbedResult> done, std::string* model_name) {
  auto input = std::make_shared<EmbedInput>(std::move(in));
  return SubmitPrefill<EmbedResult, EmbedResult>(
      *this, input->model, Task::kEmbed, "embed", model_name,
      [this, input](ServedModel& model, ResultCallback<EmbedResult> cb)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        RETURN_IF_ERROR(Validate(*input, model.info(), limits_));
        for (const std::vector<int64_t>& ids : input->token_ids) {
          // In the vocabulary (Validate), so in int32.
          input->params.token_ids.emplace_back(ids.begin(), ids.end());
        }
        return model.engine().SubmitEmbed(std::move(input->params),
                                          std::move(cb));
      },
      [](const EmbedResult& r) {
        return static_cast<int64_t>(r.embeddings.size());
      },
      [](const ServedModelInfo&, EmbedResult r) { return r; },
      std::move(done));
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Rerank(
    RerankInput in, Sink<RerankAnswer> done, std::string* model_name) {
  auto input = std::make_shared<RerankInput>(std::move(in));
  return SubmitPrefill<RerankResult, RerankAnswer>(
      *this, input->model, Task::kRerank, "rerank", model_name,
      [this, input](ServedModel& model, ResultCallback<RerankResult> cb)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        RETURN_IF_ERROR(Validate(*input, limits_));
        // The answer repeats documents only when asked to: only then is a
        // copy kept for it.
        RerankParams params = input->return_documents
                                  ? input->params
                                  : std::move(input->params);
        return model.engine().SubmitRerank(std::move(params), std::move(cb));
      },
      [](const RerankResult& r) {
        return static_cast<int64_t>(r.scores.size());
      },
      [input](const ServedModelInfo&, RerankResult r) {
        RerankAnswer a;
        std::vector<size_t> order = BestFirst(r.scores);
        size_t n = order.size();
        if (input->top_n > 0) n = std::min<size_t>(n, input->top_n);
        for (size_t k = 0; k < n; ++k) {
          const size_t i = order[k];
          RerankAnswer::Item item{static_cast<int64_t>(i), r.scores[i],
                                  std::nullopt};
          if (input->return_documents) item.document = input->params.documents[i];
          a.results.push_back(std::move(item));
        }
        a.total_tokens = r.total_tokens;
        a.timings = r.timings;
        return a;
      },
      std::move(done));
}

absl::StatusOr<std::shared_ptr<RequestHandle>> RequestLayer::Classify(
    ClassifyInput in, Sink<ClassifyAnswer> done, std::string* model_name) {
  auto input = std::make_shared<ClassifyInput>(std::move(in));
  return SubmitPrefill<ClassifyResult, ClassifyAnswer>(
      *this, input->model, Task::kClassify, "classify", model_name,
      [this, input](ServedModel& model, ResultCallback<ClassifyResult> cb)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        RETURN_IF_ERROR(Validate(*input, limits_));
        return model.engine().SubmitClassify(std::move(input->params),
                                             std::move(cb));
      },
      [](const ClassifyResult& r) {
        return static_cast<int64_t>(r.scores.size());
      },
      [](const ServedModelInfo& info, ClassifyResult r) {
        ClassifyAnswer a;
        for (const std::vector<float>& scores : r.scores) {
          std::vector<ClassifyAnswer::Label>& labels = a.results.emplace_back();
          for (size_t idx : BestFirst(scores)) {
            labels.push_back(
                {static_cast<int64_t>(idx),
                 idx < info.labels.size() ? info.labels[idx]
                                          : absl::StrCat("LABEL_", idx),
                 scores[idx]});
          }
        }
        a.total_tokens = r.total_tokens;
        return a;
      },
      std::move(done));
}

absl::StatusOr<TokenizeAnswer> RequestLayer::Tokenize(
    const TokenizeInput& in, std::string* model_name) const {
  RETURN_IF_ERROR(CheckAccepting());
  ASSIGN_OR_RETURN(ModelLease model, models_->ResolveAny(in.model));
  if (model_name != nullptr) *model_name = model->name();
  RETURN_IF_ERROR(Validate(in));
  const bool chat = !in.messages.empty();
  // A chat template writes its own special tokens.
  const bool add_special = in.add_special_tokens.value_or(!chat);
  TokenizeAnswer answer;
  answer.max_input_tokens = model->info().max_input_tokens;
  if (chat) {
    // The prompt a generation with these tools would see (tool_choice
    // auto): on a model without a tool format, the generic format's.
    GenerateParams p;
    p.messages = in.messages;
    p.tools = in.tools;
    p.add_generation_prompt = in.add_generation_prompt.value_or(true);
    const std::string native = NativeToolFormat(*model);
    if (native.empty() || native == "generic") {
      ToolPlan plan;
      if (!p.tools.empty()) {
        plan.mode = ToolPlan::Mode::kAuto;
        plan.generic = true;
      }
      PrepareGenericConversation(*model, plan, &p);
    }
    ASSIGN_OR_RETURN(answer.rendered_prompt,
                     model->chat_format()->Render(
                         p.messages, p.add_generation_prompt, p.tools));
  }
  ASSIGN_OR_RETURN(Encoding enc,
                   model->tokenizer().Encode(
                       chat ? answer.rendered_prompt : in.text, add_special));
  answer.token_ids = std::move(enc.ids);
  answer.tokens = std::move(enc.tokens);
  if (in.return_offsets) {
    for (const auto& [start, end] : enc.offsets) {
      answer.offsets.emplace_back(start, end);
    }
  }
  return answer;
}

absl::StatusOr<std::string> RequestLayer::Detokenize(
    const DetokenizeInput& in, std::string* model_name) const {
  RETURN_IF_ERROR(CheckAccepting());
  ASSIGN_OR_RETURN(ModelLease model, models_->ResolveAny(in.model));
  if (model_name != nullptr) *model_name = model->name();
  const Tokenizer& tok = model->tokenizer();
  std::vector<int32_t> ids;
  ids.reserve(in.token_ids.size());
  for (int64_t id : in.token_ids) {
    if (id < 0 || id >= static_cast<int64_t>(tok.vocab_size())) {
      return FieldError("token_ids",
                        absl::StrCat(": id ", id,
                                     " is outside the vocabulary [0, ",
                                     tok.vocab_size(), ")"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return tok.Decode(ids, in.skip_special_tokens.value_or(true));
}

std::vector<ServedModelInfo> RequestLayer::ListModels() const {
  return models_->List();
}

absl::StatusOr<ServedModelInfo> RequestLayer::LoadModel(
    const LoadModelInput& in) {
  RETURN_IF_ERROR(CheckAccepting());
  if (in.name.empty()) {
    return FieldError("name", ": set the model's name (as --model NAME=PATH)");
  }
  ModelSpec spec;
  spec.name = in.name;
  if (in.path.empty()) {
    if (!in.options.empty()) {
      return FieldError("options",
                        ": options need a path (they build a new model); "
                        "without one the model loads as it was");
    }
  } else {
    if (!spec_builder_) {
      return absl::UnimplementedError("this server cannot load models");
    }
    ASSIGN_OR_RETURN(spec, spec_builder_(in));
  }
  return models_->LoadModel(std::move(spec), in.replace, in.wait);
}

void RequestLayer::WhenModelReady(const std::string& model,
                                  std::function<void()> then) {
  if (!models_->WouldWait(model)) {
    then();
    return;
  }
  {
    absl::MutexLock lock(&deferred_mu_);
    ++deferred_;
  }
  std::thread([this, model, then = std::move(then)] {
    {
      // Loads it (or waits for the load under way); held through `then` so
      // the model cannot be evicted before the request takes its own.
      absl::StatusOr<ModelLease> lease = models_->ResolveAny(model);
      then();
    }
    absl::MutexLock lock(&deferred_mu_);
    --deferred_;
  }).detach();
}

void RequestLayer::AwaitDeferred() {
  absl::MutexLock lock(&deferred_mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(deferred_mu_) {
    return deferred_ == 0;
  };
  deferred_mu_.Await(absl::Condition(&none));
}

absl::StatusOr<ServedModelInfo> RequestLayer::UnloadModel(
    const UnloadModelInput& in) {
  if (in.name.empty()) {
    return FieldError("name", ": set the name of the model to unload");
  }
  std::optional<absl::Duration> grace;
  if (in.grace_seconds.has_value()) {
    const double g = *in.grace_seconds;
    if (!(g >= 0 && g <= 86400)) {
      return FieldError("grace_seconds",
                        absl::StrCat(": must be in [0, 86400]; got ", g));
    }
    grace = absl::Seconds(g);
  }
  return models_->UnloadModel(in.name, grace);
}

absl::StatusOr<ServedModelInfo> RequestLayer::GetModel(
    const std::string& name) const {
  if (name.empty()) {
    return FieldError("name", ": set the model name (see ListModels)");
  }
  return models_->Find(name);
}

}  // namespace inferd
