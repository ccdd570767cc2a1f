#include "runtime/tokenizer/added_tokens.h"

#include <algorithm>

#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

// Last character of `s` (valid UTF-8, non-empty).
char32_t LastChar(absl::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  size_t len;
  return DecodeUtf8(s, i, &len);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<std::string> patterns,
                                     std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)) {
  terminal_.push_back(-1);
  for (size_t p = 0; p < patterns.size(); ++p) {
    const std::string& s = patterns[p];
    if (s.empty()) continue;
    first_bytes_.set(static_cast<unsigned char>(s[0]));
    uint32_t node = 0;
    for (unsigned char c : s) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, static_cast<uint32_t>(terminal_.size())).first;
        terminal_.push_back(-1);
      }
      node = it->second;
    }
    if (terminal_[node] < 0) terminal_[node] = static_cast<int>(p);
  }
}

std::pair<int, size_t> AddedTokenMatcher::LongestAt(absl::string_view text,
                                                    size_t pos) const {
  std::pair<int, size_t> best(-1, 0);
  uint32_t node = 0;
  for (size_t k = pos; k < text.size(); ++k) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) |
                         static_cast<unsigned char>(text[k]);
    auto it = edges_.find(key);
    if (it == edges_.end()) break;
    node = it->second;
    if (terminal_[node] >= 0) best = {terminal_[node], k + 1 - pos};
  }
  return best;
}

std::vector<AddedSplit> AddedTokenMatcher::Split(absl::string_view text) const {
  std::vector<AddedSplit> out;
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_bytes_.test(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    const auto [pattern, len] = LongestAt(text, pos);
    if (pattern < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + len;
    const AddedToken& tok = tokens_[pattern];
    if (tok.single_word) {
      const bool start_ok =
          start == 0 || !IsWordChar(LastChar(text.substr(0, start)));
      size_t clen;
      const bool stop_ok =
          stop == text.size() || !IsWordChar(DecodeUtf8(text, stop, &clen));
      if (!start_ok || !stop_ok) {
        ++pos;
        continue;
      }
    }
    if (start < start_offset) {  // Overlaps a previous rstrip.
      ++pos;
      continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t b = s - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80)
          --b;
        size_t clen;
        if (!IsWhitespace(DecodeUtf8(text, b, &clen))) break;
        s = b;
      }
      start = s;
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t clen;
        if (!IsWhitespace(DecodeUtf8(text, stop, &clen))) break;
        stop += clen;
      }
    }
    if (start_offset < start) out.push_back({{start_offset, start}, -1});
    out.push_back({{start, stop}, pattern});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size() || out.empty()) {
    out.push_back({{start_offset, text.size()}, -1});
  }
  return out;
}

}  // namespace tokenizer_internal
}  // namespace inferd
