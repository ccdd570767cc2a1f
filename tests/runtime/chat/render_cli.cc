// Test tool: reads JSON lines {"template": ..., "context": {...}, "now":
// "YYYY-MM-DDTHH:MM:SS" (optional, UTC)} from stdin and prints one JSON line
// per input: {"ok": true, "text": ...} or {"ok": false, "error": ...}.
#include <iostream>
#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/chat_template.h"

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::ordered_json out;
    try {
      auto in = nlohmann::ordered_json::parse(line);
      inferd::jinja::RenderOptions options;
      options.time_zone = absl::UTCTimeZone();
      if (in.contains("now")) {
        std::string err;
        if (!absl::ParseTime("%Y-%m-%dT%H:%M:%S", in["now"].get<std::string>(),
                             absl::UTCTimeZone(), &options.now, &err)) {
          throw std::runtime_error("bad now: " + err);
        }
      }
      auto t = inferd::ChatTemplate::Parse(in["template"].get<std::string>());
      if (!t.ok()) {
        out = {{"ok", false}, {"error", std::string(t.status().message())}};
      } else {
        auto r = (*t)->Render(in["context"], options);
        if (r.ok()) {
          out = {{"ok", true}, {"text", *r}};
        } else {
          out = {{"ok", false}, {"error", std::string(r.status().message())}};
        }
      }
    } catch (const std::exception& e) {
      out = {{"ok", false}, {"error", std::string("cli: ") + e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n" << std::flush;
  }
  return 0;
}
