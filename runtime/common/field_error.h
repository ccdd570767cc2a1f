// Errors about one field of a request. The status carries the field's path
// in the inferd.v1 API (`sampling.max_tokens`, `messages[2].content`,
// `tools[0].parameters`) as a payload, so each front end names the field in
// its own terms (OpenAI's `param`, a gRPC message) without reading the
// message text. Header-only; pure functions, thread-safe.
#ifndef INFERD_RUNTIME_COMMON_FIELD_ERROR_H_
#define INFERD_RUNTIME_COMMON_FIELD_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace inferd {

// The payload URL under which a status records its field path.
inline constexpr char kFieldPathPayload[] = "type.inferd.dev/field-path";

// An error about `path`: the message is `path` followed by `rest` (": must
// be ...", " = 2 is outside (0, 1]"), so it reads well on its own.
inline absl::Status FieldError(
    absl::string_view path, absl::string_view rest,
    absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status s(code, absl::StrCat(path, rest));
  s.SetPayload(kFieldPathPayload, absl::Cord(path));
  return s;
}

// The same, where the message does not start with the field's name (a
// sentence about it: "the prompt has 900 tokens ...").
inline absl::Status FieldErrorMessage(
    absl::string_view path, absl::string_view message,
    absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status s(code, message);
  s.SetPayload(kFieldPathPayload, absl::Cord(path));
  return s;
}

// The field path `s` records; empty when it records none.
inline std::string FieldPathOf(const absl::Status& s) {
  absl::optional<absl::Cord> p = s.GetPayload(kFieldPathPayload);
  return p.has_value() ? std::string(*p) : std::string();
}

// `s` about the same field under another name: the recorded path becomes
// `name`, and so does the message's leading path when it starts with it.
inline absl::Status RenameField(const absl::Status& s, absl::string_view name) {
  const std::string path = FieldPathOf(s);
  if (path.empty() || path == name) return s;
  absl::string_view m = s.message();
  absl::Status out(s.code(), absl::StartsWith(m, path)
                                 ? absl::StrCat(name, m.substr(path.size()))
                                 : std::string(m));
  out.SetPayload(kFieldPathPayload, absl::Cord(name));
  return out;
}

// `s` with `prefix` before its message (and the path kept): the request a
// stream's error is about ("request id 'a': ...").
inline absl::Status PrefixMessage(const absl::Status& s,
                                  absl::string_view prefix) {
  absl::Status out(s.code(), absl::StrCat(prefix, s.message()));
  const std::string path = FieldPathOf(s);
  if (!path.empty()) out.SetPayload(kFieldPathPayload, absl::Cord(path));
  return out;
}

}  // namespace inferd

#endif  // INFERD_RUNTIME_COMMON_FIELD_ERROR_H_
