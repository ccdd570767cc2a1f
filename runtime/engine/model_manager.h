// ModelManager: the models one inferd process serves. Create() checks every
// local model directory's config.json and picks its workflow (a path that is
// not a model, or a config no workflow serves, is a startup error; a GGUF
// file whose contents cannot be read makes its model FAILED); LoadAll() then
// downloads (Hub names), opens and loads tokenizer, weights and engine of
// each model, marking it READY or FAILED (others keep serving). While
// serving, models are loaded, swapped and unloaded (LoadModel/UnloadModel,
// `load: on_demand`, keep_alive, max_loaded_models); requests hold the model
// they run on with a ModelLease, so an unload waits for (or cancels) them
// before the memory goes.
// Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_MODEL_MANAGER_H_
#define INFERD_RUNTIME_ENGINE_MODEL_MANAGER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/chat/chat_format.h"
#include "runtime/engine/model_info.h"
#include "runtime/engine/model_options.h"
#include "runtime/engine/workflow.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/st_config.h"
#include "runtime/loader/tokenizer_config.h"
#include "runtime/loader/weights.h"

namespace inferd {

class Tokenizer;
class Engine;
class StepObserver;

// One served model. Immutable after it becomes READY, except state.
class ServedModel {
 public:
  // The tokenizer: `tokenizer_json` when not empty (a GGUF file's, built
  // while opening it), else the file `tokenizer_json_path`; read by Load.
  ServedModel(ModelSpec spec, ModelConfig config,
              SentenceTransformersConfig st, TokenizerConfig tok_config,
              Workflow workflow, std::string tokenizer_json_path,
              std::string tokenizer_json);
  // A model whose files could not even be opened (IsModelFileFault: a
  // corrupt GGUF file): FAILED from the start with `error`, which Load
  // returns. Its config and workflow are unknown (empty).
  ServedModel(ModelSpec spec, absl::Status error);
  ~ServedModel();

  const ModelSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const ModelConfig& config() const { return config_; }
  const SentenceTransformersConfig& st_config() const { return st_; }
  const TokenizerConfig& tokenizer_config() const { return tok_config_; }
  const Workflow& workflow() const { return workflow_; }
  // Not OK for a model built by the failed-at-open constructor.
  const absl::Status& open_error() const { return open_error_; }

  ModelState state() const { return state_.load(std::memory_order_acquire); }
  ServedModelInfo info() const;

  // Valid once state() == kReady; owned by this object.
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The bytes token `id` adds to decoded text (TokenByteStrings, computed
  // on first use), or a special token's content; empty outside the
  // vocabulary. Valid once ready; thread-safe.
  std::string TokenTextBytes(int32_t id) const;
  // Every token's bytes (TokenByteStrings, computed once, shared by
  // TokenTextBytes and the structured-output vocabulary). Valid once ready.
  const std::vector<std::string>& token_bytes() const;
  Engine& engine() const { return *engine_; }

  // The model's chat format (never null): renders conversations, or says
  // why it cannot (no template, or one that did not parse). Built at
  // construction; thread-safe.
  const std::shared_ptr<const ChatFormat>& chat_format() const {
    return chat_format_;
  }

  // The output processor the workflow runs for this model (a recipe's
  // "pooling" resolved to pooling_<the model's pooling>).
  std::string output_processor() const;
  // FAILED_PRECONDITION naming the first component of the workflow that is
  // not registered (e.g. pooling_max without its plug-in) and how to fix it.
  absl::Status CheckComponents() const;

  // Loads tokenizer, weights and engine. Sets READY or FAILED (with the
  // error kept for ServedModelInfo.error) and returns the status. When
  // `cancel` (may be null) becomes true, stops before its next phase:
  // FAILED, UNAVAILABLE.
  absl::Status Load(const std::atomic<bool>* cancel = nullptr);
  // The engine's step observer, applied when Load creates the engine (call
  // before Load). Not owned; must outlive this model.
  void set_step_observer(StepObserver* observer) { step_observer_ = observer; }
  // Stops the engine (pending requests finish with CANCELLED/UNAVAILABLE).
  void Shutdown();

  // Requests holding the model (ModelLease) and how long since the last
  // one ended (zero while one runs; since construction before any).
  int64_t active_requests() const;
  absl::Duration idle_time() const;
  // Waits until no request holds the model or `deadline`; true when none.
  bool WaitIdle(absl::Time deadline) const;

 private:
  friend class ModelLease;
  void BeginUse();
  void EndUse();
  void SetFailed(const absl::Status& status);
  // Load's phases: the tokenizer (checked against the embedding rows),
  // then the weights and the engine (CANCELLED when `cancel` is set before
  // a phase); RecordLoaded fills info_ from them.
  absl::Status LoadTokenizer();
  absl::StatusOr<std::shared_ptr<const WeightStore>> LoadWeightsAndEngine(
      const std::atomic<bool>* cancel);
  void RecordLoaded(const WeightStore& weights, absl::Duration took);

  const ModelSpec spec_;
  const ModelConfig config_;
  const SentenceTransformersConfig st_;
  const TokenizerConfig tok_config_;
  const Workflow workflow_;
  const absl::Status open_error_;

  const std::string tokenizer_json_path_;
  std::string tokenizer_json_;  // emptied by Load
  std::shared_ptr<const ChatFormat> chat_format_;
  mutable absl::once_flag token_bytes_once_;
  mutable std::vector<std::string> token_bytes_;

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
  StepObserver* step_observer_ = nullptr;
  std::atomic<ModelState> state_{ModelState::kLoading};
  mutable absl::Mutex mu_;
  ServedModelInfo info_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex use_mu_;
  int64_t active_ ABSL_GUARDED_BY(use_mu_) = 0;
  absl::Time last_use_ ABSL_GUARDED_BY(use_mu_) = absl::Now();
};

// A request's hold on a served model: while any lease is held the model is
// not unloaded (an unload drains them, or cancels their requests after its
// grace period). Movable; Release (or the destructor) ends it. Requests
// capture it (as a shared_ptr) in their engine callback and release it with
// their last output.
class ModelLease {
 public:
  ModelLease() = default;
  explicit ModelLease(std::shared_ptr<ServedModel> model);
  ModelLease(ModelLease&& other) noexcept : model_(std::move(other.model_)) {}
  ModelLease& operator=(ModelLease&& other) noexcept;
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  ~ModelLease() { Release(); }

  ServedModel* get() const { return model_.get(); }
  ServedModel* operator->() const { return model_.get(); }
  ServedModel& operator*() const { return *model_; }
  explicit operator bool() const { return model_ != nullptr; }
  // Ends the hold (idempotent).
  void Release();

 private:
  std::shared_ptr<ServedModel> model_;
};

class ModelManager {
 public:
  struct Options {
    // Models loaded at once (0 = no cap): loading one more first unloads
    // the least recently used idle model; with none idle the load is
    // RESOURCE_EXHAUSTED.
    int max_loaded_models = 0;
    // How long an unload started by keep_alive or the cap waits for a
    // request that arrived meanwhile before cancelling it.
    absl::Duration evict_grace = absl::Seconds(30);
    // After a grace period ran out and the engine cancelled the requests
    // left, how long to wait for them to let go before the model is left
    // to be freed in the background.
    absl::Duration cancel_wait = absl::Seconds(10);
    // A model's engine step observer (may return null), applied before
    // each load.
    std::function<StepObserver*(const std::string& model)> step_observer;
    // A Hub download's progress (bytes done, total), about ten times a
    // second, on the downloading thread.
    std::function<void(const std::string& model, int64_t done, int64_t total)>
        on_download;
    // Called after each load ends (READY or FAILED), when an unload starts
    // (UNLOADING) and when it ends (UNLOADED, or gone), on the thread that
    // did it. Must not call back
    // into the manager's load/unload methods.
    std::function<void(const ServedModelInfo&)> on_change;
  };

  // Reads each local model's config files and selects its workflow. Errors
  // name the model and what to fix (INVALID_ARGUMENT / NOT_FOUND); a fault
  // in a model file's contents (IsModelFileFault) is not one: that model is
  // FAILED with it. A Hub name (runtime/loader/hf_cache.h) is opened when
  // it loads (after its download): its errors make it FAILED then.
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(
      std::vector<ModelSpec> specs, Options options);
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(
      std::vector<ModelSpec> specs) {
    return Create(std::move(specs), Options());
  }
  ~ModelManager();

  // Loads every model given to Create that is not `on_demand`, in order
  // (a Hub name is downloaded first). Blocking; call from a loader thread.
  // `on_loaded`, when set, is called after each model's load (READY or
  // FAILED), on the loading thread. After CancelLoading, the models not
  // loaded yet are marked FAILED ("the server shut down before ...")
  // without loading, and a model still loading stops at its next phase.
  // `model` is null for a model that could not be opened (a failed
  // download, a directory that is not a model).
  using OnLoaded =
      std::function<void(const ServedModelInfo& info, const ServedModel* model)>;
  void LoadAll(const OnLoaded& on_loaded = nullptr);
  // Makes a running LoadAll (and any load or download) stop early (SIGTERM
  // during startup). Thread-safe.
  void CancelLoading();
  bool loading_cancelled() const {
    return cancel_.load(std::memory_order_acquire);
  }
  // True once LoadAll finished (every startup model READY or FAILED).
  bool AllLoaded() const { return loaded_.load(std::memory_order_acquire); }

  // Loads a model while serving (LoadModel): a new name is added; a name
  // the server has that is UNLOADED or FAILED loads again (with `spec`, or
  // with its own when `spec.path` is empty); a LOADING one is waited for; a
  // READY one is ALREADY_EXISTS unless `replace`, which loads `spec` beside
  // it and swaps it in (requests already running finish on the old one,
  // which is then unloaded). With `wait`, returns when the load ended (its
  // error when it FAILED); else at once, LOADING (GetModel follows it).
  absl::StatusOr<ServedModelInfo> LoadModel(ModelSpec spec, bool replace,
                                            bool wait);
  // Unloads `name` (UnloadModel): new requests for it are UNAVAILABLE at
  // once; the running ones finish (with `grace`, those still running after
  // it are cancelled; without, they are waited for), then its engine,
  // weights and KV cache are freed. A model given at start stays listed
  // (UNLOADED; `load: on_demand` ones load again on the next request); one
  // loaded at run time is removed. FAILED_PRECONDITION while it loads.
  absl::StatusOr<ServedModelInfo> UnloadModel(
      const std::string& name, std::optional<absl::Duration> grace);

  // The model named `name`, or the only model supporting `task` when
  // `name` is empty, held for a request. NOT_FOUND (unknown name / no
  // model for the task), INVALID_ARGUMENT (empty name but several
  // candidates), FAILED_PRECONDITION (the model cannot do `task`),
  // UNAVAILABLE (loading, failed, unloaded). An on-demand model that is not
  // loaded is loaded first (the call waits for it).
  absl::StatusOr<ModelLease> Resolve(const std::string& name, Task task);
  // True when a request for `name` would wait in Resolve for an on-demand
  // model to load (it is not READY); front ends whose threads must not
  // block wait elsewhere first (RequestLayer::WhenModelReady).
  bool WouldWait(const std::string& name) const;
  // As Resolve, any task (Tokenize); an empty name is the only model.
  absl::StatusOr<ModelLease> ResolveAny(const std::string& name);
  // NOT_FOUND for an unknown name; any state.
  absl::StatusOr<ServedModelInfo> Find(const std::string& name) const;

  // Every model, in the order given (run-time loads after).
  std::vector<ServedModelInfo> List() const;
  // The opened models (built from their config; READY or not): a
  // snapshot, in order.
  std::vector<std::shared_ptr<ServedModel>> models() const;
  // The READY ones.
  std::vector<std::shared_ptr<ServedModel>> Loaded() const;
  size_t size() const;

  void Shutdown();

 private:
  struct Entry;
  explicit ModelManager(Options options) : options_(std::move(options)) {}

  ServedModelInfo InfoLocked(const Entry& e) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<Entry> FindLocked(const std::string& name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UnknownModel(const std::string& name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens and loads `spec` into `e` (LOADING until it ends). Runs on the
  // calling thread without the lock.
  // A replaced model goes to `swapped_out` (freed here when null).
  absl::Status RunLoad(const std::shared_ptr<Entry>& e, ModelSpec spec,
                       bool replace, std::shared_ptr<ServedModel> opened,
                       std::shared_ptr<ServedModel>* swapped_out = nullptr);
  // Starts RunLoad on a thread of its own, after unloading `evicted`.
  void StartLoad(const std::shared_ptr<Entry>& e, ModelSpec spec, bool replace,
                 std::shared_ptr<Entry> evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ModelLease> Acquire(const std::string& name, const Task* task);
  // Makes room under max_loaded_models for one more (not `e`): marks the
  // least recently used idle model UNLOADING and returns it (null when
  // there is room); RESOURCE_EXHAUSTED when every loaded one is busy.
  absl::StatusOr<std::shared_ptr<Entry>> EvictForLocked(const Entry* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drains and frees the model of `e` (state UNLOADING), then marks it
  // UNLOADED or removes it. Without the lock.
  void FinishUnload(const std::shared_ptr<Entry>& e,
                    std::optional<absl::Duration> grace);
  // Waits for the requests on `model` (cancelling them after `grace`) and
  // frees it; false when some are still held (it is freed by the reaper).
  bool DrainAndFree(std::shared_ptr<ServedModel> model,
                    std::optional<absl::Duration> grace);
  // keep_alive: unloads models idle for longer than theirs; frees drained
  // models. Runs until Shutdown.
  void Reaper();
  void JoinFinishedThreads() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // an entry's state changed, or shutting down
  std::vector<std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  // Unloaded models that requests still held after their cancel.
  std::vector<std::shared_ptr<ServedModel>> draining_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);
  std::thread reaper_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> loaded_{false};
  std::atomic<bool> cancel_{false};
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_MODEL_MANAGER_H_
