// UTF-8 helpers and Unicode character properties (backed by ICU) used by the
// tokenizer pipeline. Stateless; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_UNICODE_UTIL_H_
#define INFERD_RUNTIME_TOKENIZER_UNICODE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace inferd {
namespace tokenizer_internal {

// Length in bytes of the UTF-8 sequence starting with lead byte `c` (1 for
// invalid lead bytes, so loops always advance).
inline size_t Utf8CharLen(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the code point at `s[pos]` (which must be valid UTF-8) and stores
// its byte length in `*len`.
char32_t DecodeUtf8(absl::string_view s, size_t pos, size_t* len);

// Appends the UTF-8 encoding of `c` to `out`.
void AppendUtf8(char32_t c, std::string* out);
inline std::string EncodeUtf8(char32_t c) {
  std::string s;
  AppendUtf8(c, &s);
  return s;
}

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs).
bool IsValidUtf8(absl::string_view s);

// Length of the longest prefix of `s` that is well-formed UTF-8 and ends on a
// character boundary.
size_t ValidUtf8PrefixLength(absl::string_view s);

// Converts arbitrary bytes to UTF-8, replacing each maximal invalid subpart
// with U+FFFD (the WHATWG / Unicode "lossy" convention).
std::string Utf8Lossy(absl::string_view bytes);

// Number of code points in valid UTF-8 `s`.
size_t CountChars(absl::string_view s);

// Character properties with the meaning the reference tokenizers give them.
bool IsWhitespace(char32_t c);       // Unicode White_Space property.
bool IsAlphanumeric(char32_t c);     // Alphabetic or numeric.
bool IsNumeric(char32_t c);          // General category Nd, Nl or No.
bool IsPunctuation(char32_t c);      // General category P*.
bool IsBertPunctuation(char32_t c);  // ASCII punctuation or P*.
bool IsOther(char32_t c);            // General category C*.
bool IsMarkNonspacing(char32_t c);   // General category Mn.
bool IsMark(char32_t c);             // General category M*.
bool IsWordChar(char32_t c);         // Alphanumeric or '_'.
bool IsChineseChar(char32_t c);      // CJK ideograph blocks BERT pads.

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_UNICODE_UTIL_H_
