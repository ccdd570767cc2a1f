#include "runtime/tokenizer/normalizers.h"

#include <unicode/brkiter.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/regex.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

using Change = NormalizedString::Change;

// Appends the changes that replace `old_count` old characters by `new_part`
// (the convention: characters map 1:1, extra ones are insertions, missing
// ones are removed by the last emitted character).
void AppendReplacement(std::vector<Change>* t, int old_count,
                       absl::string_view new_part) {
  int new_count = 0;
  for (size_t i = 0; i < new_part.size();) {
    size_t len;
    t->push_back({DecodeUtf8(new_part, i, &len), 0});
    i += len;
    ++new_count;
  }
  const int diff = new_count - old_count;
  if (diff > 0) {
    for (int k = 0; k < diff; ++k) (*t)[t->size() - 1 - k].change = 1;
  } else if (diff < 0) {
    if (!t->empty() && t->back().c != NormalizedString::kSkip) {
      t->back().change += diff;
    } else {
      t->push_back({NormalizedString::kSkip, -diff});
    }
  }
}

// Keeps the characters for which `keep` is true, mapping kept ones through
// `map`.
template <typename Keep, typename Map>
void FilterMap(NormalizedString* s, Keep keep, Map map) {
  // Fast path: nothing removed and every mapping keeps the byte length, so
  // the alignments stay as they are.
  {
    std::string* str = s->mutable_same_length();
    bool simple = true;
    for (size_t i = 0; i < str->size() && simple;) {
      size_t len;
      const char32_t c = DecodeUtf8(*str, i, &len);
      if (!keep(c)) simple = false;
      const char32_t m = map(c);
      if (m != c && EncodeUtf8(m).size() != len) simple = false;
      i += len;
    }
    if (simple) {
      for (size_t i = 0; i < str->size();) {
        size_t len;
        const char32_t c = DecodeUtf8(*str, i, &len);
        const char32_t m = map(c);
        if (m != c) {
          const std::string enc = EncodeUtf8(m);
          str->replace(i, len, enc);
        }
        i += len;
      }
      return;
    }
  }
  const std::string& str = s->get();
  std::vector<Change> t;
  t.reserve(str.size());
  int leading_removed = 0;
  bool any_kept = false;
  for (size_t i = 0; i < str.size();) {
    size_t len;
    const char32_t c = DecodeUtf8(str, i, &len);
    i += len;
    if (keep(c)) {
      t.push_back({map(c), 0});
      any_kept = true;
    } else if (any_kept) {
      t.back().change -= 1;
    } else {
      ++leading_removed;
    }
  }
  if (leading_removed > 0)
    t.insert(t.begin(), {NormalizedString::kSkip, leading_removed});
  s->TransformAll(t);
}

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(const icu::Normalizer2* norm) : norm_(norm) {}
  void Normalize(NormalizedString* s) const override {
    UErrorCode err = U_ZERO_ERROR;
    const std::string& str = s->get();
    if (norm_->isNormalizedUTF8(str, err) && U_SUCCESS(err)) return;
    std::vector<Change> t;
    t.reserve(str.size() + 8);
    size_t chunk_start = 0;
    auto flush = [&](size_t chunk_end) {
      if (chunk_end <= chunk_start) return;
      const absl::string_view chunk(str.data() + chunk_start,
                                    chunk_end - chunk_start);
      if (chunk.size() == 1 && static_cast<unsigned char>(chunk[0]) < 0x80) {
        // A lone ASCII character is normalized in every form.
        t.push_back({static_cast<char32_t>(chunk[0]), 0});
        return;
      }
      const int old_count = static_cast<int>(CountChars(chunk));
      UErrorCode e = U_ZERO_ERROR;
      icu::UnicodeString in = icu::UnicodeString::fromUTF8(
          icu::StringPiece(chunk.data(), static_cast<int32_t>(chunk.size())));
      icu::UnicodeString out = norm_->normalize(in, e);
      std::string utf8;
      if (U_FAILURE(e)) {
        utf8.assign(chunk.data(), chunk.size());
      } else {
        out.toUTF8String(utf8);
      }
      AppendReplacement(&t, old_count, utf8);
    };
    for (size_t i = 0; i < str.size();) {
      size_t len;
      const char32_t c = DecodeUtf8(str, i, &len);
      if (i > chunk_start &&
          norm_->hasBoundaryBefore(static_cast<UChar32>(c))) {
        flush(i);
        chunk_start = i;
      }
      i += len;
    }
    flush(str.size());
    s->TransformAll(t);
  }

 private:
  const icu::Normalizer2* norm_;  // Owned by ICU.
};

absl::StatusOr<const icu::Normalizer2*> GetIcuNormalizer(const std::string& t) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (t == "NFC") n = icu::Normalizer2::getNFCInstance(err);
  if (t == "NFD") n = icu::Normalizer2::getNFDInstance(err);
  if (t == "NFKC") n = icu::Normalizer2::getNFKCInstance(err);
  if (t == "NFKD") n = icu::Normalizer2::getNFKDInstance(err);
  if (n == nullptr || U_FAILURE(err)) {
    return absl::InternalError(
        absl::StrCat("ICU normalizer ", t, " unavailable: ", u_errorName(err)));
  }
  return n;
}

// Full lowercase mapping of one character (may yield several).
void LowercaseChar(char32_t c, std::vector<Change>* t) {
  if (c < 0x80) {
    t->push_back({(c >= 'A' && c <= 'Z') ? c + 32 : c, 0});
    return;
  }
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(c));
  UChar dst[16];
  UErrorCode err = U_ZERO_ERROR;
  const int32_t n = u_strToLower(dst, 16, src, src_len, "", &err);
  if (U_FAILURE(err) || n <= 0) {
    t->push_back({c, 0});
    return;
  }
  int32_t i = 0;
  bool first = true;
  while (i < n) {
    UChar32 out;
    U16_NEXT(dst, i, n, out);
    t->push_back({static_cast<char32_t>(out), first ? 0 : 1});
    first = false;
  }
}

void Lowercase(NormalizedString* s) {
  const std::string& str = s->get();
  bool ascii = true;
  for (unsigned char c : str) ascii = ascii && c < 0x80;
  if (ascii) {  // Same-length edits only.
    for (char& c : *s->mutable_same_length()) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return;
  }
  std::vector<Change> t;
  t.reserve(str.size());
  for (size_t i = 0; i < str.size();) {
    size_t len;
    LowercaseChar(DecodeUtf8(str, i, &len), &t);
    i += len;
  }
  s->TransformAll(t);
}

class LowercaseNormalizer : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override { Lowercase(s); }
};

void StripWhitespace(NormalizedString* s, bool left, bool right) {
  const std::string& str = s->get();
  std::vector<char32_t> chars;
  for (size_t i = 0; i < str.size();) {
    size_t len;
    chars.push_back(DecodeUtf8(str, i, &len));
    i += len;
  }
  size_t lead = 0, trail = 0;
  if (left) {
    while (lead < chars.size() && IsWhitespace(chars[lead])) ++lead;
  }
  if (right) {
    while (trail < chars.size() - lead &&
           IsWhitespace(chars[chars.size() - 1 - trail])) {
      ++trail;
    }
  }
  if (lead == 0 && trail == 0) return;
  std::vector<Change> t;
  if (lead > 0) t.push_back({NormalizedString::kSkip, static_cast<int>(lead)});
  for (size_t i = lead; i < chars.size() - trail; ++i)
    t.push_back({chars[i], 0});
  if (trail > 0)
    t.push_back({NormalizedString::kSkip, static_cast<int>(trail)});
  s->TransformAll(t);
}

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(NormalizedString* s) const override {
    StripWhitespace(s, left_, right_);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override {
    FilterMap(
        s, [](char32_t c) { return !IsMark(c); }, [](char32_t c) { return c; });
  }
};

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents,
                 bool lowercase, const icu::Normalizer2* nfd)
      : clean_text_(clean_text),
        chinese_(chinese),
        strip_accents_(strip_accents),
        lowercase_(lowercase),
        nfd_(nfd) {}
  void Normalize(NormalizedString* s) const override {
    if (NormalizeAscii(s)) return;
    if (clean_text_) {
      FilterMap(
          s,
          [](char32_t c) {
            if (c == 0 || c == 0xFFFD) return false;
            if (c == '\t' || c == '\n' || c == '\r') return true;
            return !IsOther(c);
          },
          [](char32_t c) { return IsWhitespace(c) ? char32_t(' ') : c; });
    }
    if (chinese_ && HasChineseChar(s->get())) {
      const std::string& str = s->get();
      bool any = false;
      std::vector<Change> t;
      t.reserve(str.size());
      for (size_t i = 0; i < str.size();) {
        size_t len;
        const char32_t c = DecodeUtf8(str, i, &len);
        i += len;
        if (IsChineseChar(c)) {
          t.push_back({' ', 0});
          t.push_back({c, 1});
          t.push_back({' ', 1});
          any = true;
        } else {
          t.push_back({c, 0});
        }
      }
      if (any) s->TransformAll(t);
    }
    if (strip_accents_) {
      UnicodeNormalizer(nfd_).Normalize(s);
      FilterMap(
          s, [](char32_t c) { return !IsMarkNonspacing(c); },
          [](char32_t c) { return c; });
    }
    if (lowercase_) Lowercase(s);
  }

 private:
  static bool HasChineseChar(const std::string& str) {
    for (size_t i = 0; i < str.size();) {
      if (static_cast<unsigned char>(str[i]) < 0x80) {
        ++i;
        continue;
      }
      size_t len;
      if (IsChineseChar(DecodeUtf8(str, i, &len))) return true;
      i += len;
    }
    return false;
  }

  // All steps in one in-place pass when the text is ASCII and has no control
  // character to remove: there are no Chinese characters or accents then,
  // and cleaning and lowercasing keep every byte's alignment. False (nothing
  // done) otherwise.
  bool NormalizeAscii(NormalizedString* s) const {
    const std::string& str = s->get();
    for (unsigned char c : str) {
      if (c >= 0x80) return false;
      if (clean_text_ &&
          (c == 0x7F || (c < 0x20 && c != '\t' && c != '\n' && c != '\r'))) {
        return false;
      }
    }
    for (char& c : *s->mutable_same_length()) {
      if (clean_text_ && (c == '\t' || c == '\n' || c == '\r')) c = ' ';
      if (lowercase_ && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return true;
  }

  bool clean_text_, chinese_, strip_accents_, lowercase_;
  const icu::Normalizer2* nfd_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Normalize(NormalizedString* s) const override {
    std::vector<Range> matches;
    pattern_->FindMatches(s->get(), &matches);
    s->ReplaceRanges(matches, content_);
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend)
      : prepend_(std::move(prepend)) {}
  void Normalize(NormalizedString* s) const override {
    if (!s->empty()) s->Prepend(prepend_);
  }

 private:
  std::string prepend_;
};

class NmtNormalizer : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override {
    FilterMap(
        s,
        [](char32_t c) {
          return !((c >= 0x0001 && c <= 0x0008) || c == 0x000B ||
                   (c >= 0x000E && c <= 0x001F) || c == 0x007F || c == 0x008F ||
                   c == 0x009F);
        },
        [](char32_t c) {
          const bool to_space =
              c == 0x0009 || c == 0x000A || c == 0x000C || c == 0x000D ||
              c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
              c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
          return to_space ? char32_t(' ') : c;
        });
  }
};

class ByteLevelNormalizer : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override {
    const ByteLevelTables& tables = GetByteLevelTables();
    const std::string& str = s->get();
    std::vector<Change> t;
    t.reserve(str.size());
    for (size_t i = 0; i < str.size();) {
      const size_t len = Utf8CharLen(static_cast<unsigned char>(str[i]));
      for (size_t k = 0; k < len && i + k < str.size(); ++k) {
        t.push_back(
            {tables.byte_to_char[static_cast<unsigned char>(str[i + k])],
             k > 0 ? 1 : 0});
      }
      i += len;
    }
    s->TransformAll(t);
  }
};

// SentencePiece's precompiled character map: a darts-clone double-array trie
// over UTF-8 byte strings whose values index NUL-terminated replacements.
class PrecompiledNormalizer : public Normalizer {
 public:
  static absl::StatusOr<std::unique_ptr<PrecompiledNormalizer>> Create(
      const std::string& base64) {
    std::string blob;
    if (!absl::Base64Unescape(base64, &blob) || blob.size() < 4) {
      return absl::InvalidArgumentError(
          "tokenizer.json: Precompiled normalizer has an invalid charsmap");
    }
    uint32_t trie_size;
    std::memcpy(&trie_size, blob.data(), 4);
    if (trie_size % 4 != 0 || trie_size > blob.size() - 4) {
      return absl::InvalidArgumentError(
          "tokenizer.json: Precompiled charsmap trie size out of range");
    }
    auto n =
        std::unique_ptr<PrecompiledNormalizer>(new PrecompiledNormalizer());
    n->units_.resize(trie_size / 4);
    std::memcpy(n->units_.data(), blob.data() + 4, trie_size);
    n->normalized_ = blob.substr(4 + trie_size);
    UErrorCode err = U_ZERO_ERROR;
    n->break_iterator_.reset(icu::BreakIterator::createCharacterInstance(
        icu::Locale::getRoot(), err));
    if (U_FAILURE(err)) {
      return absl::InternalError("ICU character break iterator unavailable");
    }
    for (int b = 0; b < 0x80; ++b) {
      const char c = static_cast<char>(b);
      n->ascii_mapped_[b] =
          n->Lookup(absl::string_view(&c, 1), &n->ascii_replacement_[b]);
    }
    return n;
  }

  void Normalize(NormalizedString* s) const override {
    if (NormalizeAscii(s)) return;
    const std::string str = s->get();
    if (str.empty()) return;
    std::vector<Change> t;
    t.reserve(str.size());
    bool modified = false;
    UErrorCode err = U_ZERO_ERROR;
    std::unique_ptr<icu::BreakIterator> it(break_iterator_->clone());
    UText* ut = utext_openUTF8(nullptr, str.data(),
                               static_cast<int64_t>(str.size()), &err);
    if (U_FAILURE(err) || it == nullptr) return;
    it->setText(ut, err);
    int32_t start = it->first();
    for (int32_t end = it->next(); end != icu::BreakIterator::DONE;
         start = end, end = it->next()) {
      const absl::string_view grapheme(str.data() + start, end - start);
      absl::string_view norm;
      if (grapheme.size() < 6 && Lookup(grapheme, &norm)) {
        modified = true;
        AppendReplacement(&t, static_cast<int>(CountChars(grapheme)), norm);
        continue;
      }
      for (size_t i = 0; i < grapheme.size();) {
        size_t len;
        const char32_t c = DecodeUtf8(grapheme, i, &len);
        if (Lookup(grapheme.substr(i, len), &norm)) {
          modified = true;
          AppendReplacement(&t, 1, norm);
        } else {
          t.push_back({c, 0});
        }
        i += len;
      }
    }
    utext_close(ut);
    if (modified) s->TransformAll(t);
  }

 private:
  PrecompiledNormalizer() = default;

  // When the text is ASCII without CR LF, every character is a grapheme of
  // its own and is mapped alone: done here without the break iterator.
  // False (nothing done) otherwise.
  bool NormalizeAscii(NormalizedString* s) const {
    const std::string& str = s->get();
    unsigned char prev = 0;
    bool modified = false;
    for (unsigned char c : str) {
      if (c >= 0x80 || (prev == '\r' && c == '\n')) return false;
      modified = modified || ascii_mapped_[c];
      prev = c;
    }
    if (!modified) return true;
    std::vector<Change> t;
    t.reserve(str.size());
    for (unsigned char c : str) {
      if (ascii_mapped_[c]) {
        AppendReplacement(&t, 1, ascii_replacement_[c]);
      } else {
        t.push_back({c, 0});
      }
    }
    s->TransformAll(t);
    return true;
  }

  // First (shortest) prefix of `key` in the trie, as SentencePiece's
  // normalizer consumes it for one unit.
  bool Lookup(absl::string_view key, absl::string_view* out) const {
    if (units_.empty()) return false;
    auto has_leaf = [](uint32_t u) { return ((u >> 8) & 1) != 0; };
    auto value = [](uint32_t u) { return u & ((1u << 31) - 1); };
    auto label = [](uint32_t u) { return u & ((1u << 31) | 0xFF); };
    auto offset = [](uint32_t u) {
      return (u >> 10) << ((u & (1u << 9)) >> 6);
    };
    size_t node = 0;
    uint32_t unit = units_[node];
    node ^= offset(unit);
    for (unsigned char c : key) {
      node ^= c;
      if (node >= units_.size()) return false;
      unit = units_[node];
      if (label(unit) != c) return false;
      node ^= offset(unit);
      if (node >= units_.size()) return false;
      if (has_leaf(unit)) {
        const uint32_t index = value(units_[node]);
        if (index >= normalized_.size()) return false;
        const size_t end = normalized_.find('\0', index);
        *out = absl::string_view(normalized_)
                   .substr(index, (end == std::string::npos ? normalized_.size()
                                                            : end) -
                                      index);
        return true;
      }
    }
    return false;
  }

  std::vector<uint32_t> units_;
  std::string normalized_;
  std::unique_ptr<icu::BreakIterator> break_iterator_;  // Cloned per use.
  // Whether the map has an entry for an ASCII character, and the entry
  // (pointing into normalized_).
  bool ascii_mapped_[0x80] = {};
  absl::string_view ascii_replacement_[0x80];
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void Normalize(NormalizedString* s) const override {
    for (const auto& p : parts_) p->Normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Pattern>> MakePattern(const Json& j);

absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: normalizer must be an object");
  }
  const std::string type = TypeOf(j);
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    ASSIGN_OR_RETURN(const icu::Normalizer2* n, GetIcuNormalizer(type));
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(n));
  }
  if (type == "Lowercase")
    return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(new StripNormalizer(
        GetBool(j, "strip_left", true), GetBool(j, "strip_right", true)));
  }
  if (type == "StripAccents") {
    return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  }
  if (type == "BertNormalizer") {
    const bool lowercase = GetBool(j, "lowercase", true);
    const bool strip_accents = GetBool(j, "strip_accents", lowercase);
    ASSIGN_OR_RETURN(const icu::Normalizer2* nfd, GetIcuNormalizer("NFD"));
    return std::unique_ptr<Normalizer>(
        new BertNormalizer(GetBool(j, "clean_text", true),
                           GetBool(j, "handle_chinese_chars", true),
                           strip_accents, lowercase, nfd));
  }
  if (type == "Replace") {
    if (!Has(j, "pattern")) {
      return absl::InvalidArgumentError(
          "tokenizer.json: Replace needs a pattern");
    }
    ASSIGN_OR_RETURN(auto pattern, MakePattern(j.at("pattern")));
    return std::unique_ptr<Normalizer>(
        new ReplaceNormalizer(std::move(pattern), GetString(j, "content")));
  }
  if (type == "Prepend") {
    return std::unique_ptr<Normalizer>(
        new PrependNormalizer(GetString(j, "prepend")));
  }
  if (type == "Precompiled") {
    ASSIGN_OR_RETURN(auto n, PrecompiledNormalizer::Create(
                                 GetString(j, "precompiled_charsmap")));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Nmt") return std::unique_ptr<Normalizer>(new NmtNormalizer());
  if (type == "ByteLevel")
    return std::unique_ptr<Normalizer>(new ByteLevelNormalizer());
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    if (Has(j, "normalizers")) {
      for (const Json& sub : j.at("normalizers")) {
        ASSIGN_OR_RETURN(auto p, MakeNormalizer(sub));
        parts.push_back(std::move(p));
      }
    }
    return std::unique_ptr<Normalizer>(
        new SequenceNormalizer(std::move(parts)));
  }
  return UnknownType("normalizer", type);
}

// {"String": "..."} or {"Regex": "..."}.
absl::StatusOr<std::unique_ptr<Pattern>> MakePattern(const Json& j) {
  if (j.is_object() && j.contains("String")) {
    return std::unique_ptr<Pattern>(
        new LiteralPattern(j.at("String").get<std::string>()));
  }
  if (j.is_object() && j.contains("Regex")) {
    return CompileRegexPattern(j.at("Regex").get<std::string>());
  }
  if (j.is_string()) {
    return std::unique_ptr<Pattern>(new LiteralPattern(j.get<std::string>()));
  }
  return absl::InvalidArgumentError(
      "tokenizer.json: pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace tokenizer_internal
}  // namespace inferd
