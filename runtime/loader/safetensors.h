// SafetensorsFile: a read-only, memory-mapped safetensors file whose header
// has been validated before any of it is trusted. Thread-safe after Open():
// all methods are const and the mapping is immutable.
//
// Format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//  "__metadata__": {..}}, then the data area; offsets are relative to it.
#ifndef INFERD_RUNTIME_LOADER_SAFETENSORS_H_
#define INFERD_RUNTIME_LOADER_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "device/tensor.h"

namespace inferd {

// How weight files (safetensors and GGUF) are brought into memory.
//   kCopy (the default): the file is read into private anonymous memory at
//     load. A file truncated or rewritten on disk while the server runs
//     cannot take the memory away (with a mapping, the next touch of a page
//     past the new end raises SIGBUS and kills the process). Costs one read
//     of the file at load (about what the page faults of the first forward
//     pass cost a mapping anyway) and the pages are not shared with the
//     page cache.
//   kMap: the file is memory-mapped read-only (MAP_PRIVATE); pages are
//     shared with the page cache and other processes, and the file must not
//     be truncated while it is loaded.
// Process-wide; set it before models load (inferd's --mmap-weights).
enum class WeightFileMode { kCopy, kMap };
void SetWeightFileMode(WeightFileMode mode);
WeightFileMode GetWeightFileMode();

// The `size` bytes of the open file `fd` per GetWeightFileMode(), as a
// region to munmap(region, size) when done. `what` names the file in errors
// ("safetensors file /m/model.safetensors"). INVALID_ARGUMENT when it cannot
// be mapped or read in full.
absl::StatusOr<void*> LoadWeightFileBytes(int fd, size_t size,
                                          absl::string_view what);

// One tensor as described by the header. `dtype` is empty (nullopt) for
// dtypes that the file format knows but inferd has no DType for (F64, U16,
// F8_E4M3, ...): such files open, but Get() on that tensor fails.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;  // as written in the file: "F32", "BF16", ...
  absl::optional<DType> dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the data area
  uint64_t end = 0;
  // Largest power of two (capped at 64) dividing the data address. The
  // format only guarantees what the writer chose (often 2 for BF16 files);
  // kernels that need wider alignment must copy.
  size_t alignment = 0;
  const uint8_t* data = nullptr;  // points into the mapping

  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Loads `path` (copied or mapped: WeightFileMode) and validates its header. Errors name the file
  // and, where one is at fault, the tensor: INVALID_ARGUMENT for malformed
  // content, NOT_FOUND when the file does not exist.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);

  // Parses an in-memory copy of `bytes` (used by tests and fuzzers).
  // `display_name` stands in for the path in error messages.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromBuffer(
      absl::string_view bytes, absl::string_view display_name = "<buffer>");

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // A zero-copy view into the mapping; the memory is read-only and lives as
  // long as this object. INVALID_ARGUMENT when the tensor's dtype or rank
  // cannot be expressed as a TensorView, NOT_FOUND when absent.
  absl::StatusOr<TensorView> Get(absl::string_view name) const;

  // Null when absent. The pointer lives as long as this object.
  const SafetensorsTensorInfo* Find(absl::string_view name) const;
  bool Has(absl::string_view name) const { return Find(name) != nullptr; }

  // Tensor names in data-offset order.
  std::vector<std::string> Names() const;
  const std::vector<SafetensorsTensorInfo>& tensors() const {
    return tensors_;
  }
  size_t tensor_count() const { return tensors_.size(); }
  // Sum of all tensors' byte sizes.
  uint64_t data_bytes() const { return data_bytes_; }
  const std::string& path() const { return path_; }
  // "__metadata__" entries (non-string values are kept as their JSON text).
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }

  // Maps a safetensors dtype string to a DType ("BOOL" reads as kU8).
  // nullopt for dtypes without a DType; sets *known=false when the string is
  // not a safetensors dtype at all.
  static absl::optional<DType> ParseDType(absl::string_view name, bool* known,
                                          size_t* element_size);

 private:
  SafetensorsFile() = default;
  absl::Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;  // start of the file bytes
  size_t size_ = 0;
  void* mapping_ = nullptr;        // mmap'ed region, or null
  std::string owned_;              // FromBuffer storage
  std::vector<SafetensorsTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_bytes_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_SAFETENSORS_H_
