// NormalizedString: a piece of text being normalized/pre-tokenized together
// with an alignment map from every normalized byte back to a byte range of
// the original input, so token offsets can point into the original text.
// While the text is still a verbatim copy of the input, the alignment map is
// implicit (derived from character boundaries) and only built on the first
// edit that needs it, so slicing unedited text costs one string copy.
// Also the split machinery shared by pre-tokenizers. Value type; not
// thread-safe to mutate concurrently.
#ifndef INFERD_RUNTIME_TOKENIZER_NORMALIZED_STRING_H_
#define INFERD_RUNTIME_TOKENIZER_NORMALIZED_STRING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace inferd {
namespace tokenizer_internal {

using Offsets = std::pair<uint32_t, uint32_t>;
using Range = std::pair<size_t, size_t>;

class NormalizedString {
 public:
  // One edit of a transformation: emit `c` with `change` relative to the old
  // text: 0 = replaces the next old char, n > 0 = inserted, -n = replaces the
  // next old char and removes the n old chars after it. A Change with
  // c == kSkip drops `change` old chars without emitting anything.
  struct Change {
    char32_t c;
    int change;
  };
  static constexpr char32_t kSkip = 0xFFFFFFFF;

  NormalizedString() = default;
  // `original` starts at byte `base` of the full input text.
  explicit NormalizedString(absl::string_view original, uint32_t base = 0);

  const std::string& get() const { return normalized_; }
  bool empty() const { return normalized_.empty(); }
  size_t size() const { return normalized_.size(); }
  // Original byte range this piece covers.
  uint32_t original_start() const { return original_start_; }
  uint32_t original_end() const { return original_end_; }

  // Rewrites normalized bytes [start, end) according to `dest`, which must
  // walk exactly the old characters in that range.
  void Transform(size_t start, size_t end, const std::vector<Change>& dest);
  void TransformAll(const std::vector<Change>& dest) {
    Transform(0, normalized_.size(), dest);
  }
  // Inserts `s` before the first character.
  void Prepend(absl::string_view s);
  // Replaces each of the sorted, non-overlapping byte ranges by `content`.
  void ReplaceRanges(const std::vector<Range>& ranges,
                     absl::string_view content);
  // Replaces every occurrence of the character `from` by `to`.
  void ReplaceChar(char32_t from, absl::string_view to);

  // Replaces characters in place; each replacement must have the same UTF-8
  // length as the character it replaces (alignments are unchanged).
  std::string* mutable_same_length() { return &normalized_; }
  // Original offsets of normalized byte range [start, end) of the piece
  // Slice(piece_start, piece_end) would give, without building the slice.
  Offsets ToOriginalWithin(size_t piece_start, size_t piece_end, size_t start,
                           size_t end) const;

  // Replaces every byte b by table[b]; the new bytes keep the alignment of
  // the character b belonged to (the byte-level BPE alphabet).
  void MapEachByte(const std::string* table);

  // Original offsets of normalized byte range [start, end).
  Offsets ToOriginal(size_t start, size_t end) const;
  // The sub-string of normalized bytes [start, end) with its alignments.
  NormalizedString Slice(size_t start, size_t end) const;

 private:
  // Builds alignments_ when they are still implicit.
  void Materialize();
  // Alignment of normalized byte i (i < size()).
  Offsets AlignmentAt(size_t i) const;

  std::string normalized_;
  // One entry per normalized byte; empty while implicit_.
  std::vector<Offsets> alignments_;
  // True while normalized_ is (after implicit_prefix_ bytes) a verbatim copy
  // of original bytes starting at original_start_ that begins on a character
  // boundary: byte i then aligns with the whole character containing it.
  bool implicit_ = false;
  // While implicit_: bytes prepended to the verbatim copy; they align with
  // the empty range at original_start_.
  uint32_t implicit_prefix_ = 0;
  uint32_t original_start_ = 0;
  uint32_t original_end_ = 0;
};

// How a split treats the matched delimiters (HF SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,
  kIsolated,
  kMergedWithPrevious,
  kMergedWithNext,
  kContiguous,
};

// Given the sorted, non-overlapping matches in a text of `size` bytes,
// returns the byte ranges of the resulting pieces (non-empty) in order.
std::vector<Range> SplitRanges(size_t size, const std::vector<Range>& matches,
                               SplitBehavior behavior, bool invert);

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_NORMALIZED_STRING_H_
