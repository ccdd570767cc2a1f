// WeightStore: every tensor of a Hugging Face model directory, from a single
// model.safetensors or from shards listed in model.safetensors.index.json,
// memory-mapped and addressed by name. Thread-safe after OpenDirectory():
// all methods are const.
#ifndef INFERD_RUNTIME_LOADER_WEIGHTS_H_
#define INFERD_RUNTIME_LOADER_WEIGHTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
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
    "", "bert.", "roberta.", "mpnet.", "new.", "model."};

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
  // `pages_releasable`: the tensors lie in whole pages of a region of their
  // own (LoadWeightFileBytes), which ReleaseStored may give back.
  static absl::StatusOr<std::unique_ptr<WeightStore>> FromTensors(
      std::string display_name, std::vector<SafetensorsTensorInfo> tensors,
      std::shared_ptr<const void> owner, bool pages_releasable = false);

  // A stored tensor repacked by a consumer for its kernels (the int8
  // panels), kept here so the store's other consumers (a model's replicas,
  // a reload) reuse it instead of reading the stored bytes again.
  struct Packed {
    const void* data = nullptr;  // null: none
    std::shared_ptr<const void> owner;
  };
  // The copy of the tensor stored at `stored` in layout `tag`: the one
  // made before, or make()'s, made once (consumers asking at the same time
  // wait for it).
  absl::StatusOr<Packed> FindOrPack(const void* stored, uint32_t tag,
                                    const std::function<absl::StatusOr<Packed>()>& make) const;
  // Gives back to the system the memory of the stored bytes [data, data +
  // bytes) that no consumer reads any more (every reader goes through its
  // packed copy): the whole pages inside the range are dropped and made
  // inaccessible (a stray read faults rather than seeing zeros). Returns
  // the bytes released; 0 for stores whose pages cannot be released.
  size_t ReleaseStored(const void* data, size_t bytes) const;

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
  bool pages_releasable_ = false;
  mutable absl::Mutex packed_mu_;
  mutable absl::flat_hash_map<std::pair<const void*, uint32_t>, Packed> packed_
      ABSL_GUARDED_BY(packed_mu_);
  absl::flat_hash_map<std::string, const SafetensorsFile*> index_;
  uint64_t total_bytes_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_WEIGHTS_H_
