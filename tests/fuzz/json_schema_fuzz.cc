// libFuzzer target: structured output's JSON Schema compiler
// (runtime/gen/json_schema.h). The input is the schema text. The compiler
// must answer any text with a regex or INVALID_ARGUMENT and a message,
// never crash; an accepted schema's regex must compile into a ByteDfa (or
// be refused as too complex), every state of that DFA must still reach a
// match, and every string it accepts must be valid JSON (checked on one
// string per input, picked by a walk seeded from the input).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "runtime/gen/json_schema.h"
#include "runtime/gen/regex_dfa.h"
#include "tests/fuzz/dfa_walk.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> regex = inferd::CompileJsonSchema(text);
  if (!regex.ok()) {
    Check(regex.status().code() == absl::StatusCode::kInvalidArgument);
    Check(!regex.status().message().empty());
    return 0;
  }
  // Smaller than the server's limits, so each input stays fast.
  inferd::RegexLimits limits;
  limits.max_dfa_states = 4000;
  limits.max_subset_entries = 2000000;
  limits.max_steps = 20000000;
  absl::StatusOr<inferd::ByteDfa> dfa = inferd::ByteDfa::Compile(*regex, limits);
  if (!dfa.ok()) {
    // The compiler's output is always a valid pattern: only its size can
    // stop it.
    Check(absl::StrContains(dfa.status().message(), "too complex"));
    return 0;
  }
  const std::vector<int32_t> dist = inferd::fuzz::DistanceToAccept(*dfa);
  for (int32_t d : dist) Check(d != inferd::fuzz::kUnreachable);
  inferd::fuzz::Rng rng(inferd::fuzz::Fnv1a(text));
  const std::string out = inferd::fuzz::AcceptedString(*dfa, dist, &rng, 200);
  Check(dfa->FullMatch(out));
  Check(nlohmann::json::accept(out));
  return 0;
}
