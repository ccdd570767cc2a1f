// A Jinja2-subset template interpreter for Hugging Face chat templates: the
// syntax, filters, tests and globals that transformers' apply_chat_template
// offers (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, raise_exception, strftime_now, its own tojson).
// Thread-safe after Parse: Render is const and keeps all state per call.
#ifndef INFERD_RUNTIME_CHAT_JINJA_H_
#define INFERD_RUNTIME_CHAT_JINJA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/chat/jinja_ast.h"
#include "runtime/chat/jinja_value.h"

namespace inferd::jinja {

struct RenderOptions {
  // The time strftime_now() formats; absl::InfinitePast() means "now".
  absl::Time now = absl::InfinitePast();
  absl::TimeZone time_zone = absl::LocalTimeZone();
  // Limits that turn a hostile template into an error.
  size_t max_output_bytes = 16 << 20;  // Also the longest string built.
  int64_t max_steps = 5'000'000;       // Statements + expressions evaluated.
  int max_depth = 300;                 // Nested evaluation (incl. macros).
  size_t max_list_items = 100'000;     // Longest list built (and range()).
};

class Template {
 public:
  // INVALID_ARGUMENT "chat template syntax error at line L:C: ..." for a
  // syntax error, an unknown filter/test or an unsupported construct.
  static absl::StatusOr<std::unique_ptr<Template>> Parse(
      absl::string_view source);

  // Renders with `globals` (a dict Value) as the template's variables.
  // Render errors (raise_exception, type errors, limits) are
  // INVALID_ARGUMENT with the template line.
  absl::StatusOr<std::string> Render(const Value& globals,
                                     const RenderOptions& options) const;

 private:
  Template() = default;
  Body body_;
};

}  // namespace inferd::jinja

#endif  // INFERD_RUNTIME_CHAT_JINJA_H_
