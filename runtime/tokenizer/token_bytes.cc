#include "runtime/tokenizer/token_bytes.h"

#include <cstdint>

#include "runtime/tokenizer/byte_level.h"

namespace inferd {
namespace {

// "<0xAB>" -> 0xAB, else -1.
int ByteFallback(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// The token string through the byte-level alphabet; false when a character
// is outside it.
bool ByteLevelBytes(const std::string& token, std::string* out) {
  const auto& t = tokenizer_internal::GetByteLevelTables();
  out->clear();
  for (size_t i = 0; i < token.size();) {
    const auto b = static_cast<uint8_t>(token[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    if (i + len > token.size()) return false;
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      c = (c << 6) | (static_cast<uint8_t>(token[i + k]) & 0x3F);
    }
    if (c >= t.char_to_byte.size() || t.char_to_byte[c] < 0) return false;
    out->push_back(static_cast<char>(t.char_to_byte[c]));
    i += len;
  }
  return true;
}

bool HasReplacementChar(const std::string& s) {
  return s.find("\xEF\xBF\xBD") != std::string::npos;
}

}  // namespace

std::vector<std::string> TokenByteStrings(const Tokenizer& tok) {
  const int32_t n = static_cast<int32_t>(tok.vocab_size());
  std::vector<std::string> out(n);
  // The decoder strips or rewrites a leading space of the first token
  // (SentencePiece), so each token is decoded after an anchor token and
  // the anchor's own text removed.
  int32_t anchor = -1;
  std::string anchor_text;
  for (const char* cand : {"a", "x", "the", "▁a", "Ġa"}) {
    auto id = tok.TokenToId(cand);
    if (!id.has_value() || tok.IsSpecial(*id)) continue;
    auto text = tok.Decode({*id}, /*skip_special_tokens=*/false);
    if (text.ok() && !text->empty()) {
      anchor = *id;
      anchor_text = *text;
      break;
    }
  }
  // Byte-level BPE: does "Ġ" decode to a space?
  bool byte_level = false;
  if (auto g = tok.TokenToId("Ġ"); g.has_value()) {
    auto text = tok.Decode({*g}, false);
    byte_level = text.ok() && *text == " ";
  }
  std::string bytes;
  for (int32_t id = 0; id < n; ++id) {
    if (tok.IsSpecial(id)) continue;
    const std::string piece = tok.IdToToken(id);
    if (piece.empty()) continue;
    if (const int b = ByteFallback(piece); b >= 0 && !byte_level) {
      out[id] = std::string(1, static_cast<char>(b));
      continue;
    }
    if (byte_level && ByteLevelBytes(piece, &bytes)) {
      out[id] = bytes;
      continue;
    }
    if (anchor < 0) continue;
    auto text = tok.Decode({anchor, id}, false);
    if (!text.ok() || text->compare(0, anchor_text.size(), anchor_text) != 0) {
      continue;
    }
    std::string mine = text->substr(anchor_text.size());
    // A lossy decode (part of a character) is not the token's bytes.
    if (HasReplacementChar(mine) && !HasReplacementChar(piece)) continue;
    out[id] = std::move(mine);
  }
  return out;
}

}  // namespace inferd
