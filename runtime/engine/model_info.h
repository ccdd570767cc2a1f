// ServedModelInfo: what the server reports about one model (GetModel/ListModels).
// Plain value type.
#ifndef INFERD_RUNTIME_ENGINE_MODEL_INFO_H_
#define INFERD_RUNTIME_ENGINE_MODEL_INFO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/engine/workflow.h"

namespace inferd {

// kLoading covers a Hub download (download_bytes_*), opening the files and
// building the engine; kUnloaded: listed (a config-file model with
// `load: on_demand`, or one unloaded at run time) without memory;
// kUnloading: draining its requests before its memory is returned.
enum class ModelState { kLoading, kReady, kFailed, kUnloaded, kUnloading };

// "loading", "ready", "failed", "unloaded", "unloading".
const char* ModelStateName(ModelState s);

struct ServedModelInfo {
  std::string name;
  std::string path;
  std::string architecture;
  std::string workflow;
  std::vector<Task> tasks;
  int64_t max_input_tokens = 0;
  int64_t hidden_size = 0;
  int64_t embedding_dims = 0;
  int64_t vocab_size = 0;
  std::string dtype;
  // EngineOptions::activations: int8 | exact.
  std::string activations;
  std::string pooling;
  // The workflow's components as running for this model, by kind
  // (input_processor, scheduler, attention_backend, output_processor,
  // executor).
  std::map<std::string, std::string> components;
  ModelState state = ModelState::kLoading;
  std::string error;
  // What the model was given as (--model NAME=SOURCE): a local path, or a
  // Hugging Face Hub name (org/repo[:QUANT][@REVISION]) whose local copy is
  // `path` once resolved.
  std::string source;
  // A Hub download in progress (or done): bytes fetched and to fetch.
  int64_t download_bytes_done = 0;
  int64_t download_bytes_total = 0;
  // `load: on_demand` (loaded by the first request naming it) and
  // `keep_alive` (unloaded after that long idle; 0 = never).
  bool on_demand = false;
  double keep_alive_seconds = 0;
  // Requests holding the model now, and seconds since the last one ended
  // (or since it loaded).
  int64_t active_requests = 0;
  double idle_seconds = 0;
  // Loads (at start and at run time) of this name since the server started.
  int64_t loads = 0;
  // Added by LoadModel while serving (not given at start): its failure does
  // not make the server unready.
  bool added_while_serving = false;
  // Filled by a successful load: weight tensors and their bytes on disk
  // (memory-mapped), and the load's wall time (tokenizer, weights, engine).
  int64_t weight_tensors = 0;
  int64_t weight_bytes = 0;
  double load_seconds = 0;
  // Generation: the KV cache (bytes reserved, committed as blocks are first
  // used; the tokens it holds) and how its size was chosen, one line.
  int64_t kv_cache_bytes = 0;
  int64_t kv_cache_tokens = 0;
  std::string kv_cache_note;
  std::vector<std::string> labels;
  std::vector<std::string> prompt_names;
  // Embedders: the outputs an Embed request may ask for ("dense", plus
  // "sparse" / "multi_vector" when the model directory has the BGE-M3
  // heads sparse_linear / colbert_linear).
  std::vector<std::string> embed_outputs;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_MODEL_INFO_H_
