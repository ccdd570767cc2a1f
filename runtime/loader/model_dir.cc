#include "runtime/loader/model_dir.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/gguf.h"
#include "runtime/loader/gguf_model.h"
#include "runtime/loader/gguf_tokenizer.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

// The payload that marks IsModelFileFault errors.
constexpr char kFileFaultUrl[] = "type.inferd.dev/model-file-fault";

absl::Status FileFault(absl::Status status) {
  status.SetPayload(kFileFaultUrl, absl::Cord("1"));
  return status;
}

absl::StatusOr<ModelDirectory> OpenGgufModel(const std::string& path,
                                             bool load_weights) {
  // A path that names no file is the command line's error; what the file
  // holds is the model's.
  if (!loader_internal::IsRegularFile(path)) {
    return absl::NotFoundError(absl::StrCat(
        "GGUF file ", path, " does not exist (or is not a regular file)"));
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> owned = GgufFile::Open(path);
  if (!owned.ok()) return FileFault(owned.status());
  std::shared_ptr<const GgufFile> file = *std::move(owned);
  ModelDirectory dir;
  dir.path = path;
  dir.gguf = true;
  absl::StatusOr<ModelConfig> config = GgufModelConfig(*file);
  if (!config.ok()) {
    // An architecture inferd does not serve is a startup error, as in a
    // config.json; missing or malformed hyper-parameters are the file's.
    const GgufValue* arch = file->Find("general.architecture");
    if (arch != nullptr && arch->type == GgufValueType::kString) {
      const std::vector<std::string> known = SupportedGgufArchitectures();
      if (std::find(known.begin(), known.end(), arch->s) == known.end()) {
        return config.status();
      }
    }
    return FileFault(config.status());
  }
  dir.config = *std::move(config);
  absl::StatusOr<GgufTokenizer> loaded = LoadGgufTokenizer(*file);
  if (!loaded.ok()) return FileFault(loaded.status());
  GgufTokenizer tok = *std::move(loaded);
  dir.tokenizer_json = std::move(tok.tokenizer_json);
  dir.tokenizer_config = std::move(tok.tokenizer_config);
  for (int64_t id : tok.eos_token_ids) {
    if (std::find(dir.config.eos_token_ids.begin(),
                  dir.config.eos_token_ids.end(),
                  id) == dir.config.eos_token_ids.end()) {
      dir.config.eos_token_ids.push_back(id);
    }
  }
  // Encoders: llama.cpp's pooling type (0 none, 1 mean, 2 cls, 3 last);
  // embeddings normalized, as llama.cpp's server returns them.
  if (dir.config.IsEncoder()) {
    // Under the file's architecture ("nomic-bert.pooling_type"), which
    // need not be the model_type ("jina-bert-v2" is read as bert).
    ASSIGN_OR_RETURN(const std::string arch,
                     file->GetString("general.architecture"));
    const std::string key = absl::StrCat(arch, ".pooling_type");
    if (file->Find(key) != nullptr) {
      ASSIGN_OR_RETURN(int64_t type, file->GetInt(key));
      dir.st.present = true;
      dir.st.has_normalize = true;
      dir.st.has_pooling = type >= 1 && type <= 3;
      if (type == 1) dir.st.pooling = PoolingMode::kMean;
      if (type == 2) dir.st.pooling = PoolingMode::kCls;
      if (type == 3) dir.st.pooling = PoolingMode::kLastToken;
    }
  }
  if (load_weights) {
    ASSIGN_OR_RETURN(dir.weights, GgufWeights(file));
  }
  return dir;
}

}  // namespace

absl::StatusOr<ModelDirectory> OpenModelDirectory(const std::string& path,
                                                  bool load_weights) {
  using loader_internal::IsRegularFile;
  using loader_internal::JoinPath;
  if (IsGgufPath(path)) return OpenGgufModel(path, load_weights);
  if (!loader_internal::IsDirectory(path)) {
    return absl::NotFoundError(absl::StrCat(
        "model path ", path,
        " is not a directory (nor a .gguf file): give a Hugging Face model "
        "directory or a GGUF file"));
  }
  if (!IsRegularFile(JoinPath(path, "config.json"))) {
    return absl::NotFoundError(absl::StrCat(
        "model directory ", path,
        " has no config.json (expected a Hugging Face model directory)"));
  }
  ModelDirectory dir;
  dir.path = path;
  ASSIGN_OR_RETURN(dir.config, LoadModelConfig(path));
  // Checked (CheckTokenizerFile) and read when the model loads: a missing
  // tokenizer fails this model, not the server.
  dir.tokenizer_json_path = JoinPath(path, "tokenizer.json");
  ASSIGN_OR_RETURN(dir.tokenizer_config, LoadTokenizerConfig(path));
  ASSIGN_OR_RETURN(dir.st, LoadSentenceTransformersConfig(path));
  if (load_weights) {
    ASSIGN_OR_RETURN(dir.weights, WeightStore::OpenDirectory(path));
  }
  return dir;
}

bool IsModelFileFault(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kFileFaultUrl).has_value();
}

absl::Status CheckTokenizerFile(const std::string& tokenizer_json_path) {
  if (loader_internal::IsRegularFile(tokenizer_json_path)) {
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat(
      tokenizer_json_path,
      " does not exist: inferd needs the model's fast-tokenizer file (save "
      "it with transformers: AutoTokenizer.from_pretrained(dir)"
      ".save_pretrained(dir))"));
}

absl::StatusOr<std::unique_ptr<WeightStore>> OpenModelWeights(
    const std::string& path) {
  if (IsGgufPath(path)) {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> owned, GgufFile::Open(path));
    return GgufWeights(std::shared_ptr<const GgufFile>(std::move(owned)));
  }
  return WeightStore::OpenDirectory(path);
}

}  // namespace inferd
