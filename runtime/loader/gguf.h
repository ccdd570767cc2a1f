// GgufFile: a read-only, memory-mapped GGUF file (the llama.cpp model
// format), fully validated before any of it is trusted: header, metadata
// key/values, tensor descriptions, alignment, and every tensor's byte range
// inside the file. Thread-safe after Open(): all methods are const.
//
// Format (little-endian), versions 2 and 3:
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 value_type, value),
//   tensor_count x (string name, u32 n_dims, u64 dims[n_dims] (dims[0] is
//     the innermost: the row length), u32 ggml_type, u64 offset),
//   padding to general.alignment (default 32), then the data area; each
//   offset is relative to it and a multiple of the alignment.
// A string is a u64 length and that many bytes (not NUL-terminated); an
// array is a u32 element type, a u64 count and the elements.
#ifndef INFERD_RUNTIME_LOADER_GGUF_H_
#define INFERD_RUNTIME_LOADER_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", "string", "array", ...
absl::string_view GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars keep their type; integers are also readable
// as int64 / uint64, floats as double. Arrays hold their elements (arrays
// of arrays are allowed by the format and kept).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;   // unsigned integers and bool
  int64_t i = 0;    // signed integers
  double f = 0;     // floats
  std::string s;    // strings
  GgufValueType element_type = GgufValueType::kUint8;  // arrays
  std::vector<GgufValue> elements;                     // arrays

  bool is_integer() const;
  // Integer value as int64 (unsigned values above INT64_MAX fail).
  absl::StatusOr<int64_t> AsInt() const;
  absl::StatusOr<double> AsDouble() const;  // integers and floats
};

// ggml tensor types with their block layout. Types inferd has no layout for
// make Open() fail naming the type id.
struct GgmlTypeInfo {
  uint32_t id = 0;
  const char* name = "";  // "F32", "Q4_K", ...
  int64_t block_elements = 1;
  int64_t block_bytes = 4;
};
// Null for an unknown type id.
const GgmlTypeInfo* FindGgmlType(uint32_t id);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the row length
  const GgmlTypeInfo* type = nullptr;
  uint64_t offset = 0;  // relative to the data area
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping

  int64_t numel() const;
};

class GgufFile {
 public:
  // Maps `path` read-only and validates it. INVALID_ARGUMENT naming the
  // file (and the key or tensor at fault) for malformed content, NOT_FOUND
  // when the file does not exist.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory copy of `bytes` (tests and fuzzers).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(
      absl::string_view bytes, absl::string_view display_name = "<buffer>");

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  // Whether the bytes are a region of their own (LoadWeightFileBytes), not
  // a copy of a buffer.
  bool mapped() const { return mapping_ != nullptr; }

  // Metadata, by key.
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const GgufValue* Find(absl::string_view key) const;
  // Typed lookups: NOT_FOUND when absent, INVALID_ARGUMENT naming the key
  // when the value has another type.
  absl::StatusOr<std::string> GetString(absl::string_view key) const;
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  absl::StatusOr<double> GetDouble(absl::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(absl::string_view name) const;
  // Bytes of all tensor data.
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  GgufFile() = default;
  absl::Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;
  std::string owned_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
  uint64_t data_bytes_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_GGUF_H_
