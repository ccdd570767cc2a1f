#include "runtime/tokenizer/unicode_util.h"

#include <unicode/uchar.h>

namespace inferd {
namespace tokenizer_internal {

char32_t DecodeUtf8(absl::string_view s, size_t pos, size_t* len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  const unsigned char c = p[0];
  if (c < 0x80) {
    *len = 1;
    return c;
  }
  if ((c >> 5) == 0x6) {
    *len = 2;
    return (char32_t(c & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if ((c >> 4) == 0xE) {
    *len = 3;
    return (char32_t(c & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) |
           (p[2] & 0x3F);
  }
  *len = 4;
  return (char32_t(c & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {

// Length of the valid UTF-8 sequence at p[0..n), or 0 when invalid; when
// invalid, `*bad` receives the length of the maximal invalid subpart (>= 1).
size_t ValidSequenceAt(const unsigned char* p, size_t n, size_t* bad) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c == 0xE0) {
    need = 2;
    lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    need = 2;
  } else if (c == 0xED) {
    need = 2;
    hi = 0x9F;
  } else if (c == 0xF0) {
    need = 3;
    lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    need = 3;
  } else if (c == 0xF4) {
    need = 3;
    hi = 0x8F;
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t i = 1; i <= need; ++i) {
    if (i >= n) {
      *bad = i;
      return 0;
    }
    const unsigned char b = p[i];
    const bool ok = (i == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *bad = i;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool IsValidUtf8(absl::string_view s) {
  return ValidUtf8PrefixLength(s) == s.size();
}

size_t ValidUtf8PrefixLength(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t len = ValidSequenceAt(p + i, n - i, &bad);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

std::string Utf8Lossy(absl::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::string out;
  out.reserve(n);
  size_t i = 0;
  while (i < n) {
    size_t bad = 0;
    const size_t len = ValidSequenceAt(p + i, n - i, &bad);
    if (len > 0) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

size_t CountChars(absl::string_view s) {
  size_t count = 0;
  for (unsigned char c : s) count += (c & 0xC0) != 0x80;
  return count;
}

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER ||
         t == U_OTHER_NUMBER;
}

bool IsAlphanumeric(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
  }
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) ||
         IsNumeric(c);
}

bool IsPunctuation(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION ||
         t == U_START_PUNCTUATION || t == U_END_PUNCTUATION ||
         t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
         t == U_OTHER_PUNCTUATION;
}

// The Hugging Face library classifies punctuation and "other" characters for
// BERT with tables of Unicode 8.0: a code point assigned later is, for it,
// neither punctuation nor a format character (it stays inside its word).
// Matching tokenizers id for id means using the same cut-off.
bool AssignedByUnicode8(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] >= 1 && age[0] <= 8;
}

bool IsBertPunctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) ||
           (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  }
  return IsPunctuation(c) && AssignedByUnicode8(c);
}

bool IsOther(char32_t c) {
  // Cc, Cf, Co, Cs as the Hugging Face BERT normalizer counts them: code
  // points not assigned (Cn), or assigned after Unicode 8.0, are kept (they
  // become [UNK]), not dropped.
  const int8_t t = u_charType(static_cast<UChar32>(c));
  if (t == U_FORMAT_CHAR) return AssignedByUnicode8(c);
  return t == U_CONTROL_CHAR || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE;
}

bool IsMarkNonspacing(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

bool IsMark(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_ENCLOSING_MARK;
}

bool IsWordChar(char32_t c) { return c == '_' || IsAlphanumeric(c); }

bool IsChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace tokenizer_internal
}  // namespace inferd
