#include "service/grpc/grpc_auth.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace inferd {
namespace {

absl::string_view ToView(const grpc::string_ref& s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace

std::string PresentedKey(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    absl::string_view v = absl::StripAsciiWhitespace(ToView(it->second));
    if (v.size() > 7 && absl::StartsWithIgnoreCase(v, "bearer ")) {
      return std::string(absl::StripAsciiWhitespace(v.substr(7)));
    }
  }
  it = md.find("x-api-key");
  if (it != md.end()) {
    return std::string(absl::StripAsciiWhitespace(ToView(it->second)));
  }
  return "";
}

}  // namespace inferd
