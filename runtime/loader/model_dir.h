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

// Opens `path` (a directory, or a .gguf file): NOT_FOUND when it is
// neither a directory nor an existing .gguf file, or when a directory lacks
// config.json; INVALID_ARGUMENT for malformed files; weight errors as
// WeightStore::OpenDirectory reports them. A directory's tokenizer.json is
// not read here (its path is set even when the file is missing: see
// CheckTokenizerFile). Errors found in a GGUF file's contents (header,
// tensor table, hyper-parameters, tokenizer metadata; not an architecture
// inferd does not serve) are marked IsModelFileFault.
absl::StatusOr<ModelDirectory> OpenModelDirectory(const std::string& path,
                                                  bool load_weights);

// True for an error of OpenModelDirectory that lies in the contents of the
// model's files (a truncated or corrupt GGUF file, one with a tensor type
// inferd cannot read) rather than in what the command line names (a path
// that is not a model, a config.json or architecture that cannot be
// served): a server lists that model as failed and serves the others.
bool IsModelFileFault(const absl::Status& status);

// OK when `tokenizer_json_path` (ModelDirectory::tokenizer_json_path) is a
// file; else NOT_FOUND naming it and saying how to write it.
absl::Status CheckTokenizerFile(const std::string& tokenizer_json_path);

// The weights of the model at `path` (safetensors of a directory, or the
// tensors of a GGUF file), memory-mapped.
absl::StatusOr<std::unique_ptr<WeightStore>> OpenModelWeights(
    const std::string& path);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_MODEL_DIR_H_
