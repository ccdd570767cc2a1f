#include "service/http/openai_logprobs.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace inferd::http {

const char* FinishReasonName(const GenerateOutput& out) {
  if (out.tool_calls_finish) return "tool_calls";
  return out.finish == FinishReason::kLength ? "length" : "stop";
}

namespace {

// Whether `s` is well-formed UTF-8 (shortest forms, no surrogates).
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    int len = 0;
    uint32_t c = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b >> 5) == 0x6) {
      len = 2;
      c = b & 0x1F;
    } else if ((b >> 4) == 0xE) {
      len = 3;
      c = b & 0x0F;
    } else if ((b >> 3) == 0x1E) {
      len = 4;
      c = b & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(len) > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cb = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((cb >> 6) != 0x2) return false;
      c = (c << 6) | (cb & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

// OpenAI's token entry: the text the token adds, its UTF-8 bytes, and its
// logprob. A token that is part of a multi-byte character is written as
// "bytes:\xNN..." (its bytes alone are not text), as OpenAI does.
Json TokenJson(const NamedToken& t) {
  const std::string& b = t.text_bytes;
  std::string text;
  if (IsUtf8(b)) {
    text = b;
  } else {
    text = "bytes:";
    for (char c : b) {
      absl::StrAppend(&text, "\\x",
                      absl::Hex(static_cast<uint8_t>(c), absl::kZeroPad2));
    }
  }
  std::vector<int> bytes;
  for (char c : b) bytes.push_back(static_cast<uint8_t>(c));
  return Json{{"token", text}, {"logprob", t.logprob}, {"bytes", bytes}};
}

}  // namespace

int64_t TextLength(const std::string& s) {
  if (!IsUtf8(s)) return static_cast<int64_t>(s.size());
  int64_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

Json LegacyLogprobsJson(const LogprobList& lps, int top, int64_t* offset) {
  Json tokens = Json::array();
  Json token_logprobs = Json::array();
  Json top_logprobs = Json::array();
  Json text_offset = Json::array();
  for (const NamedLogprobs& lp : lps) {
    const Json t = TokenJson(lp.sampled);
    tokens.push_back(t["token"]);
    token_logprobs.push_back(lp.sampled.logprob);
    Json tops = Json::object();
    for (size_t k = 0; k < lp.top.size() && static_cast<int>(k) < top; ++k) {
      tops[TokenJson(lp.top[k])["token"].get<std::string>()] = lp.top[k].logprob;
    }
    top_logprobs.push_back(std::move(tops));
    text_offset.push_back(*offset);
    *offset += TextLength(lp.sampled.text_bytes);
  }
  return Json{{"tokens", tokens},
              {"token_logprobs", token_logprobs},
              {"top_logprobs", top_logprobs},
              {"text_offset", text_offset}};
}

Json EchoLogprobsJson(const std::string& first_token,
                      const LogprobList& prompt, const LogprobList& generated,
                      int top) {
  LogprobList all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  int64_t offset = TextLength(first_token);
  Json rest = LegacyLogprobsJson(all, top, &offset);
  Json out = {{"tokens", Json::array({first_token})},
              {"token_logprobs", Json::array({nullptr})},
              {"top_logprobs", Json::array({nullptr})},
              {"text_offset", Json::array({0})}};
  for (const char* key :
       {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (Json& v : rest[key]) out[key].push_back(std::move(v));
  }
  return out;
}

Json LogprobsJson(const LogprobList& lps, int top) {
  Json content = Json::array();
  for (const NamedLogprobs& lp : lps) {
    Json tops = Json::array();
    for (size_t k = 0; k < lp.top.size() && static_cast<int>(k) < top; ++k) {
      tops.push_back(TokenJson(lp.top[k]));
    }
    Json entry = TokenJson(lp.sampled);
    entry["top_logprobs"] = std::move(tops);
    content.push_back(std::move(entry));
  }
  return Json{{"content", content}};
}

}  // namespace inferd::http
