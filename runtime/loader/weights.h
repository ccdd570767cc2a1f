// WeightStore: every tensor of a Hugging Face model directory, from a single
// model.safetensors or from shards listed in model.safetensors.index.json,
// memory-mapped and addressed by name. Thread-safe after OpenDirectory():
// all methods are const.
#ifndef INFERD_RUNTIME_LOADER_WEIGHTS_H_
#define INFERD_RUNTIME_LOADER_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "device/tensor.h"
#include "runtime/loader/safetensors.h"

namespace inferd {

// Prefixes under which Hugging Face checkpoints commonly store the base
// model's tensors ("bert.embeddings..." in BertForSequenceClassification,
// "model.layers..." in LlamaForCausalLM).
inline constexpr absl::string_view kCommonWeightPrefixes[] = {
    "", "bert.", "roberta.", "model."};

class WeightStore {
 public:
  // Opens `dir`/model.safetensors, or the shards named by
  // `dir`/model.safetensors.index.json. FAILED_PRECONDITION when only a
  // PyTorch pickle (pytorch_model.bin) is present; NOT_FOUND when there are
  // no weights at all; INVALID_ARGUMENT for malformed files.
  static absl::StatusOr<std::unique_ptr<WeightStore>> OpenDirectory(
      const std::string& dir);

  // Zero-copy, read-only view; lives as long as this store. NOT_FOUND names
  // the tensor and the directory.
  absl::StatusOr<TensorView> Get(absl::string_view name) const;
  bool Has(absl::string_view name) const;
  // Header information (dtype name, alignment, ...); null when absent.
  const SafetensorsTensorInfo* Info(absl::string_view name) const;

  // The first `prefix + name` that exists, in the order given; NOT_FOUND
  // listing every candidate tried.
  absl::StatusOr<std::string> FindWithPrefixes(
      absl::string_view name,
      absl::Span<const absl::string_view> prefixes =
          kCommonWeightPrefixes) const;

  // A store over tensors that live elsewhere (a GGUF file's mapping):
  // each info needs name, dtype, shape, data, byte range and alignment.
  // `owner` keeps their memory alive as long as the store. `display_name`
  // stands for the directory in messages. INVALID_ARGUMENT for a duplicate
  // name or an info without a dtype.
  static absl::StatusOr<std::unique_ptr<WeightStore>> FromTensors(
      std::string display_name, std::vector<SafetensorsTensorInfo> tensors,
      std::shared_ptr<const void> owner);

  // True for a store made by FromTensors (GGUF): its tensors are computed
  // with in the dtype stored (F16 and quantized weights stay as they are).
  bool prefers_stored_dtypes() const { return !external_.empty(); }

  // Sorted tensor names.
  std::vector<std::string> Names() const;
  size_t tensor_count() const { return index_.size() + external_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  const std::string& directory() const { return dir_; }
  // Paths of the mapped files, in load order.
  std::vector<std::string> files() const;

 private:
  WeightStore() = default;
  absl::Status AddFile(std::unique_ptr<SafetensorsFile> file);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  // FromTensors: the tensors by name, and what keeps them alive.
  absl::flat_hash_map<std::string, SafetensorsTensorInfo> external_;
  std::shared_ptr<const void> owner_;
  absl::flat_hash_map<std::string, const SafetensorsFile*> index_;
  uint64_t total_bytes_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_WEIGHTS_H_
