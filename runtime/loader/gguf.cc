#include "runtime/loader/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/safetensors.h"

namespace inferd {
namespace {

// Block layouts of the ggml types (ggml.h / ggml-common.h).
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},    {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292}, {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110}, {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},      {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},      {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},
};

constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 4;      // arrays of arrays of ...
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

// Bounds-checked little-endian reader over the file bytes.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": ", what, " (at byte ", pos_, ")"));
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    if (remaining() < sizeof(T)) {
      return Error(absl::StrCat("truncated: ", what, " runs past the end of "
                                "the file"));
    }
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view what) {
    ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what));
    if (len > remaining() || len > kMaxStringBytes) {
      return Error(absl::StrCat("truncated: ", what, " claims ", len,
                                " bytes, more than the file holds"));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_),
                  static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
};

// Smallest encoding of one value of `type` (bounds array counts early).
uint64_t MinBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kString:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

bool ValidType(uint32_t t) { return t <= 12; }

absl::StatusOr<GgufValue> ReadValue(Reader& r, GgufValueType type,
                                    const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  const std::string what = absl::StrCat("the value of '", key, "'");
  switch (type) {
    case GgufValueType::kUint8: {
      ASSIGN_OR_RETURN(uint8_t x, r.Read<uint8_t>(what));
      v.u = x;
      break;
    }
    case GgufValueType::kInt8: {
      ASSIGN_OR_RETURN(int8_t x, r.Read<int8_t>(what));
      v.i = x;
      break;
    }
    case GgufValueType::kUint16: {
      ASSIGN_OR_RETURN(uint16_t x, r.Read<uint16_t>(what));
      v.u = x;
      break;
    }
    case GgufValueType::kInt16: {
      ASSIGN_OR_RETURN(int16_t x, r.Read<int16_t>(what));
      v.i = x;
      break;
    }
    case GgufValueType::kUint32: {
      ASSIGN_OR_RETURN(uint32_t x, r.Read<uint32_t>(what));
      v.u = x;
      break;
    }
    case GgufValueType::kInt32: {
      ASSIGN_OR_RETURN(int32_t x, r.Read<int32_t>(what));
      v.i = x;
      break;
    }
    case GgufValueType::kUint64: {
      ASSIGN_OR_RETURN(v.u, r.Read<uint64_t>(what));
      break;
    }
    case GgufValueType::kInt64: {
      ASSIGN_OR_RETURN(v.i, r.Read<int64_t>(what));
      break;
    }
    case GgufValueType::kFloat32: {
      ASSIGN_OR_RETURN(float x, r.Read<float>(what));
      v.f = x;
      break;
    }
    case GgufValueType::kFloat64: {
      ASSIGN_OR_RETURN(v.f, r.Read<double>(what));
      break;
    }
    case GgufValueType::kBool: {
      ASSIGN_OR_RETURN(uint8_t x, r.Read<uint8_t>(what));
      if (x > 1) return r.Error(absl::StrCat(what, ": bool is not 0 or 1"));
      v.u = x;
      break;
    }
    case GgufValueType::kString: {
      ASSIGN_OR_RETURN(v.s, r.ReadString(what));
      break;
    }
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayNesting) {
        return r.Error(absl::StrCat(what, ": arrays nested deeper than ",
                                    kMaxArrayNesting));
      }
      ASSIGN_OR_RETURN(uint32_t et, r.Read<uint32_t>(what));
      if (!ValidType(et)) {
        return r.Error(absl::StrCat(what, ": unknown array element type ", et));
      }
      v.element_type = static_cast<GgufValueType>(et);
      ASSIGN_OR_RETURN(uint64_t n, r.Read<uint64_t>(what));
      if (n > r.remaining() / MinBytes(v.element_type)) {
        return r.Error(absl::StrCat("truncated: ", what, " claims ", n,
                                    " elements, more than the file holds"));
      }
      v.elements.reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) {
        ASSIGN_OR_RETURN(GgufValue e,
                         ReadValue(r, v.element_type, key, depth + 1));
        v.elements.push_back(std::move(e));
      }
      break;
    }
  }
  return v;
}

}  // namespace

absl::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<int64_t> GgufValue::AsInt() const {
  switch (type) {
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return i;
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::OutOfRangeError("integer value above INT64_MAX");
      }
      return static_cast<int64_t>(u);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "expected an integer, found ", GgufValueTypeName(type)));
  }
}

absl::StatusOr<double> GgufValue::AsDouble() const {
  if (type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64) {
    return f;
  }
  ASSIGN_OR_RETURN(int64_t v, AsInt());
  return static_cast<double>(v);
}

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("GGUF file ", path,
                                              " does not exist"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open GGUF file ", path, ": ", std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a regular file"));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    absl::StatusOr<void*> mapping =
        LoadWeightFileBytes(fd, f->size_, absl::StrCat("GGUF file ", path));
    if (!mapping.ok()) {
      ::close(fd);
      return mapping.status();
    }
    f->mapping_ = *mapping;
    f->base_ = static_cast<const uint8_t*>(*mapping);
  }
  ::close(fd);
  RETURN_IF_ERROR(f->Parse());
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(
    absl::string_view bytes, absl::string_view display_name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::string(display_name);
  f->owned_ = std::string(bytes);
  f->base_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  f->size_ = f->owned_.size();
  RETURN_IF_ERROR(f->Parse());
  return f;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

absl::Status GgufFile::Parse() {
  Reader r(base_, size_, path_);
  ASSIGN_OR_RETURN(uint32_t magic, r.Read<uint32_t>("the magic"));
  if (magic != 0x46554747u) {  // "GGUF"
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": not a GGUF file (no GGUF magic)"));
  }
  ASSIGN_OR_RETURN(version_, r.Read<uint32_t>("the version"));
  if (version_ != 2 && version_ != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": GGUF version ", version_,
        " is not supported (2 and 3 are; convert the file with a current "
        "llama.cpp)"));
  }
  ASSIGN_OR_RETURN(uint64_t n_tensors, r.Read<uint64_t>("the tensor count"));
  ASSIGN_OR_RETURN(uint64_t n_kv, r.Read<uint64_t>("the metadata count"));
  // Each key/value takes at least 8 + 4 + 1 bytes, each tensor 8 + 4 + 8 +
  // 4 + 8.
  if (n_kv > r.remaining() / 13 || n_tensors > r.remaining() / 32) {
    return r.Error(absl::StrCat("truncated: ", n_kv, " metadata entries and ",
                                n_tensors,
                                " tensors cannot fit in the file"));
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    ASSIGN_OR_RETURN(std::string key,
                     r.ReadString(absl::StrCat("metadata key ", k)));
    ASSIGN_OR_RETURN(uint32_t type,
                     r.Read<uint32_t>(absl::StrCat("the type of '", key, "'")));
    if (!ValidType(type)) {
      return r.Error(
          absl::StrCat("metadata '", key, "' has unknown value type ", type));
    }
    ASSIGN_OR_RETURN(GgufValue value,
                     ReadValue(r, static_cast<GgufValueType>(type), key, 0));
    if (!kv_.emplace(key, std::move(value)).second) {
      return r.Error(absl::StrCat("metadata key '", key, "' appears twice"));
    }
  }
  if (const GgufValue* a = Find("general.alignment")) {
    if (a->type != GgufValueType::kUint32 || a->u == 0 ||
        (a->u & (a->u - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": general.alignment must be a power-of-two uint32"));
    }
    alignment_ = a->u;
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensorInfo info;
    ASSIGN_OR_RETURN(info.name, r.ReadString(absl::StrCat("tensor name ", t)));
    const std::string what = absl::StrCat("tensor '", info.name, "'");
    ASSIGN_OR_RETURN(uint32_t n_dims, r.Read<uint32_t>(what));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return r.Error(absl::StrCat(what, " has ", n_dims,
                                  " dimensions (1 to 4 allowed)"));
    }
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ASSIGN_OR_RETURN(uint64_t dim, r.Read<uint64_t>(what));
      if (dim == 0 || dim > (uint64_t{1} << 40) ||
          numel > (uint64_t{1} << 50) / dim) {
        return r.Error(absl::StrCat(what, " has an impossible shape (",
                                    "dimension ", d, " = ", dim, ")"));
      }
      numel *= dim;
      info.dims.push_back(static_cast<int64_t>(dim));
    }
    ASSIGN_OR_RETURN(uint32_t type_id, r.Read<uint32_t>(what));
    info.type = FindGgmlType(type_id);
    if (info.type == nullptr) {
      return r.Error(absl::StrCat(what, " has ggml type ", type_id,
                                  ", which inferd does not read"));
    }
    if (info.dims[0] % info.type->block_elements != 0) {
      return r.Error(absl::StrCat(what, ": its rows (", info.dims[0],
                                  " values) are not whole ", info.type->name,
                                  " blocks of ", info.type->block_elements));
    }
    ASSIGN_OR_RETURN(info.offset, r.Read<uint64_t>(what));
    info.nbytes = numel / static_cast<uint64_t>(info.type->block_elements) *
                  static_cast<uint64_t>(info.type->block_bytes);
    if (!index_.emplace(info.name, tensors_.size()).second) {
      return r.Error(absl::StrCat(what, " appears twice"));
    }
    tensors_.push_back(std::move(info));
  }

  // The data area starts at the next multiple of the alignment.
  const uint64_t header_end = r.pos();
  const uint64_t data_start =
      (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > size_ && !tensors_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": truncated: the tensor data area is missing"));
  }
  const uint64_t data_size = data_start <= size_ ? size_ - data_start : 0;
  for (GgufTensorInfo& info : tensors_) {
    if (info.offset % alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": tensor '", info.name, "' data offset ", info.offset,
          " is not a multiple of the alignment ", alignment_));
    }
    if (info.offset > data_size || info.nbytes > data_size - info.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": truncated: tensor '", info.name, "' (", info.nbytes,
          " bytes at data offset ", info.offset,
          ") runs past the end of the file"));
    }
    info.data = base_ + data_start + info.offset;
    data_bytes_ += info.nbytes;
  }
  return absl::OkStatus();
}

const GgufValue* GgufFile::Find(absl::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::string> GgufFile::GetString(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": no metadata '", key, "'"));
  }
  if (v->type != GgufValueType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": metadata '", key, "' is a ", GgufValueTypeName(v->type),
        ", not a string"));
  }
  return v->s;
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": no metadata '", key, "'"));
  }
  auto i = v->AsInt();
  if (!i.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": metadata '", key, "': ", i.status().message()));
  }
  return *i;
}

absl::StatusOr<double> GgufFile::GetDouble(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": no metadata '", key, "'"));
  }
  auto d = v->AsDouble();
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": metadata '", key, "': ", d.status().message()));
  }
  return *d;
}

const GgufTensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace inferd
