// Plain option structs describing which models to serve and how the engine
// runs them. Built by service/ from flags; read by the runtime. No logic.
#ifndef INFERD_RUNTIME_ENGINE_MODEL_OPTIONS_H_
#define INFERD_RUNTIME_ENGINE_MODEL_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace inferd {

// Engine settings; every model starts from the server-wide defaults and a
// model's own `--model NAME=PATH,key=value` options override them.
struct EngineOptions {
  int threads = 0;                 // kernel threads per replica; 0 = cores / replicas
  int replicas = 0;                // data-parallel replicas; 0 = workflow default
  // Engine threads that prepare requests (tokenization, chat templates)
  // for every workflow; -1 = auto (one per four cores, at least one);
  // 0 = on the submitting (gRPC) thread.
  int tokenization_workers = -1;
  int max_batched_tokens = 2048;   // token budget of one engine step
  // Generation: prompt tokens of one step while sequences decode (keeps
  // steps, hence the gaps between tokens, short); 0 = max_batched_tokens.
  int max_prefill_tokens_while_decoding = 64;
  // Generation: detokenize and stream on an output worker, overlapping the
  // next forward pass.
  bool overlap_output = true;
  int max_seqs = 64;               // sequences in one step
  int max_queue_requests = 1024;   // waiting requests before RESOURCE_EXHAUSTED
  int64_t max_queue_tokens = 1 << 20;  // waiting tokens before RESOURCE_EXHAUSTED
  int max_input_tokens = 0;        // 0 = the model's own limit
  // KV cache size: a fraction (0, 1] of free device memory, or bytes.
  double kv_cache_fraction = 0.25;
  int64_t kv_cache_bytes = 0;      // > 0 overrides the fraction
  int block_size = 16;             // tokens per KV cache block
  // Compute dtype: auto | float32 | bfloat16 | q8_0 | q4_0 | q4_1 | int8.
  // auto (the default): bfloat16 for encoders (prefill-only, bidirectional
  // workflows) on devices with fast BF16 products (AVX512_BF16), float32
  // otherwise; resolved when the model opens (ServedModel), so ListModels
  // shows what runs.
  std::string dtype = "auto";
  // Activations of block-quantized Linear weights (GGUF Q4_0 ... Q6_K,
  // dtype=q8_0 / q4_0 / q4_1): exact (F32) | int8 (per block, as llama.cpp;
  // device/ops.h ActivationPrecision). int8 is the default: on AVX512-VNNI
  // CPUs the weights are repacked at load so every batch size runs the same
  // kernel, and a sequence's output does not depend on how its tokens are
  // split into steps (docs/precision.md).
  std::string activations = "int8";
  bool enable_prefix_caching = true;
  // Generation: prompt-lookup draft tokens per decoding step for requests
  // that do not set GenerateRequest.speculative; 0 = off.
  int speculative_draft_tokens = 0;
};

// Request-independent overrides of the workflow a model gets.
struct ModelOverrides {
  std::optional<std::string> task;      // generate | embed | rerank | classify
  std::optional<std::string> pooling;   // cls | mean | last
  std::optional<bool> bidirectional;    // decoder embedders: no causal mask
  // Generation: the registered sampler to run instead of the workflow's
  // (a plug-in's, PluginRegistrar::AddSampler).
  std::optional<std::string> sampler;
  // Chat: the tool-call format (runtime/chat/tool_parser.h: hermes,
  // llama3_json, mistral, pythonic, generic) and reasoning format (think, none) of
  // the model's output, instead of what its chat template suggests.
  std::optional<std::string> tool_parser;
  std::optional<std::string> reasoning_parser;
  // Decoder rerankers (task=rerank on a causal LM): the registered
  // rerank_format its prompt and score tokens come from (default qwen3).
  std::optional<std::string> rerank_format;
};

struct ModelSpec {
  std::string name;
  // A local directory or .gguf file, or a Hugging Face Hub name
  // (runtime/loader/hf_cache.h) fetched into the HF cache.
  std::string path;
  // Loaded by the first request that names it instead of at start.
  bool on_demand = false;
  // Unloaded after this long without requests; 0 = kept loaded.
  double keep_alive_seconds = 0;
  ModelOverrides overrides;
  EngineOptions engine;  // filled from the server defaults plus overrides
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_MODEL_OPTIONS_H_
