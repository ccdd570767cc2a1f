#include "service/request/auth.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace inferd {

absl::StatusOr<std::string> ApiKeyAuth::LoadKey(
    const std::string& api_key, const std::string& api_key_file) {
  if (api_key_file.empty()) return api_key;
  std::ifstream in(api_key_file, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--api-key-file=", api_key_file, ": cannot read the file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key(absl::StripAsciiWhitespace(ss.str()));
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--api-key-file=", api_key_file, ": the file holds no key"));
  }
  return key;
}

bool ApiKeyAuth::KeysEqual(absl::string_view expected,
                           absl::string_view given) {
  // Every byte of `expected` is compared against the same position of
  // `given` (wrapping), and the length difference is folded in, so neither
  // an early mismatch nor a short key ends the loop sooner.
  volatile unsigned char diff = expected.size() == given.size() ? 0 : 1;
  if (expected.empty()) return given.empty();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g =
        given.empty() ? 0 : static_cast<unsigned char>(given[i % given.size()]);
    diff = diff | (static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0;
}


absl::Status ApiKeyAuth::CheckKey(absl::string_view given,
                                  absl::string_view how_to_send) const {
  if (key_.empty()) return absl::OkStatus();
  if (given.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat("missing API key: send ", how_to_send));
  }
  if (!KeysEqual(key_, given)) {
    return absl::UnauthenticatedError("invalid API key");
  }
  return absl::OkStatus();
}

}  // namespace inferd
