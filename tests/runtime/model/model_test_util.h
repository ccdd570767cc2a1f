// Helpers for the model tests: runs tests/reference/reference.py (the
// independent NumPy forward pass) and compares outputs. Not thread-safe.
#ifndef INFERD_TESTS_RUNTIME_MODEL_MODEL_TEST_UTIL_H_
#define INFERD_TESTS_RUNTIME_MODEL_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/model/model_runner.h"

namespace inferd {
namespace testing_util {

// Directory of a generated tiny model (INFERD_TEST_MODELS_DIR/name).
std::string TestModelDir(const std::string& name);

// Runs reference.py on `model_dir` with `ids` and extra flags (e.g.
// "--bidirectional", "--greedy 8"); results are cached per argument list.
absl::StatusOr<nlohmann::json> RunReference(const std::string& model_dir,
                                            const std::vector<int32_t>& ids,
                                            const std::string& flags = "");

// Deterministic pseudo-random ids in [lo, hi).
std::vector<int32_t> RandomIds(int n, int32_t lo, int32_t hi, uint32_t seed);

// Flattens a JSON matrix (or vector) of numbers.
std::vector<float> Flatten(const nlohmann::json& j);

// max |a - b| and max |b|.
struct ErrorStats {
  double max_abs_err = 0;
  double max_abs_ref = 0;
  double min_row_cosine = 1;  // over rows of `cols` values
};
ErrorStats Compare(const std::vector<float>& actual,
                   const std::vector<float>& expected, int64_t cols);

// A runner for a tiny model.
absl::StatusOr<std::unique_ptr<ModelRunnerBase>> MakeRunner(
    const std::string& model_dir, DType dtype = DType::kF32,
    absl::optional<bool> bidirectional = false,
    const std::string& attention = "auto");

// Hands out KV blocks to sequences of a test: sequence slot i owns blocks
// [i * per_seq, (i + 1) * per_seq).
struct BlockLayout {
  int block_size = 4;
  int per_seq = 32;
  std::vector<int32_t> Table(int slot, int64_t tokens) const;
};

}  // namespace testing_util
}  // namespace inferd

#endif  // INFERD_TESTS_RUNTIME_MODEL_MODEL_TEST_UTIL_H_
