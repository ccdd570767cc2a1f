#include "runtime/engine/model_manager.h"

#include <filesystem>
#include <optional>

#include "runtime/tokenizer/token_bytes.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"
#include "absl/strings/str_join.h"
#include "device/device.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/rerank_format.h"
#include "runtime/engine/token_heads.h"
#include "runtime/engine/workflow.h"
#include "runtime/loader/hf_cache.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/model_registry.h"
#include "absl/time/clock.h"
#include "runtime/loader/m3_heads.h"
#include "runtime/loader/model_dir.h"
#include "runtime/loader/weights.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace {

absl::Status Annotate(const absl::Status& s, absl::string_view model) {
  return absl::Status(s.code(), absl::StrCat("model '", model, "': ", s.message()));
}

// The pooling component name of a sentence-transformers pooling mode.
std::string PoolingOf(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kCls: return "cls";
    case PoolingMode::kMean: return "mean";
    case PoolingMode::kLastToken: return "last";
    case PoolingMode::kMax: return "max";
    case PoolingMode::kMeanSqrtLen: return "mean_sqrt_len_tokens";
    case PoolingMode::kWeightedMean: return "weightedmean";
  }
  return "unknown";
}

std::string DefaultPooling(const Workflow& w, const SentenceTransformersConfig& st,
                           const ModelOverrides& o) {
  if (w.output_processor != kPoolingOutput) return "";
  if (o.pooling) return *o.pooling;
  if (st.present && st.has_pooling) return PoolingOf(st.pooling);
  return w.default_pooling;
}

// EngineOptions::dtype "auto": bfloat16 for encoders (no generation,
// bidirectional attention) where the device's BF16 products are the fast
// ones, float32 for everything else.
ModelSpec ResolveDType(ModelSpec spec, const Workflow& w) {
  std::string& dtype = spec.engine.dtype;
  if (dtype != "auto") return spec;
  const bool encoder = !w.Supports(Task::kGenerate) && w.bidirectional;
  absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
  dtype = encoder && cpu.ok() && (*cpu)->fast_bf16_products() ? "bfloat16" : "float32";
  return spec;
}

}  // namespace

ServedModel::ServedModel(ModelSpec spec, absl::Status error)
    : spec_(std::move(spec)), open_error_(std::move(error)) {
  info_.name = spec_.name;
  info_.path = spec_.path;
  info_.dtype = spec_.engine.dtype;
  info_.activations = spec_.engine.activations;
  info_.error = std::string(open_error_.message());
  state_.store(ModelState::kFailed, std::memory_order_release);
}

ServedModel::ServedModel(ModelSpec spec, ModelConfig config,
                         SentenceTransformersConfig st,
                         TokenizerConfig tok_config, Workflow workflow,
                         std::string tokenizer_json_path,
                         std::string tokenizer_json)
    : spec_(ResolveDType(std::move(spec), workflow)),
      config_(std::move(config)),
      st_(std::move(st)),
      tok_config_(std::move(tok_config)),
      workflow_(std::move(workflow)),
      tokenizer_json_path_(std::move(tokenizer_json_path)),
      tokenizer_json_(std::move(tokenizer_json)) {
  ServedModelInfo& i = info_;
  i.name = spec_.name;
  i.path = spec_.path;
  i.architecture = config_.architectures[0];
  i.workflow = workflow_.name;
  i.tasks = workflow_.tasks;
  i.hidden_size = config_.hidden_size;
  i.vocab_size = config_.vocab_size;
  i.dtype = spec_.engine.dtype;
  i.activations = spec_.engine.activations;
  i.pooling = DefaultPooling(workflow_, st_, spec_.overrides);
  i.components = {{"input_processor", workflow_.input_processor},
                  {"scheduler", workflow_.scheduler},
                  {"attention_backend", workflow_.attention_backend},
                  {"output_processor", output_processor()},
                  {"executor", workflow_.executor}};
  // Positions start at position_id_offset (XLM-R: padding_idx + 1).
  int64_t max_len =
      config_.max_position_embeddings - config_.position_id_offset();
  if (tok_config_.model_max_length && *tok_config_.model_max_length > 0) {
    max_len = std::min<int64_t>(max_len, *tok_config_.model_max_length);
  }
  if (st_.max_seq_length && *st_.max_seq_length > 0 &&
      !workflow_.Supports(Task::kGenerate)) {
    max_len = std::min<int64_t>(max_len, *st_.max_seq_length);
  }
  if (spec_.engine.max_input_tokens > 0) {
    max_len = std::min<int64_t>(max_len, spec_.engine.max_input_tokens);
  }
  i.max_input_tokens = max_len;
  if (workflow_.Supports(Task::kEmbed)) {
    i.embedding_dims = config_.hidden_size;
    if (!st_.dense.empty()) i.embedding_dims = st_.dense.back().out_features;
    // The token heads' outputs join once the engine is built (Load).
    i.embed_outputs = {"dense"};
  }
  if (workflow_.Supports(Task::kClassify) || workflow_.Supports(Task::kRerank)) {
    for (int64_t l = 0; l < config_.num_labels; ++l) {
      auto it = config_.id2label.find(l);
      i.labels.push_back(it != config_.id2label.end() ? it->second
                                                      : absl::StrCat("LABEL_", l));
    }
  }
  for (const auto& [name, prompt] : st_.prompts) i.prompt_names.push_back(name);
  chat_format_ = ChatFormat::Create(name(), tok_config_.chat_template,
                                    tok_config_.bos_token.value_or(""),
                                    tok_config_.eos_token.value_or(""));
}

const std::vector<std::string>& ServedModel::token_bytes() const {
  absl::call_once(token_bytes_once_,
                  [this] { token_bytes_ = TokenByteStrings(*tokenizer_); });
  return token_bytes_;
}

std::string ServedModel::TokenTextBytes(int32_t id) const {
  const std::vector<std::string>& bytes = token_bytes();
  if (id < 0 || static_cast<size_t>(id) >= bytes.size()) return "";
  if (tokenizer_->IsSpecial(id)) return tokenizer_->IdToToken(id);
  return bytes[static_cast<size_t>(id)];
}

ServedModel::~ServedModel() { Shutdown(); }

ServedModelInfo ServedModel::info() const {
  absl::MutexLock lock(&mu_);
  ServedModelInfo i = info_;
  i.state = state();
  return i;
}

void ServedModel::SetFailed(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    info_.error = std::string(status.message());
  }
  state_.store(ModelState::kFailed, std::memory_order_release);
}

std::string ServedModel::output_processor() const {
  if (workflow_.output_processor != kPoolingOutput) {
    return workflow_.output_processor;
  }
  return PoolingComponent(DefaultPooling(workflow_, st_, spec_.overrides));
}

absl::Status ServedModel::CheckComponents() const {
  std::vector<std::pair<const RegistryKind*, std::string>> needed = {
      {&InputProcessors(), workflow_.input_processor},
      {&SchedulerKind(workflow_), workflow_.scheduler},
      {&AttentionBackends(), workflow_.attention_backend},
      {&OutputKind(workflow_), output_processor()},
      {&Executors(), workflow_.executor},
      {&ModelClasses(), workflow_.model_class},
  };
  for (const std::string& head : workflow_.token_heads) {
    needed.emplace_back(&TokenHeads(), head);
  }
  // The output formats named by --model options (a plug-in's may be among
  // them: they are checked here, once plug-ins are loaded).
  const ModelOverrides& o = spec_.overrides;
  if (o.tool_parser) needed.emplace_back(&ToolParsers(), *o.tool_parser);
  if (o.reasoning_parser) {
    needed.emplace_back(&ReasoningParsers(), *o.reasoning_parser);
  }
  if (UsesRerankFormat(config_, workflow_)) {
    needed.emplace_back(&RerankFormats(),
                        o.rerank_format.value_or(kDefaultRerankFormat));
  }
  for (const auto& [kind, name] : needed) {
    if (kind->Contains(name)) continue;
    std::string hint;
    if (kind == &OutputProcessors() &&
        workflow_.output_processor == kPoolingOutput) {
      hint = absl::StrCat(
          "; its pooling '", DefaultPooling(workflow_, st_, o), "' (",
          st_.present && st_.has_pooling && !o.pooling
              ? "from 1_Pooling/config.json"
              : "chosen for it",
          ") needs that output processor: load a plug-in that provides it "
          "with --plugin PATH.so (examples/plugin builds pooling_max), or "
          "serve another pooling with --model ",
          spec_.name, "=", spec_.path, ",pooling=mean");
    } else if (kind == &ToolParsers() || kind == &ReasoningParsers() ||
               kind == &RerankFormats()) {
      hint = absl::StrCat("; name a registered one in --model ", spec_.name,
                          "=", spec_.path, ",", kind->kind(),
                          "=NAME, or load the plug-in that provides it with "
                          "--plugin PATH.so");
    } else {
      hint = "; load the plug-in that provides it with --plugin PATH.so";
    }
    const std::vector<std::string> names = kind->Names();
    const bool by_option = kind == &ToolParsers() ||
                           kind == &ReasoningParsers() ||
                           kind == &RerankFormats();
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", spec_.name, "': ",
        by_option ? std::string("its options name")
                  : absl::StrCat("workflow ", workflow_.name, " needs"),
        " the ", kind->kind(), " '", name,
        "', which is not registered (registered: ",
        names.empty() ? std::string("none") : absl::StrJoin(names, ", "), ")",
        hint));
  }
  return absl::OkStatus();
}

absl::Status ServedModel::Load(const std::atomic<bool>* cancel) {
  if (!open_error_.ok()) return open_error_;  // FAILED since Create
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const WeightStore>> weights =
      LoadWeightsAndEngine(cancel);
  if (!weights.ok()) {
    if (absl::IsCancelled(weights.status())) {
      SetFailed(absl::UnavailableError(
          "not loaded: the server shut down while loading models"));
      return absl::UnavailableError("loading cancelled");
    }
    absl::Status s = Annotate(weights.status(), spec_.name);
    SetFailed(s);
    return s;
  }
  RecordLoaded(**weights, absl::Now() - start);
  state_.store(ModelState::kReady, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const WeightStore>>
ServedModel::LoadWeightsAndEngine(const std::atomic<bool>* cancel) {
  auto check_cancel = [cancel]() {
    return cancel != nullptr && cancel->load(std::memory_order_acquire)
               ? absl::CancelledError("loading cancelled")
               : absl::OkStatus();
  };
  RETURN_IF_ERROR(check_cancel());
  RETURN_IF_ERROR(LoadTokenizer());
  // Opened once here and shared by every replica's runner; a corrupt or
  // truncated weights file fails this model only.
  ASSIGN_OR_RETURN(std::shared_ptr<const WeightStore> weights,
                   OpenModelWeights(spec_.path));
  RETURN_IF_ERROR(check_cancel());
  ASSIGN_OR_RETURN(engine_, CreateEngine(*this, weights));
  engine_->set_step_observer(step_observer_);
  return weights;
}

absl::Status ServedModel::LoadTokenizer() {
  // A GGUF file's tokenizer was built when the model was opened; a
  // directory's tokenizer.json is read now.
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      absl::InternalError("no tokenizer");
  if (!tokenizer_json_.empty()) {
    tok = Tokenizer::FromJson(tokenizer_json_);
  } else if (absl::Status found = CheckTokenizerFile(tokenizer_json_path_);
             !found.ok()) {
    tok = found;
  } else {
    tok = Tokenizer::FromFile(tokenizer_json_path_);
  }
  std::string().swap(tokenizer_json_);  // not needed any more
  if (!tok.ok()) return tok.status();
  tokenizer_ = std::move(tok).value();
  // A tokenizer that yields ids past the embedding's rows belongs to other
  // weights: its larger ids would index past the embedding table.
  if (config_.vocab_size > 0 &&
      static_cast<int64_t>(tokenizer_->vocab_size()) > config_.vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        tokenizer_json_path_.empty() ? std::string("the tokenizer")
                                     : tokenizer_json_path_,
        " has token ids up to ", tokenizer_->vocab_size() - 1,
        " but the model's vocab_size (embedding rows) is ", config_.vocab_size,
        ": the tokenizer does not belong to these weights"));
  }
  absl::MutexLock lock(&mu_);
  info_.vocab_size = std::max<int64_t>(
      config_.vocab_size, static_cast<int64_t>(tokenizer_->vocab_size()));
  return absl::OkStatus();
}

void ServedModel::RecordLoaded(const WeightStore& weights, absl::Duration took) {
  absl::MutexLock lock(&mu_);
  for (std::string& output : engine_->EmbedOutputs()) {
    info_.embed_outputs.push_back(std::move(output));
  }
  const int64_t engine_limit = engine_->max_input_tokens();
  if (engine_limit > 0 && engine_limit < info_.max_input_tokens) {
    info_.max_input_tokens = engine_limit;
  }
  info_.weight_tensors = static_cast<int64_t>(weights.tensor_count());
  info_.weight_bytes = static_cast<int64_t>(weights.total_bytes());
  info_.load_seconds = absl::ToDoubleSeconds(took);
  const Engine::KvCacheSummary& kv = engine_->kv_cache_summary();
  info_.kv_cache_bytes = kv.bytes;
  info_.kv_cache_tokens = kv.blocks * kv.block_size;
  info_.kv_cache_note = kv.note;
}

void ServedModel::Shutdown() {
  if (engine_) engine_->Stop();
}

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(
    std::vector<ModelSpec> specs) {
  std::unique_ptr<ModelManager> m(new ModelManager());
  for (ModelSpec& spec : specs) {
    // A Hugging Face name (org/repo, org/repo:QUANT, org/repo/FILE.gguf,
    // @REVISION) that is not a local path: its snapshot in the HF cache.
    std::error_code ec;
    if (!std::filesystem::exists(spec.path, ec)) {
      if (std::optional<HubModelRef> ref = ParseHubModelRef(spec.path)) {
        absl::StatusOr<std::string> local =
            ResolveInHfCache(HfHubCacheDir(), *ref);
        if (!local.ok()) {
          absl::Status error = Annotate(local.status(), spec.name);
          m->models_.push_back(
              std::make_unique<ServedModel>(std::move(spec), std::move(error)));
          continue;
        }
        spec.path = *std::move(local);
      }
    }
    auto dir = OpenModelDirectory(spec.path, /*load_weights=*/false);
    if (!dir.ok() && IsModelFileFault(dir.status())) {
      absl::Status error = Annotate(dir.status(), spec.name);
      m->models_.push_back(
          std::make_unique<ServedModel>(std::move(spec), std::move(error)));
      continue;
    }
    if (!dir.ok()) return Annotate(dir.status(), spec.name);
    auto workflow = SelectWorkflow(dir->config, dir->st, spec.overrides);
    if (!workflow.ok()) return Annotate(workflow.status(), spec.name);
    auto model = std::make_unique<ServedModel>(
        std::move(spec), std::move(dir->config), std::move(dir->st),
        std::move(dir->tokenizer_config), std::move(workflow).value(),
        std::move(dir->tokenizer_json_path), std::move(dir->tokenizer_json));
    // A component no one registered is a startup error, not a FAILED model.
    RETURN_IF_ERROR(model->CheckComponents());
    m->models_.push_back(std::move(model));
  }
  return m;
}

ModelManager::~ModelManager() { Shutdown(); }

void ModelManager::LoadAll(
    const std::function<void(const ServedModel&)>& on_loaded) {
  for (auto& model : models_) {
    (void)model->Load(&cancel_);  // the status is kept in the model's info
    if (on_loaded) on_loaded(*model);
  }
  loaded_.store(true, std::memory_order_release);
}

absl::StatusOr<const ServedModel*> ModelManager::Find(
    const std::string& name) const {
  for (const auto& m : models_) {
    if (m->name() == name) return m.get();
  }
  std::vector<std::string> names;
  for (const auto& m : models_) names.push_back(m->name());
  return FieldErrorMessage(
      "model",
      absl::StrCat("unknown model '", name, "'; this server has: ",
                   absl::StrJoin(names, ", ")),
      absl::StatusCode::kNotFound);
}

absl::StatusOr<ServedModel*> ModelManager::Resolve(const std::string& name,
                                                   Task task) const {
  ServedModel* model = nullptr;
  if (name.empty()) {
    std::vector<ServedModel*> candidates;
    for (const auto& m : models_) {
      if (m->workflow().Supports(task)) candidates.push_back(m.get());
    }
    if (candidates.empty()) {
      return FieldErrorMessage(
          "model",
          absl::StrCat("no model of this server can ", TaskName(task),
                       "; see ListModels for what each model does"),
          absl::StatusCode::kNotFound);
    }
    if (candidates.size() > 1) {
      std::vector<std::string> names;
      for (auto* c : candidates) names.push_back(c->name());
      return FieldErrorMessage(
          "model", absl::StrCat("several models can ", TaskName(task), " (",
                                absl::StrJoin(names, ", "),
                                "); set the request's model field"));
    }
    model = candidates[0];
  } else {
    ASSIGN_OR_RETURN(const ServedModel* found, Find(name));
    model = const_cast<ServedModel*>(found);
    // A model that failed to open has no workflow: its error is the answer.
    if (model->open_error().ok() && !model->workflow().Supports(task)) {
      std::vector<std::string> tasks;
      for (Task t : model->workflow().tasks) tasks.emplace_back(TaskName(t));
      return FieldErrorMessage(
          "model",
          absl::StrCat("model '", name, "' (", model->workflow().name,
                       ") cannot ", TaskName(task), "; it supports: ",
                       absl::StrJoin(tasks, ", ")),
          absl::StatusCode::kFailedPrecondition);
    }
  }
  switch (model->state()) {
    case ModelState::kLoading:
      return absl::UnavailableError(
          absl::StrCat("model '", model->name(), "' is still loading"));
    case ModelState::kFailed:
      return absl::UnavailableError(absl::StrCat(
          "model '", model->name(), "' failed to load: ", model->info().error));
    case ModelState::kReady:
      break;
  }
  return model;
}

std::vector<ServedModelInfo> ModelManager::List() const {
  std::vector<ServedModelInfo> out;
  for (const auto& m : models_) out.push_back(m->info());
  return out;
}

void ModelManager::Shutdown() {
  for (auto& m : models_) m->Shutdown();
}

}  // namespace inferd
