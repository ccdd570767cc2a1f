#include "runtime/tokenizer/normalized_string.h"

#include <algorithm>

#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {

NormalizedString::NormalizedString(absl::string_view original, uint32_t base)
    : normalized_(original),
      original_start_(base),
      original_end_(base + static_cast<uint32_t>(original.size())) {
  alignments_.resize(original.size());
  size_t i = 0;
  while (i < original.size()) {
    const size_t len =
        std::min(Utf8CharLen(static_cast<unsigned char>(original[i])),
                 original.size() - i);
    const Offsets a(base + static_cast<uint32_t>(i),
                    base + static_cast<uint32_t>(i + len));
    for (size_t k = 0; k < len; ++k) alignments_[i + k] = a;
    i += len;
  }
}

void NormalizedString::Transform(size_t start, size_t end,
                                 const std::vector<Change>& dest) {
  std::string out;
  std::vector<Offsets> align;
  out.reserve(normalized_.size() + dest.size());
  align.reserve(normalized_.size() + dest.size());
  out.append(normalized_, 0, start);
  align.insert(align.end(), alignments_.begin(), alignments_.begin() + start);
  size_t pos = start;
  auto skip_char = [&]() {
    if (pos < end) {
      pos += std::min(Utf8CharLen(static_cast<unsigned char>(normalized_[pos])),
                      end - pos);
    }
  };
  for (const Change& ch : dest) {
    if (ch.c == kSkip) {
      for (int k = 0; k < ch.change; ++k) skip_char();
      continue;
    }
    Offsets a;
    if (ch.change > 0) {
      if (pos > 0) {
        a = alignments_[pos - 1];
      } else if (!alignments_.empty()) {
        a = Offsets(alignments_[0].first, alignments_[0].first);
      } else {
        a = Offsets(original_start_, original_start_);
      }
    } else {
      if (pos < alignments_.size()) {
        a = alignments_[pos];
      } else if (!alignments_.empty()) {
        a = Offsets(alignments_.back().second, alignments_.back().second);
      } else {
        a = Offsets(original_end_, original_end_);
      }
      skip_char();
      for (int k = 0; k < -ch.change; ++k) skip_char();
    }
    const size_t before = out.size();
    AppendUtf8(ch.c, &out);
    align.insert(align.end(), out.size() - before, a);
  }
  out.append(normalized_, end, std::string::npos);
  align.insert(align.end(), alignments_.begin() + end, alignments_.end());
  normalized_ = std::move(out);
  alignments_ = std::move(align);
}

void NormalizedString::Prepend(absl::string_view s) {
  if (s.empty()) return;
  std::vector<Change> dest;
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    dest.push_back({DecodeUtf8(s, i, &len), 1});
    i += len;
  }
  Transform(0, 0, dest);
}

void NormalizedString::ReplaceRanges(const std::vector<Range>& ranges,
                                     absl::string_view content) {
  if (ranges.empty()) return;
  std::vector<char32_t> content_chars;
  for (size_t i = 0; i < content.size();) {
    size_t len;
    content_chars.push_back(DecodeUtf8(content, i, &len));
    i += len;
  }
  std::vector<Change> dest;
  dest.reserve(normalized_.size());
  size_t pos = 0;
  const absl::string_view s = normalized_;
  for (const Range& r : ranges) {
    while (pos < r.first) {
      size_t len;
      dest.push_back({DecodeUtf8(s, pos, &len), 0});
      pos += len;
    }
    const int removed = static_cast<int>(CountChars(s.substr(r.first, r.second - r.first)));
    if (removed > 0) dest.push_back({kSkip, removed});
    for (char32_t c : content_chars) dest.push_back({c, 1});
    pos = r.second;
  }
  while (pos < s.size()) {
    size_t len;
    dest.push_back({DecodeUtf8(s, pos, &len), 0});
    pos += len;
  }
  TransformAll(dest);
}

void NormalizedString::ReplaceChar(char32_t from, absl::string_view to) {
  const std::string needle = EncodeUtf8(from);
  std::vector<Range> ranges;
  size_t pos = 0;
  while ((pos = normalized_.find(needle, pos)) != std::string::npos) {
    ranges.emplace_back(pos, pos + needle.size());
    pos += needle.size();
  }
  ReplaceRanges(ranges, to);
}

void NormalizedString::MapEachByte(const std::string* table) {
  std::string out;
  std::vector<Offsets> align;
  out.reserve(normalized_.size() * 2);
  align.reserve(normalized_.size() * 2);
  for (size_t i = 0; i < normalized_.size(); ++i) {
    const std::string& rep = table[static_cast<unsigned char>(normalized_[i])];
    out.append(rep);
    align.insert(align.end(), rep.size(), alignments_[i]);
  }
  normalized_ = std::move(out);
  alignments_ = std::move(align);
}

Offsets NormalizedString::ToOriginal(size_t start, size_t end) const {
  if (alignments_.empty()) return Offsets(original_start_, original_start_);
  if (start >= end) {
    if (start < alignments_.size()) {
      return Offsets(alignments_[start].first, alignments_[start].first);
    }
    return Offsets(alignments_.back().second, alignments_.back().second);
  }
  end = std::min(end, alignments_.size());
  uint32_t lo = alignments_[start].first;
  uint32_t hi = alignments_[end - 1].second;
  if (hi < lo) hi = lo;
  return Offsets(lo, hi);
}

NormalizedString NormalizedString::Slice(size_t start, size_t end) const {
  NormalizedString out;
  out.normalized_ = normalized_.substr(start, end - start);
  out.alignments_.assign(alignments_.begin() + start,
                         alignments_.begin() + end);
  const Offsets o = ToOriginal(start, end);
  out.original_start_ = o.first;
  out.original_end_ = o.second;
  return out;
}

std::vector<Range> SplitRanges(size_t size, const std::vector<Range>& matches,
                               SplitBehavior behavior, bool invert) {
  // Covering list of (range, is_match).
  struct Part {
    Range r;
    bool is_match;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const Range& m : matches) {
    if (m.first > prev) parts.push_back({{prev, m.first}, invert});
    parts.push_back({m, !invert});
    prev = m.second;
  }
  if (prev < size) parts.push_back({{prev, size}, invert});

  std::vector<Range> out;
  out.reserve(parts.size());
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) out.push_back(p.r);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Part& p : parts) out.push_back(p.r);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !out.empty()) {
          out.back().second = p.r.second;
        } else {
          out.push_back(p.r);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().first = it->r.first;
        } else {
          out.push_back(it->r);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      bool first = true;
      for (const Part& p : parts) {
        if (!first && p.is_match == previous_match) {
          out.back().second = p.r.second;
        } else {
          out.push_back(p.r);
        }
        first = false;
        previous_match = p.is_match;
      }
      break;
    }
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [](const Range& r) { return r.first >= r.second; }),
            out.end());
  return out;
}

}  // namespace tokenizer_internal
}  // namespace inferd
