#include "runtime/tokenizer/normalized_string.h"

#include <algorithm>

#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {

NormalizedString::NormalizedString(absl::string_view original, uint32_t base)
    : normalized_(original),
      implicit_(true),
      original_start_(base),
      original_end_(base + static_cast<uint32_t>(original.size())) {}

Offsets NormalizedString::AlignmentAt(size_t i) const {
  if (!implicit_) return alignments_[i];
  if (i < implicit_prefix_) return Offsets(original_start_, original_start_);
  // The character containing byte i: its lead byte is at most 3 bytes back.
  const auto* p = reinterpret_cast<const unsigned char*>(normalized_.data()) +
                  implicit_prefix_;
  const size_t n = normalized_.size() - implicit_prefix_;
  i -= implicit_prefix_;
  size_t s = i;
  while (s > 0 && i - s < 3 && (p[s] & 0xC0) == 0x80) --s;
  size_t e = std::min(s + Utf8CharLen(p[s]), n);
  if (e <= i) {  // A stray continuation byte is a character of its own.
    s = i;
    e = i + 1;
  }
  return Offsets(original_start_ + static_cast<uint32_t>(s),
                 original_start_ + static_cast<uint32_t>(e));
}

void NormalizedString::Materialize() {
  if (!implicit_) return;
  alignments_.resize(normalized_.size());
  for (size_t k = 0; k < implicit_prefix_; ++k) {
    alignments_[k] = Offsets(original_start_, original_start_);
  }
  const absl::string_view s =
      absl::string_view(normalized_).substr(implicit_prefix_);
  Offsets* const align = alignments_.data() + implicit_prefix_;
  size_t i = 0;
  while (i < s.size()) {
    const size_t len =
        std::min(Utf8CharLen(static_cast<unsigned char>(s[i])), s.size() - i);
    const Offsets a(original_start_ + static_cast<uint32_t>(i),
                    original_start_ + static_cast<uint32_t>(i + len));
    for (size_t k = 0; k < len; ++k) align[i + k] = a;
    i += len;
  }
  implicit_ = false;
  implicit_prefix_ = 0;
}

void NormalizedString::Transform(size_t start, size_t end,
                                 const std::vector<Change>& dest) {
  Materialize();
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
  if (implicit_) {
    // Inserted text aligns with the empty range at the start, which is
    // what implicit prefix bytes align with.
    normalized_.insert(0, s.data(), s.size());
    implicit_prefix_ += static_cast<uint32_t>(s.size());
    return;
  }
  // Inserted text aligns with the empty range before the first character.
  Offsets a(original_start_, original_start_);
  if (!alignments_.empty())
    a = Offsets(alignments_[0].first, alignments_[0].first);
  normalized_.insert(0, s.data(), s.size());
  alignments_.insert(alignments_.begin(), s.size(), a);
}

void NormalizedString::ReplaceRanges(const std::vector<Range>& ranges,
                                     absl::string_view content) {
  if (ranges.empty()) return;
  Materialize();
  // Each replacement is aligned with the last byte it removes (or, for an
  // empty range, with the byte before it), as Transform does for inserted
  // characters.
  std::string out;
  std::vector<Offsets> align;
  out.reserve(normalized_.size() + ranges.size() * content.size());
  align.reserve(normalized_.size() + ranges.size() * content.size());
  size_t pos = 0;
  for (const Range& r : ranges) {
    out.append(normalized_, pos, r.first - pos);
    align.insert(align.end(), alignments_.begin() + pos,
                 alignments_.begin() + r.first);
    const size_t after = r.second;
    Offsets a;
    if (after > 0) {
      a = alignments_[after - 1];
    } else if (!alignments_.empty()) {
      a = Offsets(alignments_[0].first, alignments_[0].first);
    } else {
      a = Offsets(original_start_, original_start_);
    }
    out.append(content.data(), content.size());
    align.insert(align.end(), content.size(), a);
    pos = after;
  }
  out.append(normalized_, pos, std::string::npos);
  align.insert(align.end(), alignments_.begin() + pos, alignments_.end());
  normalized_ = std::move(out);
  alignments_ = std::move(align);
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
  Materialize();
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
  const size_t n = normalized_.size();
  if (n == 0) return Offsets(original_start_, original_start_);
  if (start >= end) {
    if (start < n) {
      const uint32_t p = AlignmentAt(start).first;
      return Offsets(p, p);
    }
    const uint32_t p = AlignmentAt(n - 1).second;
    return Offsets(p, p);
  }
  end = std::min(end, n);
  const uint32_t lo = AlignmentAt(start).first;
  uint32_t hi = AlignmentAt(end - 1).second;
  if (hi < lo) hi = lo;
  return Offsets(lo, hi);
}

Offsets NormalizedString::ToOriginalWithin(size_t piece_start, size_t piece_end,
                                           size_t start, size_t end) const {
  const size_t n = piece_end - piece_start;
  if (n == 0) {
    const uint32_t p = ToOriginal(piece_start, piece_end).first;
    return Offsets(p, p);
  }
  if (start >= end) {
    if (start < n) {
      const uint32_t p = AlignmentAt(piece_start + start).first;
      return Offsets(p, p);
    }
    const uint32_t p = AlignmentAt(piece_end - 1).second;
    return Offsets(p, p);
  }
  end = std::min(end, n);
  const uint32_t lo = AlignmentAt(piece_start + start).first;
  uint32_t hi = AlignmentAt(piece_start + end - 1).second;
  if (hi < lo) hi = lo;
  return Offsets(lo, hi);
}

NormalizedString NormalizedString::Slice(size_t start, size_t end) const {
  NormalizedString out;
  out.normalized_ = normalized_.substr(start, end - start);
  const auto boundary = [this](size_t i) {
    return i >= normalized_.size() ||
           (static_cast<unsigned char>(normalized_[i]) & 0xC0) != 0x80;
  };
  if (implicit_ && implicit_prefix_ == 0 && boundary(start) && boundary(end)) {
    out.implicit_ = true;
    out.original_start_ = original_start_ + static_cast<uint32_t>(start);
    out.original_end_ = original_start_ + static_cast<uint32_t>(end);
    return out;
  }
  if (implicit_) {
    out.alignments_.reserve(end - start);
    for (size_t i = start; i < end; ++i)
      out.alignments_.push_back(AlignmentAt(i));
  } else {
    out.alignments_.assign(alignments_.begin() + start,
                           alignments_.begin() + end);
  }
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
