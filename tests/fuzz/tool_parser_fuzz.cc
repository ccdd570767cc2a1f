// libFuzzer target: the tool-call and reasoning parsers (runtime/chat/
// tool_parser.h) on hostile model output. The first byte picks the parser
// (hermes, llama3_json, mistral, required, pythonic, named, each alone,
// under <think> or under a <think> the prompt opened; or generic), the second where the text is cut; the rest is the text. Fed
// whole and fed in two pieces (and byte by byte for short texts), the
// parser must give the same content, reasoning and calls, and never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "runtime/chat/tool_parser.h"

namespace {

std::unique_ptr<inferd::OutputParser> Make(uint8_t pick) {
  auto ids = std::make_shared<int>(0);
  inferd::ToolCallIdFn id = [ids] { return std::to_string((*ids)++); };
  std::unique_ptr<inferd::OutputParser> p;
  switch (pick % 6) {
    case 0:
      p = inferd::NewToolParser("hermes", id);
      break;
    case 1:
      p = inferd::NewToolParser("llama3_json", id);
      break;
    case 2:
      p = inferd::NewToolParser("mistral", id);
      break;
    case 3:
      p = inferd::NewRequiredToolParser(id);
      break;
    case 4:
      p = inferd::NewToolParser("pythonic", id);
      break;
    default:
      p = inferd::NewNamedToolParser("f", id);
      break;
  }
  // The next digit: alone, under <think>, under a <think> the prompt
  // opened, or the generic format instead.
  switch ((pick / 6) % 4) {
    case 1:
      p = inferd::NewThinkParser(std::move(p));
      break;
    case 2:
      p = inferd::NewReasoningParser("think", std::move(p), /*opened=*/true);
      break;
    case 3:
      p = inferd::NewToolParser("generic", id);
      break;
    default:
      break;
  }
  return p;
}

struct Out {
  std::string content, reasoning;
  std::vector<inferd::ToolCall> calls;
};

Out Run(uint8_t pick, const std::vector<std::string>& pieces) {
  std::unique_ptr<inferd::OutputParser> p = Make(pick);
  inferd::ParsedDelta all;
  for (const std::string& s : pieces) all.Append(p->Feed(s));
  all.Append(p->Finish());
  return Out{all.content, all.reasoning, inferd::JoinToolCalls(all.tool_calls)};
}

void Same(const Out& a, const Out& b) {
  if (a.content != b.content || a.reasoning != b.reasoning ||
      a.calls.size() != b.calls.size()) {
    std::abort();
  }
  for (size_t i = 0; i < a.calls.size(); ++i) {
    if (a.calls[i].id != b.calls[i].id || a.calls[i].name != b.calls[i].name ||
        a.calls[i].arguments != b.calls[i].arguments) {
      std::abort();
    }
  }
}

}  // namespace

// Start-up: the built-in formats, as inferd's main registers them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inferd::RegisterChatBuiltins();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t pick = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t cut = text.empty() ? 0 : data[1] % (text.size() + 1);
  const Out whole = Run(pick, {text});
  Same(whole, Run(pick, {text.substr(0, cut), text.substr(cut)}));
  if (text.size() <= 256) {
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    Same(whole, Run(pick, bytes));
  }
  return 0;
}
