#include "runtime/loader/m3_heads.h"

#include <sys/stat.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "device/bf16.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/safetensors.h"
#include "runtime/loader/torch_pickle.h"

namespace inferd {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Find(const std::string& dir, const std::string& head) {
  for (const char* ext : {".pt", ".safetensors"}) {
    std::string p = absl::StrCat(dir, "/", head, ext);
    if (IsFile(p)) return p;
  }
  return "";
}

absl::StatusOr<std::map<std::string, FloatTensor>> ReadSafetensorsHead(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> st,
                   SafetensorsFile::Open(path));
  std::map<std::string, FloatTensor> out;
  for (const char* name : {"weight", "bias"}) {
    if (!st->Has(name)) continue;
    ASSIGN_OR_RETURN(TensorView v, st->Get(name));
    FloatTensor t;
    for (int d = 0; d < v.rank; ++d) t.shape.push_back(v.dim(d));
    t.values.resize(static_cast<size_t>(v.numel()));
    for (size_t i = 0; i < t.values.size(); ++i) {
      switch (v.dtype) {
        case DType::kF32: t.values[i] = v.as<const float>()[i]; break;
        case DType::kBF16: t.values[i] = Bf16ToFloat(v.as<const uint16_t>()[i]); break;
        case DType::kF16: t.values[i] = F16ToFloat(v.as<const uint16_t>()[i]); break;
        default:
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": ", name, " must be float32, bfloat16 or float16"));
      }
    }
    out[name] = std::move(t);
  }
  return out;
}

}  // namespace

M3HeadFiles FindM3HeadFiles(const std::string& dir) {
  return M3HeadFiles{Find(dir, "sparse_linear"), Find(dir, "colbert_linear")};
}

std::string M3HeadMissing(const std::string& dir, const std::string& head) {
  return absl::StrCat(dir, "/", head, ".pt (or ", head, ".safetensors)");
}

absl::StatusOr<LinearWeights> LoadLinearHead(const std::string& path,
                                             int64_t in_features,
                                             int64_t out_features) {
  std::map<std::string, FloatTensor> tensors;
  if (absl::EndsWith(path, ".safetensors")) {
    ASSIGN_OR_RETURN(tensors, ReadSafetensorsHead(path));
  } else {
    ASSIGN_OR_RETURN(tensors, ReadTorchStateDict(path));
  }
  auto w = tensors.find("weight");
  auto b = tensors.find("bias");
  if (w == tensors.end() || b == tensors.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": needs tensors 'weight' and 'bias'"));
  }
  const std::vector<int64_t>& ws = w->second.shape;
  if (ws.size() != 2 || ws[1] != in_features ||
      (out_features > 0 && ws[0] != out_features) || ws[0] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": weight must be [", out_features > 0 ? absl::StrCat(out_features)
                                                      : std::string("out"),
        ", ", in_features, "] (the model's hidden size)"));
  }
  if (b->second.shape.size() != 1 || b->second.shape[0] != ws[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": bias must be [", ws[0], "]"));
  }
  LinearWeights out;
  out.in_features = in_features;
  out.out_features = ws[0];
  out.weight = std::move(w->second.values);
  out.bias = std::move(b->second.values);
  return out;
}

}  // namespace inferd
