// The extra heads of a BGE-M3 style model directory: `sparse_linear`
// (Linear(hidden, 1): one lexical weight per token) and `colbert_linear`
// (Linear(hidden, dims): one multi-vector per token), published beside the
// encoder's weights as torch files (sparse_linear.pt, colbert_linear.pt,
// read with runtime/loader/torch_pickle.h) or as safetensors copies
// (sparse_linear.safetensors, colbert_linear.safetensors) holding "weight"
// and "bias". A directory with these files is what makes a model serve the
// sparse and multi-vector embedding outputs.
// Pure functions; thread-safe.
#ifndef INFERD_RUNTIME_LOADER_M3_HEADS_H_
#define INFERD_RUNTIME_LOADER_M3_HEADS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace inferd {

// A linear layer in float32: y = W x + b, W [out x in] row-major.
struct LinearWeights {
  int64_t in_features = 0;
  int64_t out_features = 0;
  std::vector<float> weight;
  std::vector<float> bias;  // out_features values
};

// The head files a model directory has (empty when absent); a .pt file is
// preferred over its safetensors copy.
struct M3HeadFiles {
  std::string sparse;
  std::string colbert;
};
M3HeadFiles FindM3HeadFiles(const std::string& dir);

// What to tell a user whose model lacks a head: the files looked for.
std::string M3HeadMissing(const std::string& dir, const std::string& head);

// Reads a head file (.pt or .safetensors) with tensors "weight"
// [out x in_features] and "bias" [out]. `out_features` > 0 also fixes the
// output size. INVALID_ARGUMENT (naming the file) on any mismatch.
absl::StatusOr<LinearWeights> LoadLinearHead(const std::string& path,
                                             int64_t in_features,
                                             int64_t out_features);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_M3_HEADS_H_
