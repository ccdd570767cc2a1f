// ModelManager: the models one inferd process serves. Create() checks every
// model directory's config.json and picks its workflow (a path that is not a
// model, or a config no workflow serves, is a startup error; a GGUF file
// whose contents cannot be read makes its model FAILED); LoadAll() then
// loads tokenizer, weights and engine of each model, marking it READY or
// FAILED (others keep serving).
// Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_MODEL_MANAGER_H_
#define INFERD_RUNTIME_ENGINE_MODEL_MANAGER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
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

 private:
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
};

class ModelManager {
 public:
  // Reads each spec's config files and selects its workflow. Errors name
  // the model and what to fix (INVALID_ARGUMENT / NOT_FOUND); a fault in a
  // model file's contents (IsModelFileFault) is not one: that model is
  // FAILED with it.
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(
      std::vector<ModelSpec> specs);
  ~ModelManager();

  // Loads every model, in order. Blocking; call from a loader thread.
  // `on_loaded`, when set, is called after each model's load (READY or
  // FAILED), on the loading thread. After CancelLoading, the models not
  // loaded yet are marked FAILED ("the server shut down before ...")
  // without loading, and a model still loading stops at its next phase.
  void LoadAll(
      const std::function<void(const ServedModel&)>& on_loaded = nullptr);
  // Makes a running LoadAll stop early (SIGTERM during startup). Thread-safe.
  void CancelLoading() { cancel_.store(true, std::memory_order_release); }
  bool loading_cancelled() const {
    return cancel_.load(std::memory_order_acquire);
  }
  // True once every model finished loading (READY or FAILED).
  bool AllLoaded() const { return loaded_.load(std::memory_order_acquire); }

  // The model named `name`, or the only model supporting `task` when
  // `name` is empty. NOT_FOUND (unknown name / no model for the task),
  // INVALID_ARGUMENT (empty name but several candidates),
  // FAILED_PRECONDITION (the model cannot do `task`), UNAVAILABLE (loading
  // or failed).
  absl::StatusOr<ServedModel*> Resolve(const std::string& name,
                                       Task task) const;
  // NOT_FOUND for an unknown name; any state.
  absl::StatusOr<const ServedModel*> Find(const std::string& name) const;

  std::vector<ServedModelInfo> List() const;
  const std::vector<std::unique_ptr<ServedModel>>& models() const {
    return models_;
  }

  void Shutdown();

 private:
  ModelManager() = default;
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::atomic<bool> loaded_{false};
  std::atomic<bool> cancel_{false};
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_MODEL_MANAGER_H_
