#include "runtime/loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

// The reference implementation caps headers at 100 MB; a larger one is a
// corrupt or hostile file, not a model.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

size_t AlignmentOf(const void* p) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  size_t a = 1;
  while (a < 64 && (addr % (a * 2)) == 0) a *= 2;
  return a;
}

std::atomic<WeightFileMode> weight_file_mode{WeightFileMode::kCopy};

}  // namespace

void SetWeightFileMode(WeightFileMode mode) { weight_file_mode.store(mode); }
WeightFileMode GetWeightFileMode() { return weight_file_mode.load(); }

absl::StatusOr<void*> LoadWeightFileBytes(int fd, size_t size,
                                          absl::string_view what) {
  if (GetWeightFileMode() == WeightFileMode::kMap) {
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot mmap ", what, ": ", std::strerror(errno)));
    }
    return mapping;
  }
  // Anonymous memory (page-aligned, like a mapping, and released the same
  // way), filled with pread so nothing refers to the file afterwards.
  void* region = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", size, " bytes to load ", what, ": ",
        std::strerror(errno)));
  }
  uint8_t* dst = static_cast<uint8_t*>(region);
  size_t done = 0;
  while (done < size) {
    const size_t chunk = std::min<size_t>(size - done, size_t{1} << 30);
    const ssize_t n = ::pread(fd, dst + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(region, size);
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot read ", what, ": ",
          err != 0 ? std::string(std::strerror(err))
                   : absl::StrCat("the file ended after ", done, " of its ",
                                  size, " bytes (truncated while loading?)")));
    }
    done += static_cast<size_t>(n);
  }
  // Read-only from here on, like the mapping it replaces.
  ::mprotect(region, size, PROT_READ);
  return region;
}

absl::optional<DType> SafetensorsFile::ParseDType(absl::string_view name,
                                                  bool* known,
                                                  size_t* element_size) {
  struct Entry {
    absl::string_view name;
    size_t size;
    absl::optional<DType> dtype;
  };
  static const Entry kEntries[] = {
      {"F32", 4, DType::kF32},  {"F16", 2, DType::kF16},
      {"BF16", 2, DType::kBF16}, {"I8", 1, DType::kI8},
      {"U8", 1, DType::kU8},    {"I32", 4, DType::kI32},
      {"I64", 8, DType::kI64},  {"BOOL", 1, DType::kU8},
      {"F64", 8, absl::nullopt}, {"I16", 2, absl::nullopt},
      {"U16", 2, absl::nullopt}, {"U32", 4, absl::nullopt},
      {"U64", 8, absl::nullopt}, {"F8_E4M3", 1, absl::nullopt},
      {"F8_E5M2", 1, absl::nullopt},
  };
  for (const Entry& e : kEntries) {
    if (e.name == name) {
      *known = true;
      *element_size = e.size;
      return e.dtype;
    }
  }
  *known = false;
  *element_size = 0;
  return absl::nullopt;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("safetensors file not found: ", path));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open safetensors file ", path, ": ", std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors path is not a regular file: ", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "safetensors file ", path, " is truncated: ", size,
        " bytes, shorter than the 8-byte header length"));
  }
  absl::StatusOr<void*> mapping =
      LoadWeightFileBytes(fd, size, absl::StrCat("safetensors file ", path));
  ::close(fd);
  if (!mapping.ok()) return mapping.status();
  file->mapping_ = *mapping;
  file->base_ = static_cast<const uint8_t*>(*mapping);
  file->size_ = size;
  RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBuffer(
    absl::string_view bytes, absl::string_view display_name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::string(display_name);
  file->owned_ = std::string(bytes);
  file->base_ = reinterpret_cast<const uint8_t*>(file->owned_.data());
  file->size_ = file->owned_.size();
  RETURN_IF_ERROR(file->Parse());
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

absl::Status SafetensorsFile::Parse() {
  auto error = [this](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors file ", path_, ": ", parts...));
  };
  if (size_ < 8) {
    return error("truncated: ", size_,
                 " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base_[i];
  if (header_len > size_ - 8) {
    return error("header length ", header_len, " exceeds the file size ",
                 size_, " (truncated or not a safetensors file)");
  }
  if (header_len > kMaxHeaderBytes) {
    return error("header length ", header_len, " exceeds the limit of ",
                 kMaxHeaderBytes, " bytes");
  }
  const char* header = reinterpret_cast<const char*>(base_ + 8);
  const uint8_t* data = base_ + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;

  // A JSON object keeps one value per key, so a repeated tensor name would
  // be merged silently; the parser callback sees every top-level key.
  std::string duplicate;
  absl::flat_hash_set<std::string> seen;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event,
                      nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 &&
        parsed.is_string()) {
      if (!seen.insert(parsed.get<std::string>()).second &&
          duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(header, header + header_len, on_event);
  } catch (const nlohmann::json::exception& e) {
    return error("header is not valid JSON: ", e.what());
  }
  if (!root.is_object()) return error("header is not a JSON object");
  if (!duplicate.empty()) {
    return error("tensor '", duplicate, "' appears more than once");
  }

  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object() && !entry.is_null()) {
        return error("__metadata__ is not an object");
      }
      if (entry.is_object()) {
        for (auto m = entry.begin(); m != entry.end(); ++m) {
          metadata_[m.key()] =
              m.value().is_string() ? m.value().get<std::string>()
                                    : m.value().dump();
        }
      }
      continue;
    }
    if (!entry.is_object()) {
      return error("tensor '", name, "': entry is not an object");
    }
    SafetensorsTensorInfo info;
    info.name = name;
    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return error("tensor '", name, "': missing or non-string dtype");
    }
    info.dtype_name = dtype_it->get<std::string>();
    bool known = false;
    size_t element_size = 0;
    info.dtype = ParseDType(info.dtype_name, &known, &element_size);
    if (!known) {
      return error("tensor '", name, "': unknown dtype '", info.dtype_name,
                   "'");
    }
    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) {
      return error("tensor '", name, "': missing or non-array shape");
    }
    uint64_t numel = 1;
    bool overflow = false;
    for (const nlohmann::json& d : *shape_it) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d >= 0)) {
        return error("tensor '", name,
                     "': shape entries must be non-negative integers");
      }
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX)) overflow = true;
      if (__builtin_mul_overflow(numel, dim, &numel)) overflow = true;
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t expected_bytes = 0;
    if (overflow ||
        __builtin_mul_overflow(numel, element_size, &expected_bytes)) {
      return error("tensor '", name, "': shape [",
                   absl::StrJoin(info.shape, ", "), "] overflows");
    }
    auto off_it = entry.find("data_offsets");
    if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 ||
        !(*off_it)[0].is_number_unsigned() ||
        !(*off_it)[1].is_number_unsigned()) {
      return error("tensor '", name,
                   "': data_offsets must be two non-negative integers");
    }
    info.begin = (*off_it)[0].get<uint64_t>();
    info.end = (*off_it)[1].get<uint64_t>();
    if (info.begin > info.end) {
      return error("tensor '", name, "': data_offsets begin ", info.begin,
                   " > end ", info.end);
    }
    if (info.end > data_size) {
      return error("tensor '", name, "': data_offsets [", info.begin, ", ",
                   info.end, ") lie outside the data area of ", data_size,
                   " bytes (file truncated?)");
    }
    if (info.end - info.begin != expected_bytes) {
      return error("tensor '", name, "': ", info.end - info.begin,
                   " bytes in the file but dtype ", info.dtype_name,
                   " x shape [", absl::StrJoin(info.shape, ", "), "] needs ",
                   expected_bytes);
    }
    info.data = data + info.begin;
    info.alignment = AlignmentOf(info.data);
    index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    const auto& x = tensors_[a];
    const auto& y = tensors_[b];
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& prev = tensors_[order[i - 1]];
    const auto& cur = tensors_[order[i]];
    if (cur.begin < prev.end) {
      return error("tensors '", prev.name, "' [", prev.begin, ", ", prev.end,
                   ") and '", cur.name, "' [", cur.begin, ", ", cur.end,
                   ") overlap");
    }
  }
  std::vector<SafetensorsTensorInfo> sorted;
  sorted.reserve(tensors_.size());
  for (size_t i : order) sorted.push_back(std::move(tensors_[i]));
  tensors_ = std::move(sorted);
  index_.clear();
  data_bytes_ = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    index_.emplace(tensors_[i].name, i);
    data_bytes_ += tensors_[i].nbytes();
  }
  return absl::OkStatus();
}

const SafetensorsTensorInfo* SafetensorsFile::Find(
    absl::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<TensorView> SafetensorsFile::Get(absl::string_view name) const {
  const SafetensorsTensorInfo* info = Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor '", name,
                                            "' not found in safetensors file ",
                                            path_));
  }
  if (!info->dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' in ", path_, " has dtype ",
                     info->dtype_name, ", which inferd does not support"));
  }
  if (info->shape.size() > static_cast<size_t>(kMaxTensorRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' in ", path_, " has rank ",
                     info->shape.size(), "; at most ", kMaxTensorRank,
                     " is supported"));
  }
  TensorView view;
  // The mapping is read-only; TensorView has no const flavour, so callers
  // must treat weight views as immutable.
  view.data = const_cast<uint8_t*>(info->data);
  view.dtype = *info->dtype;
  view.rank = static_cast<int>(info->shape.size());
  int64_t stride = 1;
  for (int i = view.rank - 1; i >= 0; --i) {
    view.shape[i] = info->shape[i];
    view.strides[i] = stride;
    stride *= info->shape[i];
  }
  return view;
}

std::vector<std::string> SafetensorsFile::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& t : tensors_) names.push_back(t.name);
  return names;
}

}  // namespace inferd
