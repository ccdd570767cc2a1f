#include "tests/runtime/model/model_test_util.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace inferd {
namespace testing_util {

std::string TestModelDir(const std::string& name) {
  return absl::StrCat(INFERD_TEST_MODELS_DIR, "/", name);
}

absl::StatusOr<nlohmann::json> RunReference(const std::string& model_dir,
                                            const std::vector<int32_t>& ids,
                                            const std::string& flags) {
  // Tests run in parallel processes: the output file is per process.
  static auto* cache = new std::map<std::string, nlohmann::json>();
  const std::string key =
      absl::StrCat(model_dir, "|", absl::StrJoin(ids, ","), "|", flags);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  const std::string out = absl::StrCat(INFERD_BINARY_DIR, "/model_test_ref_",
                                       std::hash<std::string>()(key), ".json");
  const std::string cmd = absl::StrCat(
      "/usr/bin/python3 ", INFERD_SOURCE_DIR, "/tests/reference/reference.py",
      " --model ", model_dir, " --ids ", absl::StrJoin(ids, ","), " ", flags,
      " --out ", out);
  if (std::system(cmd.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("reference failed: ", cmd));
  }
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(out.c_str());
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) {
    return absl::InternalError(absl::StrCat("bad reference JSON from ", cmd));
  }
  (*cache)[key] = j;
  return j;
}

std::vector<int32_t> RandomIds(int n, int32_t lo, int32_t hi, uint32_t seed) {
  std::vector<int32_t> ids;
  uint32_t state = seed * 2654435761u + 12345u;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    ids.push_back(lo + static_cast<int32_t>((state >> 8) % (hi - lo)));
  }
  return ids;
}

std::vector<float> Flatten(const nlohmann::json& j) {
  std::vector<float> out;
  std::function<void(const nlohmann::json&)> walk =
      [&](const nlohmann::json& x) {
        if (x.is_array()) {
          for (const auto& e : x) walk(e);
        } else {
          out.push_back(x.get<float>());
        }
      };
  walk(j);
  return out;
}

ErrorStats Compare(const std::vector<float>& actual,
                   const std::vector<float>& expected, int64_t cols) {
  ErrorStats s;
  if (actual.size() != expected.size()) {
    s.max_abs_err = INFINITY;
    return s;
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    s.max_abs_err = std::max(
        s.max_abs_err, std::fabs(static_cast<double>(actual[i]) - expected[i]));
    s.max_abs_ref = std::max(s.max_abs_ref, std::fabs(double{expected[i]}));
  }
  for (size_t r = 0; r * cols < actual.size(); ++r) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double a = actual[r * cols + c], b = expected[r * cols + c];
      dot += a * b;
      na += a * a;
      nb += b * b;
    }
    const double cosine = dot / std::sqrt(std::max(na * nb, 1e-300));
    s.min_row_cosine = std::min(s.min_row_cosine, cosine);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<ModelRunnerBase>> MakeRunner(
    const std::string& model_dir, DType dtype,
    absl::optional<bool> bidirectional, const std::string& attention) {
  ModelRunnerOptions options;
  options.model_dir = model_dir;
  options.dtype = dtype;
  options.bidirectional = bidirectional;
  options.attention = attention;
  return CreateModelRunner(options);
}

std::vector<int32_t> BlockLayout::Table(int slot, int64_t tokens) const {
  std::vector<int32_t> table;
  for (int64_t b = 0; b * block_size < tokens; ++b) {
    table.push_back(static_cast<int32_t>(slot * per_seq + b));
  }
  return table;
}

}  // namespace testing_util
}  // namespace inferd
