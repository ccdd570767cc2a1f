#include "runtime/loader/model_dir.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/json_util.h"

namespace inferd {

absl::StatusOr<ModelDirectory> OpenModelDirectory(const std::string& path,
                                                  bool load_weights) {
  using loader_internal::IsRegularFile;
  using loader_internal::JoinPath;
  if (!loader_internal::IsDirectory(path)) {
    return absl::NotFoundError(
        absl::StrCat("model path ", path, " is not a directory"));
  }
  if (!IsRegularFile(JoinPath(path, "config.json"))) {
    return absl::NotFoundError(absl::StrCat(
        "model directory ", path,
        " has no config.json (expected a Hugging Face model directory)"));
  }
  ModelDirectory dir;
  dir.path = path;
  ASSIGN_OR_RETURN(dir.config, LoadModelConfig(path));
  dir.tokenizer_json_path = JoinPath(path, "tokenizer.json");
  if (!IsRegularFile(dir.tokenizer_json_path)) {
    return absl::NotFoundError(absl::StrCat(
        "model directory ", path,
        " has no tokenizer.json; inferd needs the fast-tokenizer file (save "
        "it with transformers: AutoTokenizer.from_pretrained(dir)"
        ".save_pretrained(dir))"));
  }
  ASSIGN_OR_RETURN(dir.tokenizer_config, LoadTokenizerConfig(path));
  ASSIGN_OR_RETURN(dir.st, LoadSentenceTransformersConfig(path));
  if (load_weights) {
    ASSIGN_OR_RETURN(dir.weights, WeightStore::OpenDirectory(path));
  }
  return dir;
}

}  // namespace inferd
