// ModelDirectory: everything inferd reads from a Hugging Face model
// directory, bundled: config.json, tokenizer files, sentence-transformers
// configs and (optionally) the memory-mapped weights. A single GGUF file
// gives the same bundle (runtime/loader/gguf_model.h). Move-only value;
// thread-compatible (the WeightStore inside is thread-safe).
#ifndef INFERD_RUNTIME_LOADER_MODEL_DIR_H_
#define INFERD_RUNTIME_LOADER_MODEL_DIR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/st_config.h"
#include "runtime/loader/tokenizer_config.h"
#include "runtime/loader/weights.h"

namespace inferd {

struct ModelDirectory {
  std::string path;
  ModelConfig config;
  TokenizerConfig tokenizer_config;    // present=false without the file
  SentenceTransformersConfig st;       // present=false without modules.json
  // An existing tokenizer.json file, or empty when tokenizer_json holds
  // the tokenizer (GGUF: built from the file's metadata).
  std::string tokenizer_json_path;
  std::string tokenizer_json;
  bool gguf = false;
  // Null unless opened with load_weights=true. Owned here.
  std::unique_ptr<WeightStore> weights;
};

// Opens `path` (a directory, or a .gguf file): NOT_FOUND when it is not a directory or lacks config.json or
// tokenizer.json; INVALID_ARGUMENT for malformed files; weight errors as
// WeightStore::OpenDirectory reports them.
absl::StatusOr<ModelDirectory> OpenModelDirectory(const std::string& path,
                                                  bool load_weights);

// The weights of the model at `path` (safetensors of a directory, or the
// tensors of a GGUF file), memory-mapped.
absl::StatusOr<std::unique_ptr<WeightStore>> OpenModelWeights(
    const std::string& path);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_MODEL_DIR_H_
