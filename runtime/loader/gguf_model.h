// GGUF models: what inferd needs from a single GGUF file (the llama.cpp
// format) to serve it like a Hugging Face directory: a ModelConfig built
// from the `<arch>.*` metadata, the tensors under their Hugging Face names
// (quantized ones stay quantized, zero-copy in the mapping), and the
// tokenizer and chat template from `tokenizer.*`.
// Architectures: llama (also Mistral-style files), qwen2, qwen3, bert.
// llama.cpp stores the q/k projections of `llama` files with the rows of
// each head interleaved (its rotary layout); the config then says
// rope_interleaved and the model rotates pairs (2i, 2i+1), which is the same
// computation without permuting any weight.
// Pure functions; the returned objects are thread-safe after creation.
#ifndef INFERD_RUNTIME_LOADER_GGUF_MODEL_H_
#define INFERD_RUNTIME_LOADER_GGUF_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/loader/gguf.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"

namespace inferd {

// True for a path that names a regular file ending in ".gguf".
bool IsGgufPath(const std::string& path);

// general.architecture values inferd serves from GGUF.
std::vector<std::string> SupportedGgufArchitectures();

// The config.json-equivalent of `file`. INVALID_ARGUMENT naming the key for
// missing or malformed hyper-parameters, and naming the architecture (with
// the supported list) for any other general.architecture.
absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& file);

// Every tensor of `file` under its Hugging Face name, memory-mapped in
// place. INVALID_ARGUMENT naming the tensor for a tensor inferd cannot
// place or a type it cannot compute with (with the supported types).
absl::StatusOr<std::unique_ptr<WeightStore>> GgufWeights(
    std::shared_ptr<const GgufFile> file);

// The Hugging Face name of a GGUF tensor name for `arch` ("" when the
// tensor has no counterpart inferd uses, e.g. rope_freqs).
std::string GgufTensorHfName(absl::string_view arch, absl::string_view name);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_GGUF_MODEL_H_
