// libFuzzer target: the chat-template Jinja parser and renderer
// (runtime/chat). The first byte picks the mode:
//   even: the rest is a template source; parsed, and when it parses,
//         rendered over a fixed conversation (system/user/assistant turns,
//         tools, a generation prompt);
//   odd:  the rest is a JSON context rendered by one of the real templates
//         in tests/data/chat_templates (picked by the second byte).
// Both must return a status for any input and stay inside the render
// limits (output size, steps, depth), never crash or hang.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/jinja.h"

#ifndef INFERD_FUZZ_SOURCE_DIR
#error "INFERD_FUZZ_SOURCE_DIR must name the inferd source tree"
#endif

namespace {

// Limits small enough that a hostile template errors out fast.
inferd::jinja::RenderOptions FuzzOptions() {
  inferd::jinja::RenderOptions o;
  o.now = absl::FromUnixSeconds(1700000000);
  o.time_zone = absl::UTCTimeZone();
  o.max_output_bytes = 1 << 16;
  o.max_steps = 20000;
  o.max_depth = 64;
  o.max_list_items = 4096;
  return o;
}

const nlohmann::ordered_json& FixedContext() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <b>there</b> \u00e9\ud83d\ude00"},
      {"role": "assistant", "content": "Hello!",
       "tool_calls": [{"type": "function",
                       "function": {"name": "f", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "{\"ok\": true}"},
      {"role": "user", "content": ""}
    ],
    "tools": [{"type": "function", "function": {"name": "f",
               "description": "d", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })");
  return ctx;
}

std::vector<std::unique_ptr<inferd::ChatTemplate>> LoadRealTemplates() {
  std::vector<std::unique_ptr<inferd::ChatTemplate>> out;
  const char* names[] = {"SmolLM2-135M-Instruct.jinja",
                         "Qwen-Qwen2.5-7B-Instruct.jinja",
                         "Qwen-Qwen3-0.6B.jinja",
                         "google-gemma-2-2b-it.jinja",
                         "meta-llama-Llama-3.1-8B-Instruct.jinja",
                         "mistralai-Mistral-Nemo-Instruct-2407.jinja"};
  for (const char* name : names) {
    std::ifstream f(std::string(INFERD_FUZZ_SOURCE_DIR) +
                    "/tests/data/chat_templates/" + name);
    if (!f) continue;
    std::stringstream ss;
    ss << f.rdbuf();
    auto t = inferd::ChatTemplate::Parse(ss.str());
    if (t.ok()) out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const inferd::jinja::RenderOptions options = FuzzOptions();
  const uint8_t mode = data[0];
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  if (mode % 2 == 0) {
    auto t = inferd::ChatTemplate::Parse(rest);
    if (!t.ok()) return 0;
    auto out = (*t)->Render(FixedContext(), options);
    if (out.ok() && out->size() > options.max_output_bytes) __builtin_trap();
    return 0;
  }
  static const auto real = LoadRealTemplates();
  if (real.empty()) return 0;
  const auto& t = real[static_cast<uint8_t>(rest[0]) % real.size()];
  nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(
      rest.substr(1), nullptr, /*allow_exceptions=*/false);
  if (ctx.is_discarded() || !ctx.is_object()) return 0;
  auto out = t->Render(ctx, options);
  if (out.ok() && out->size() > options.max_output_bytes) __builtin_trap();
  return 0;
}
