#include "runtime/engine/model_manager.h"

#include <malloc.h>

#include <algorithm>
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
#include "runtime/loader/hf_download.h"
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
  {
    absl::MutexLock lock(&use_mu_);
    last_use_ = absl::Now();  // keep_alive counts from here
  }
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

// ---- ServedModel: requests holding it -------------------------------------

void ServedModel::BeginUse() {
  absl::MutexLock lock(&use_mu_);
  ++active_;
}

void ServedModel::EndUse() {
  absl::MutexLock lock(&use_mu_);
  if (--active_ == 0) last_use_ = absl::Now();
}

int64_t ServedModel::active_requests() const {
  absl::MutexLock lock(&use_mu_);
  return active_;
}

absl::Duration ServedModel::idle_time() const {
  absl::MutexLock lock(&use_mu_);
  return active_ > 0 ? absl::ZeroDuration() : absl::Now() - last_use_;
}

bool ServedModel::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&use_mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(use_mu_) {
    return active_ == 0;
  };
  return use_mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

ModelLease::ModelLease(std::shared_ptr<ServedModel> model)
    : model_(std::move(model)) {
  if (model_) model_->BeginUse();
}

ModelLease& ModelLease::operator=(ModelLease&& other) noexcept {
  if (this != &other) {
    Release();
    model_ = std::move(other.model_);
  }
  return *this;
}

void ModelLease::Release() {
  if (!model_) return;
  // The manager holds the model until no lease is left, so this reference
  // is never the last one: dropped before the count that lets it go.
  ServedModel* m = model_.get();
  model_.reset();
  m->EndUse();
}

// ---- ModelManager -----------------------------------------------------------

struct ModelManager::Entry {
  ModelSpec spec;      // as given (path: a local path or a Hub name)
  bool given_at_start = false;
  ModelState state = ModelState::kLoading;
  // Opened (its config read): LOADING once opened, READY, UNLOADING; a
  // model given at start is opened by Create before it loads.
  std::shared_ptr<ServedModel> model;
  std::string error;
  std::string path;  // the local path once resolved
  int64_t download_done = 0;
  int64_t download_total = 0;
  int64_t loads = 0;
  bool swapping = false;  // a replace is loading beside the READY model
  absl::Status last_status;  // of the last load
  int retiring = 0;  // swapped-out models still draining
  absl::Time last_used = absl::Now();
};

namespace {

// What the manager answers for a name it does not serve now.
absl::Status NotServing(const std::string& name, ModelState state,
                        const std::string& error, bool on_demand) {
  switch (state) {
    case ModelState::kLoading:
      return absl::UnavailableError(
          absl::StrCat("model '", name, "' is still loading"));
    case ModelState::kFailed:
      return absl::UnavailableError(
          absl::StrCat("model '", name, "' failed to load: ", error));
    case ModelState::kUnloading:
      return absl::UnavailableError(absl::StrCat(
          "model '", name, "' is being unloaded; load it again with "
          "LoadModel (POST /v1/models) when it is UNLOADED"));
    case ModelState::kUnloaded:
      return absl::UnavailableError(absl::StrCat(
          "model '", name, "' is not loaded", on_demand ? "" :
          "; load it with LoadModel (POST /v1/models)"));
    case ModelState::kReady:
      break;
  }
  return absl::OkStatus();
}

// A Hub name's local copy (downloading it when the cache lacks it), or the
// path as given.
absl::StatusOr<std::string> LocalPath(
    const ModelSpec& spec, const std::atomic<bool>* cancel,
    const std::function<void(int64_t, int64_t)>& progress) {
  std::error_code ec;
  if (std::filesystem::exists(spec.path, ec)) return spec.path;
  std::optional<HubModelRef> ref = ParseHubModelRef(spec.path);
  if (!ref) return spec.path;  // OpenModelDirectory says it is missing
  HubFetchOptions options = HubFetchOptionsFromEnv();
  options.cancel = cancel;
  options.progress = progress;
  return FetchHubModel(*ref, options);
}

// Opens `spec` at `path`: its config read, workflow chosen, components
// checked. A fault in a model file's contents gives a FAILED model.
absl::StatusOr<std::shared_ptr<ServedModel>> OpenModel(ModelSpec spec,
                                                       const std::string& path) {
  const std::string name = spec.name;
  spec.path = path;
  auto dir = OpenModelDirectory(spec.path, /*load_weights=*/false);
  if (!dir.ok() && IsModelFileFault(dir.status())) {
    absl::Status error = Annotate(dir.status(), name);
    return std::make_shared<ServedModel>(std::move(spec), std::move(error));
  }
  if (!dir.ok()) return Annotate(dir.status(), name);
  auto workflow = SelectWorkflow(dir->config, dir->st, spec.overrides);
  if (!workflow.ok()) return Annotate(workflow.status(), name);
  auto model = std::make_shared<ServedModel>(
      std::move(spec), std::move(dir->config), std::move(dir->st),
      std::move(dir->tokenizer_config), std::move(workflow).value(),
      std::move(dir->tokenizer_json_path), std::move(dir->tokenizer_json));
  RETURN_IF_ERROR(model->CheckComponents());
  return model;
}

bool IsHubName(const std::string& path) {
  std::error_code ec;
  return !std::filesystem::exists(path, ec) &&
         ParseHubModelRef(path).has_value();
}

}  // namespace

const char* ModelStateName(ModelState s) {
  switch (s) {
    case ModelState::kLoading: return "loading";
    case ModelState::kReady: return "ready";
    case ModelState::kFailed: return "failed";
    case ModelState::kUnloaded: return "unloaded";
    case ModelState::kUnloading: return "unloading";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(
    std::vector<ModelSpec> specs, Options options) {
  std::unique_ptr<ModelManager> m(new ModelManager(std::move(options)));
  absl::MutexLock lock(&m->mu_);
  for (ModelSpec& spec : specs) {
    for (const auto& e : m->entries_) {
      if (e->spec.name == spec.name) {
        return absl::InvalidArgumentError(
            absl::StrCat("two models are named '", spec.name, "'"));
      }
    }
    auto e = std::make_shared<Entry>();
    e->given_at_start = true;
    e->state = spec.on_demand ? ModelState::kUnloaded : ModelState::kLoading;
    e->spec = spec;
    e->path = spec.path;
    if (!IsHubName(spec.path)) {
      // Read now: a path that is not a model is a startup error.
      ASSIGN_OR_RETURN(e->model, OpenModel(spec, spec.path));
      if (!e->model->open_error().ok()) {
        e->state = ModelState::kFailed;
        e->error = std::string(e->model->open_error().message());
      }
    }
    m->entries_.push_back(std::move(e));
  }
  ModelManager* raw = m.get();
  m->reaper_ = std::thread([raw] { raw->Reaper(); });
  return m;
}

ModelManager::~ModelManager() { Shutdown(); }

void ModelManager::CancelLoading() {
  cancel_.store(true, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  changed_.SignalAll();
}

void ModelManager::LoadAll(const OnLoaded& on_loaded) {
  std::vector<std::shared_ptr<Entry>> startup;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& e : entries_) {
      if (!e->spec.on_demand) startup.push_back(e);
    }
  }
  for (const auto& e : startup) {
    std::shared_ptr<ServedModel> opened;
    ModelSpec spec;
    {
      absl::MutexLock lock(&mu_);
      opened = e->model;
      spec = e->spec;
    }
    (void)RunLoad(e, std::move(spec), /*replace=*/false, std::move(opened));
    if (on_loaded) {
      ServedModelInfo info;
      std::shared_ptr<ServedModel> model;
      {
        absl::MutexLock lock(&mu_);
        info = InfoLocked(*e);
        model = e->model;
      }
      on_loaded(info, model.get());
    }
  }
  loaded_.store(true, std::memory_order_release);
}

absl::Status ModelManager::RunLoad(
    const std::shared_ptr<Entry>& e, ModelSpec spec, bool replace,
    std::shared_ptr<ServedModel> opened,
    std::shared_ptr<ServedModel>* swapped_out) {
  std::shared_ptr<ServedModel> model = std::move(opened);
  absl::Status status;
  if (!model) {
    auto progress = [this, e](int64_t done, int64_t total) {
      std::string name;
      {
        absl::MutexLock lock(&mu_);
        e->download_done = done;
        e->download_total = total;
        name = e->spec.name;
      }
      if (options_.on_download) options_.on_download(name, done, total);
    };
    absl::StatusOr<std::string> path = LocalPath(spec, &cancel_, progress);
    if (!path.ok()) {
      status = Annotate(path.status(), spec.name);
    } else {
      {
        absl::MutexLock lock(&mu_);
        e->path = *path;
      }
      absl::StatusOr<std::shared_ptr<ServedModel>> m = OpenModel(spec, *path);
      if (m.ok()) {
        model = *std::move(m);
      } else {
        status = m.status();
      }
    }
  }
  if (model) {
    if (options_.step_observer) {
      model->set_step_observer(options_.step_observer(spec.name));
    }
    if (!replace) {
      absl::MutexLock lock(&mu_);
      e->model = model;  // ListModels shows what is loading
    }
    status = model->Load(&cancel_);
    if (!status.ok() && !model->info().error.empty()) {
      status = absl::Status(status.code(), model->info().error);
    }
  }
  if (absl::IsCancelled(status) || loading_cancelled()) {
    if (!status.ok()) {
      status = absl::UnavailableError(
          "not loaded: the server shut down while loading models");
    }
  }
  std::shared_ptr<ServedModel> old;
  {
    absl::MutexLock lock(&mu_);
    ++e->loads;
    e->last_status = status;
    if (status.ok()) {
      if (replace) {
        old = std::move(e->model);
        if (old && swapped_out != nullptr) ++e->retiring;
      }
      e->model = std::move(model);  // no other reference left here
      e->spec = spec;
      e->state = ModelState::kReady;
      e->error.clear();
    } else if (!replace) {
      e->model = std::move(model);  // a FAILED model keeps what it read
      e->state = ModelState::kFailed;
      e->error = std::string(status.message());
    }
    e->swapping = false;
    e->last_used = absl::Now();
    changed_.SignalAll();
  }
  if (swapped_out != nullptr) {
    *swapped_out = std::move(old);
  } else if (old) {
    (void)DrainAndFree(std::move(old), std::nullopt);
  }
  return status;
}

void ModelManager::StartLoad(const std::shared_ptr<Entry>& e, ModelSpec spec,
                             bool replace, std::shared_ptr<Entry> evicted) {
  JoinFinishedThreads();
  std::shared_ptr<ServedModel> opened;
  // A model opened by Create and never loaded (on demand) is loaded as is.
  if (!replace && e->model && e->model->state() == ModelState::kLoading &&
      e->model->open_error().ok() && spec.path == e->spec.path) {
    opened = e->model;
  }
  threads_.emplace_back([this, e, spec = std::move(spec), replace,
                         evicted = std::move(evicted),
                         opened = std::move(opened)]() mutable {
    if (evicted) FinishUnload(evicted, options_.evict_grace);
    std::shared_ptr<ServedModel> old;
    (void)RunLoad(e, std::move(spec), replace, std::move(opened), &old);
    if (options_.on_change) {
      ServedModelInfo info;
      {
        absl::MutexLock lock(&mu_);
        info = InfoLocked(*e);
      }
      options_.on_change(info);
    }
    // Swapped out: its running requests finish on it, then it goes.
    if (old) {
      (void)DrainAndFree(std::move(old), std::nullopt);
      absl::MutexLock lock(&mu_);
      --e->retiring;
      changed_.SignalAll();
    }
    absl::MutexLock lock(&mu_);
    finished_.push_back(std::this_thread::get_id());
  });
}

void ModelManager::JoinFinishedThreads() {
  for (const std::thread::id& id : finished_) {
    for (auto it = threads_.begin(); it != threads_.end(); ++it) {
      if (it->get_id() == id) {
        it->join();  // past its last use of the lock we hold
        threads_.erase(it);
        break;
      }
    }
  }
  finished_.clear();
}

absl::StatusOr<std::shared_ptr<ModelManager::Entry>>
ModelManager::EvictForLocked(const Entry* e) {
  if (options_.max_loaded_models <= 0) return nullptr;
  int loaded = 0;
  std::shared_ptr<Entry> lru;
  for (const auto& other : entries_) {
    if (other.get() == e) continue;
    if (other->state != ModelState::kReady &&
        other->state != ModelState::kLoading) {
      continue;
    }
    ++loaded;
    if (other->state == ModelState::kReady && !other->swapping &&
        other->model->active_requests() == 0 &&
        (lru == nullptr || other->last_used < lru->last_used)) {
      lru = other;
    }
  }
  if (loaded < options_.max_loaded_models) return nullptr;
  if (lru == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--max-loaded-models ", options_.max_loaded_models,
        " models are loaded or loading and none is idle; unload one "
        "(UnloadModel) or raise --max-loaded-models"));
  }
  lru->state = ModelState::kUnloading;
  changed_.SignalAll();
  return lru;
}

bool ModelManager::DrainAndFree(std::shared_ptr<ServedModel> model,
                                std::optional<absl::Duration> grace) {
  if (!model) return true;
  bool idle = false;
  if (grace.has_value()) {
    idle = model->WaitIdle(absl::Now() + *grace);
  } else {
    // No limit, but a server that stops does not wait for them.
    while (!(idle = model->WaitIdle(absl::Now() + absl::Seconds(1)))) {
      if (loading_cancelled()) break;
    }
  }
  if (!idle) {
    model->Shutdown();  // their requests end CANCELLED / UNAVAILABLE
    idle = model->WaitIdle(absl::Now() + options_.cancel_wait);
  }
  if (!idle) {
    absl::MutexLock lock(&mu_);
    draining_.push_back(std::move(model));
    changed_.SignalAll();
    return false;
  }
  model.reset();  // the engine, its KV cache and weights go here
#if defined(__GLIBC__)
  malloc_trim(0);  // hand the freed heap back to the system
#endif
  return true;
}

void ModelManager::FinishUnload(const std::shared_ptr<Entry>& e,
                                std::optional<absl::Duration> grace) {
  std::shared_ptr<ServedModel> model;
  ServedModelInfo unloading;
  {
    absl::MutexLock lock(&mu_);
    unloading = InfoLocked(*e);
    model = std::move(e->model);
  }
  if (options_.on_change) options_.on_change(unloading);
  // DrainAndFree holds `model` while requests drain, so no lease ever drops
  // the last reference (an engine thread must not free its own engine).
  (void)DrainAndFree(std::move(model), grace);
  ServedModelInfo info;
  {
    absl::MutexLock lock(&mu_);
    // A model swapped out by a replace is this name's memory too.
    auto retired = [this, &e]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return e->retiring == 0 || stopping_;
    };
    mu_.Await(absl::Condition(&retired));
    e->state = ModelState::kUnloaded;
    e->error.clear();
    e->download_done = e->download_total = 0;
    info = InfoLocked(*e);
    if (!e->given_at_start) {
      entries_.erase(std::remove(entries_.begin(), entries_.end(), e),
                     entries_.end());
    }
    changed_.SignalAll();
  }
  if (options_.on_change) options_.on_change(info);
}

absl::StatusOr<ServedModelInfo> ModelManager::LoadModel(ModelSpec spec,
                                                        bool replace,
                                                        bool wait) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || loading_cancelled()) {
    return absl::UnavailableError("the server is shutting down");
  }
  std::shared_ptr<Entry> e = FindLocked(spec.name);
  if (e == nullptr) {
    if (spec.path.empty()) {
      return FieldErrorMessage(
          "path", absl::StrCat("model '", spec.name,
                               "' is new here: give its path (a model "
                               "directory, a .gguf file or a Hub name)"));
    }
    e = std::make_shared<Entry>();
    e->spec = spec;
    e->path = spec.path;
    e->state = ModelState::kLoading;
    absl::StatusOr<std::shared_ptr<Entry>> evicted = EvictForLocked(e.get());
    if (!evicted.ok()) return evicted.status();
    entries_.push_back(e);
    StartLoad(e, std::move(spec), false, *std::move(evicted));
  } else {
    if (spec.path.empty()) spec = e->spec;  // load it again as it was
    switch (e->state) {
      case ModelState::kLoading:
        break;  // waited for below
      case ModelState::kUnloading:
        return absl::FailedPreconditionError(absl::StrCat(
            "model '", spec.name, "' is being unloaded; load it when it is "
            "UNLOADED (GetModel)"));
      case ModelState::kReady:
        if (!replace) {
          return absl::AlreadyExistsError(absl::StrCat(
              "model '", spec.name, "' is loaded; set replace to swap in a "
              "new one (running requests finish on the old), or unload it "
              "first"));
        }
        if (e->swapping) {
          return absl::FailedPreconditionError(absl::StrCat(
              "model '", spec.name, "' is already being replaced"));
        }
        e->swapping = true;
        StartLoad(e, std::move(spec), true, nullptr);
        break;
      case ModelState::kUnloaded:
      case ModelState::kFailed: {
        e->state = ModelState::kLoading;
        absl::StatusOr<std::shared_ptr<Entry>> evicted =
            EvictForLocked(e.get());
        if (!evicted.ok()) {
          e->state = ModelState::kUnloaded;
          return evicted.status();
        }
        e->error.clear();
        StartLoad(e, std::move(spec), false, *std::move(evicted));
        break;
      }
    }
  }
  if (!wait) return InfoLocked(*e);
  auto settled = [this, e]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (e->state != ModelState::kLoading && !e->swapping) || stopping_;
  };
  mu_.Await(absl::Condition(&settled));
  if (!e->last_status.ok()) return e->last_status;
  return InfoLocked(*e);
}

absl::StatusOr<ServedModelInfo> ModelManager::UnloadModel(
    const std::string& name, std::optional<absl::Duration> grace) {
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    e = FindLocked(name);
    if (e == nullptr) return UnknownModel(name);
    switch (e->state) {
      case ModelState::kLoading:
        return absl::FailedPreconditionError(absl::StrCat(
            "model '", name, "' is loading; unload it once it is READY or "
            "FAILED (GetModel)"));
      case ModelState::kUnloading:
        return absl::FailedPreconditionError(
            absl::StrCat("model '", name, "' is already being unloaded"));
      case ModelState::kReady:
        if (e->swapping) {
          return absl::FailedPreconditionError(absl::StrCat(
              "model '", name, "' is being replaced; unload it after"));
        }
        break;
      case ModelState::kUnloaded:
      case ModelState::kFailed:
        break;
    }
    e->state = ModelState::kUnloading;
    changed_.SignalAll();
  }
  FinishUnload(e, grace);
  absl::MutexLock lock(&mu_);
  return InfoLocked(*e);
}

std::shared_ptr<ModelManager::Entry> ModelManager::FindLocked(
    const std::string& name) const {
  for (const auto& e : entries_) {
    if (e->spec.name == name) return e;
  }
  return nullptr;
}

absl::Status ModelManager::UnknownModel(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e->spec.name);
  return FieldErrorMessage(
      "model",
      absl::StrCat("unknown model '", name, "'; this server has: ",
                   names.empty() ? std::string("none")
                                 : absl::StrJoin(names, ", ")),
      absl::StatusCode::kNotFound);
}

absl::StatusOr<ServedModelInfo> ModelManager::Find(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Entry> e = FindLocked(name);
  if (e == nullptr) return UnknownModel(name);
  return InfoLocked(*e);
}

bool ModelManager::WouldWait(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  std::shared_ptr<Entry> e;
  if (!name.empty()) {
    e = FindLocked(name);
  } else if (entries_.size() == 1) {
    e = entries_[0];
  }
  return e != nullptr && e->spec.on_demand && e->state != ModelState::kReady;
}

absl::StatusOr<ModelLease> ModelManager::Resolve(const std::string& name,
                                                 Task task) {
  return Acquire(name, &task);
}

absl::StatusOr<ModelLease> ModelManager::ResolveAny(const std::string& name) {
  return Acquire(name, nullptr);
}

absl::StatusOr<ModelLease> ModelManager::Acquire(const std::string& name,
                                                 const Task* task) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Entry> e;
  if (!name.empty()) {
    e = FindLocked(name);
    if (e == nullptr) return UnknownModel(name);
  } else if (entries_.size() == 1) {
    e = entries_[0];
  } else if (task == nullptr) {
    return FieldError("model",
                      ": this server has several models; set the request's "
                      "model field (see ListModels)");
  } else {
    std::vector<std::shared_ptr<Entry>> candidates;
    for (const auto& c : entries_) {
      if (c->model && c->model->open_error().ok() &&
          c->model->workflow().Supports(*task)) {
        candidates.push_back(c);
      }
    }
    if (candidates.empty()) {
      return FieldErrorMessage(
          "model",
          absl::StrCat("no model of this server can ", TaskName(*task),
                       "; see ListModels for what each model does"),
          absl::StatusCode::kNotFound);
    }
    if (candidates.size() > 1) {
      std::vector<std::string> names;
      for (const auto& c : candidates) names.push_back(c->spec.name);
      return FieldErrorMessage(
          "model", absl::StrCat("several models can ", TaskName(*task), " (",
                                absl::StrJoin(names, ", "),
                                "); set the request's model field"));
    }
    e = candidates[0];
  }
  const std::string& model_name = e->spec.name;
  while (true) {
    // A model that failed to open has no workflow: its error is the answer.
    if (task != nullptr && e->model && e->model->open_error().ok() &&
        !e->model->workflow().Supports(*task)) {
      std::vector<std::string> tasks;
      for (Task t : e->model->workflow().tasks) {
        tasks.emplace_back(TaskName(t));
      }
      return FieldErrorMessage(
          "model",
          absl::StrCat("model '", model_name, "' (",
                       e->model->workflow().name, ") cannot ",
                       TaskName(*task), "; it supports: ",
                       absl::StrJoin(tasks, ", ")),
          absl::StatusCode::kFailedPrecondition);
    }
    if (e->state == ModelState::kReady) {
      e->last_used = absl::Now();
      return ModelLease(e->model);
    }
    if (!e->spec.on_demand || stopping_ || loading_cancelled()) {
      return NotServing(model_name, e->state, e->error, e->spec.on_demand);
    }
    // On demand: this request loads it (or waits for the load under way).
    if (e->state == ModelState::kUnloaded || e->state == ModelState::kFailed) {
      e->state = ModelState::kLoading;
      absl::StatusOr<std::shared_ptr<Entry>> evicted = EvictForLocked(e.get());
      if (!evicted.ok()) {
        e->state = ModelState::kUnloaded;
        return evicted.status();
      }
      e->error.clear();
      StartLoad(e, e->spec, false, *std::move(evicted));
    } else if (e->state != ModelState::kLoading) {
      return NotServing(model_name, e->state, e->error, true);
    }
    auto settled = [this, e]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return e->state != ModelState::kLoading || stopping_ ||
             loading_cancelled();
    };
    mu_.Await(absl::Condition(&settled));
    if (e->state != ModelState::kReady) {
      return NotServing(model_name, e->state, e->error, false);
    }
  }
}

ServedModelInfo ModelManager::InfoLocked(const Entry& e) const {
  ServedModelInfo i = e.model ? e.model->info() : ServedModelInfo();
  i.name = e.spec.name;
  i.source = e.spec.path;
  i.path = e.model ? e.model->spec().path : e.path;
  i.state = e.state;
  i.error = e.state == ModelState::kFailed ? e.error : std::string();
  i.download_bytes_done = e.download_done;
  i.download_bytes_total = e.download_total;
  i.on_demand = e.spec.on_demand;
  i.keep_alive_seconds = e.spec.keep_alive_seconds;
  i.loads = e.loads;
  i.added_while_serving = !e.given_at_start;
  if (e.model && e.state == ModelState::kReady) {
    i.active_requests = e.model->active_requests();
    i.idle_seconds = absl::ToDoubleSeconds(e.model->idle_time());
  }
  return i;
}

std::vector<ServedModelInfo> ModelManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ServedModelInfo> out;
  for (const auto& e : entries_) out.push_back(InfoLocked(*e));
  return out;
}

std::vector<std::shared_ptr<ServedModel>> ModelManager::models() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& e : entries_) {
    if (e->model) out.push_back(e->model);
  }
  return out;
}

std::vector<std::shared_ptr<ServedModel>> ModelManager::Loaded() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& e : entries_) {
    if (e->model && e->state == ModelState::kReady) out.push_back(e->model);
  }
  return out;
}

size_t ModelManager::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void ModelManager::Reaper() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    std::vector<std::shared_ptr<Entry>> expired;
    for (const auto& e : entries_) {
      if (e->state != ModelState::kReady || e->swapping || !e->model ||
          e->spec.keep_alive_seconds <= 0) {
        continue;
      }
      const absl::Duration keep = absl::Seconds(e->spec.keep_alive_seconds);
      const absl::Duration idle = e->model->idle_time();
      if (e->model->active_requests() == 0 && idle >= keep) {
        e->state = ModelState::kUnloading;
        expired.push_back(e);
      } else {
        next = std::min(next, now + keep - idle);
      }
    }
    std::vector<std::shared_ptr<ServedModel>> freed;
    for (auto it = draining_.begin(); it != draining_.end();) {
      if ((*it)->active_requests() == 0) {
        freed.push_back(std::move(*it));
        it = draining_.erase(it);
      } else {
        ++it;
      }
    }
    if (!draining_.empty()) next = std::min(next, now + absl::Seconds(1));
    if (!expired.empty() || !freed.empty()) {
      changed_.SignalAll();
      mu_.Unlock();
      freed.clear();
      for (const auto& e : expired) FinishUnload(e, options_.evict_grace);
      mu_.Lock();
      continue;
    }
    changed_.WaitWithDeadline(&mu_, next);
  }
}

void ModelManager::Shutdown() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cancel_.store(true, std::memory_order_release);
    changed_.SignalAll();
    threads.swap(threads_);
    finished_.clear();
  }
  if (reaper_.joinable()) reaper_.join();
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu_);
  for (const auto& e : entries_) {
    if (e->model) e->model->Shutdown();
  }
  for (const auto& m : draining_) m->Shutdown();
}

}  // namespace inferd
