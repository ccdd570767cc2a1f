#include "runtime/loader/weights.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string JoinPath(const std::string& dir, absl::string_view name) {
  if (dir.empty() || dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A shard name must stay inside the model directory.
bool IsPlainShardName(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  for (size_t start = 0; start <= name.size();) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    if (name.compare(start, slash - start, "..") == 0 && slash - start == 2) {
      return false;
    }
    start = slash + 1;
  }
  return true;
}

constexpr char kConvertHint[] =
    "convert it to safetensors first, e.g. in the model directory: "
    "python3 -c \"import torch; from safetensors.torch import save_file; "
    "sd = torch.load('pytorch_model.bin', map_location='cpu'); "
    "save_file({k: v.clone().contiguous() for k, v in sd.items()}, "
    "'model.safetensors', metadata={'format': 'pt'})\"";

// The index of the first element of a float tensor whose exponent bits are
// all ones (NaN or infinity), or -1. `mask` selects the exponent of a
// `Word`-sized float; the data may be unaligned.
template <typename Word>
int64_t FirstNonFinite(const uint8_t* data, uint64_t nbytes, Word mask) {
  const uint64_t n = nbytes / sizeof(Word);
  constexpr uint64_t kBlock = 4096;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t end = std::min(n, start + kBlock);
    bool bad = false;
    for (uint64_t i = start; i < end; ++i) {
      Word w;
      std::memcpy(&w, data + i * sizeof(Word), sizeof(Word));
      bad |= (w & mask) == mask;
    }
    if (!bad) continue;
    for (uint64_t i = start; i < end; ++i) {
      Word w;
      std::memcpy(&w, data + i * sizeof(Word), sizeof(Word));
      if ((w & mask) == mask) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

// A float weight holding NaN or infinity makes every output of the model
// NaN: refuse the file at load, naming the tensor.
absl::Status CheckFinite(const SafetensorsTensorInfo& t,
                         const std::string& path) {
  if (!t.dtype.has_value() || t.data == nullptr) return absl::OkStatus();
  int64_t bad = -1;
  switch (*t.dtype) {
    case DType::kF32:
      bad = FirstNonFinite<uint32_t>(t.data, t.nbytes(), 0x7f800000u);
      break;
    case DType::kF16:
      bad = FirstNonFinite<uint16_t>(t.data, t.nbytes(), 0x7c00u);
      break;
    case DType::kBF16:
      bad = FirstNonFinite<uint16_t>(t.data, t.nbytes(), 0x7f80u);
      break;
    default:
      return absl::OkStatus();
  }
  if (bad < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "safetensors file ", path, ": tensor '", t.name, "' holds NaN or "
      "infinity (element ", bad, " of ", t.dtype_name, " data); the weights "
      "are corrupt"));
}

}  // namespace

absl::Status WeightStore::AddFile(std::unique_ptr<SafetensorsFile> file) {
  for (const SafetensorsTensorInfo& t : file->tensors()) {
    RETURN_IF_ERROR(CheckFinite(t, file->path()));
    auto [it, inserted] = index_.emplace(t.name, file.get());
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' appears in both ",
                       it->second->path(), " and ", file->path()));
    }
    total_bytes_ += t.nbytes();
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WeightStore>> WeightStore::OpenDirectory(
    const std::string& dir) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = dir;
  const std::string single = JoinPath(dir, "model.safetensors");
  const std::string index_path = JoinPath(dir, "model.safetensors.index.json");

  if (FileExists(single)) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single));
    RETURN_IF_ERROR(store->AddFile(std::move(file)));
    return store;
  }
  if (FileExists(index_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(index_path));
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, " is not valid JSON: ", e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, " has no \"weight_map\" object"));
    }
    const nlohmann::json& weight_map = index["weight_map"];
    std::vector<std::string> shards;  // first-seen order
    std::set<std::string> seen;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": weight_map entry for tensor '",
                         it.key(), "' is not a file name"));
      }
      const std::string shard = it.value().get<std::string>();
      if (!IsPlainShardName(shard)) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": tensor '", it.key(), "' names shard '",
                         shard, "' outside the model directory"));
      }
      if (seen.insert(shard).second) shards.push_back(shard);
    }
    if (shards.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map is empty"));
    }
    for (const std::string& shard : shards) {
      const std::string path = JoinPath(dir, shard);
      auto file = SafetensorsFile::Open(path);
      if (!file.ok()) {
        if (absl::IsNotFound(file.status())) {
          return absl::NotFoundError(absl::StrCat(
              "shard ", path, " listed in ", index_path, " does not exist"));
        }
        return file.status();
      }
      RETURN_IF_ERROR(store->AddFile(std::move(file).value()));
    }
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      const std::string path = JoinPath(dir, it.value().get<std::string>());
      auto found = store->index_.find(it.key());
      if (found == store->index_.end() || found->second->path() != path) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, " maps tensor '", it.key(), "' to ", path,
                         ", but that shard does not contain it"));
      }
    }
    return store;
  }
  if (FileExists(JoinPath(dir, "pytorch_model.bin")) ||
      FileExists(JoinPath(dir, "pytorch_model.bin.index.json"))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model directory ", dir,
        " holds only PyTorch pickle weights (pytorch_model.bin); inferd "
        "loads safetensors only: ",
        kConvertHint));
  }
  return absl::NotFoundError(absl::StrCat(
      "model directory ", dir,
      " has neither model.safetensors nor model.safetensors.index.json"));
}

absl::StatusOr<std::unique_ptr<WeightStore>> WeightStore::FromTensors(
    std::string display_name, std::vector<SafetensorsTensorInfo> tensors,
    std::shared_ptr<const void> owner, bool pages_releasable) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = std::move(display_name);
  store->owner_ = std::move(owner);
  store->pages_releasable_ = pages_releasable;
  for (SafetensorsTensorInfo& t : tensors) {
    if (!t.dtype.has_value() || t.shape.empty() ||
        t.shape.size() > static_cast<size_t>(kMaxTensorRank)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' in ", store->dir_,
                       " has no usable dtype or shape"));
    }
    store->total_bytes_ += t.nbytes();
    std::string name = t.name;
    if (!store->external_.emplace(name, std::move(t)).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' appears twice in ", store->dir_));
    }
  }
  return store;
}

absl::StatusOr<WeightStore::Packed> WeightStore::FindOrPack(
    const void* stored, uint32_t tag,
    const std::function<absl::StatusOr<Packed>()>& make) const {
  absl::MutexLock lock(&packed_mu_);
  auto it = packed_.find(std::make_pair(stored, tag));
  if (it != packed_.end()) return it->second;
  absl::StatusOr<Packed> made = make();
  if (!made.ok() || made->data == nullptr) return made;
  packed_.emplace(std::make_pair(stored, tag), *made);
  return made;
}

size_t WeightStore::ReleaseStored(const void* data, size_t bytes) const {
  if (!pages_releasable_ || data == nullptr) return 0;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end <= begin) return 0;
  void* at = reinterpret_cast<void*>(begin);
  if (::madvise(at, end - begin, MADV_DONTNEED) != 0) return 0;
  ::mprotect(at, end - begin, PROT_NONE);
  return end - begin;
}

absl::StatusOr<TensorView> WeightStore::Get(absl::string_view name) const {
  if (auto ext = external_.find(name); ext != external_.end()) {
    const SafetensorsTensorInfo& t = ext->second;
    TensorView v;
    v.data = const_cast<uint8_t*>(t.data);
    v.dtype = *t.dtype;
    v.rank = static_cast<int>(t.shape.size());
    int64_t stride = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      v.shape[i] = t.shape[static_cast<size_t>(i)];
      v.strides[i] = stride;
      stride *= v.shape[i];
    }
    return v;
  }
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "tensor '", name, "' not found in the weights of ", dir_));
  }
  return it->second->Get(name);
}

bool WeightStore::Has(absl::string_view name) const {
  return index_.contains(name) || external_.contains(name);
}

const SafetensorsTensorInfo* WeightStore::Info(absl::string_view name) const {
  if (auto ext = external_.find(name); ext != external_.end()) {
    return &ext->second;
  }
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second->Find(name);
}

absl::StatusOr<std::string> WeightStore::FindWithPrefixes(
    absl::string_view name, absl::Span<const absl::string_view> prefixes) const {
  std::vector<std::string> tried;
  for (absl::string_view prefix : prefixes) {
    std::string candidate = absl::StrCat(prefix, name);
    if (Has(candidate)) return candidate;
    tried.push_back(std::move(candidate));
  }
  return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found in ",
                                          dir_, " (tried ",
                                          absl::StrJoin(tried, ", "), ")"));
}

std::vector<std::string> WeightStore::Names() const {
  std::vector<std::string> names;
  names.reserve(index_.size() + external_.size());
  for (const auto& [name, file] : index_) names.push_back(name);
  for (const auto& [name, info] : external_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> WeightStore::files() const {
  std::vector<std::string> paths;
  for (const auto& f : files_) paths.push_back(f->path());
  if (!external_.empty()) paths.push_back(dir_);
  return paths;
}

}  // namespace inferd
