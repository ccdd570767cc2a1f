// Helpers for loader tests: build safetensors bytes and scratch directories.
// Not thread-safe; one per test.
#ifndef INFERD_TESTS_RUNTIME_LOADER_TEST_UTIL_H_
#define INFERD_TESTS_RUNTIME_LOADER_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/shared_data.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inferd {
namespace testing_util {


struct RawTensor {
  std::string name;
  std::string dtype;  // safetensors dtype string
  std::vector<int64_t> shape;
  std::string bytes;  // raw data
};

// Little-endian bytes of the values.
template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

inline std::string LengthPrefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// Header JSON for tensors laid out back to back (offsets computed).
inline nlohmann::json HeaderFor(const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

// A complete file from an explicit header text and data area.
inline std::string Assemble(const std::string& header_text,
                            const std::string& data) {
  return LengthPrefix(header_text.size()) + header_text + data;
}

inline std::string BuildSafetensors(const std::vector<RawTensor>& tensors,
                                    const nlohmann::json& metadata = nullptr) {
  nlohmann::json header = HeaderFor(tensors);
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string data;
  for (const RawTensor& t : tensors) data += t.bytes;
  return Assemble(header.dump(), data);
}

// A fresh directory under TEST_TMPDIR or /tmp, removed by the destructor.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl =
        absl::StrCat(base != nullptr ? base : "/tmp", "/inferd_loader_XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* made = ::mkdtemp(buf.data());
    EXPECT_NE(made, nullptr);
    path_ = made != nullptr ? made : "/tmp";
  }
  ~ScratchDir() {
    const std::string cmd = absl::StrCat("rm -rf '", path_, "'");
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "could not remove " << path_;
    }
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const {
    const std::string p = absl::StrCat(path_, "/", name);
    const size_t slash = name.rfind('/');
    if (slash != std::string::npos) {
      const std::string cmd =
          absl::StrCat("mkdir -p '", path_, "/", name.substr(0, slash), "'");
      EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
    std::ofstream out(p, std::ios::binary);
    out << content;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace testing_util
}  // namespace inferd

#endif  // INFERD_TESTS_RUNTIME_LOADER_TEST_UTIL_H_
