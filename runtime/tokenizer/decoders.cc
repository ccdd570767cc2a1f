#include "runtime/tokenizer/decoders.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_replace.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/regex.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {

absl::StatusOr<std::unique_ptr<Pattern>> MakePattern(const Json& j);

namespace {

std::vector<char32_t> ToChars(absl::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    out.push_back(DecodeUtf8(s, i, &len));
    i += len;
  }
  return out;
}

std::string FromChars(const std::vector<char32_t>& chars, size_t b, size_t e) {
  std::string out;
  for (size_t i = b; i < e; ++i) AppendUtf8(chars[i], &out);
  return out;
}

class ByteLevelDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    const ByteLevelTables& t = GetByteLevelTables();
    std::string bytes;
    for (const std::string& tok : *tokens) {
      const size_t before = bytes.size();
      bool all = true;
      for (size_t i = 0; i < tok.size();) {
        size_t len;
        const char32_t c = DecodeUtf8(tok, i, &len);
        i += len;
        if (c >= t.char_to_byte.size() || t.char_to_byte[c] < 0) {
          all = false;
          break;
        }
        bytes.push_back(static_cast<char>(t.char_to_byte[c]));
      }
      if (!all) {
        bytes.resize(before);
        bytes.append(tok);
      }
    }
    tokens->assign(1, Utf8Lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first)
      : replacement_(replacement), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& tok = (*tokens)[i];
      std::string out;
      out.reserve(tok.size());
      for (size_t p = 0; p < tok.size();) {
        size_t len;
        const char32_t c = DecodeUtf8(tok, p, &len);
        if (c == replacement_) {
          if (!(i == 0 && strip_first_)) out.push_back(' ');
        } else {
          out.append(tok, p, len);
        }
        p += len;
      }
      tok = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& tok = (*tokens)[i];
      if (i != 0) {
        if (!prefix_.empty() && tok.compare(0, prefix_.size(), prefix_) == 0) {
          tok.erase(0, prefix_.size());
        } else {
          tok.insert(0, " ");
        }
      }
      if (cleanup_) tok = Cleanup(tok);
    }
  }

  static std::string Cleanup(const std::string& s) {
    std::string out = s;
    // Applied one after the other, in this order, like the reference.
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& r : kRules)
      out = absl::StrReplaceAll(out, {{r.first, r.second}});
    return out;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens->size(); ++i) {
      (*tokens)[i] = absl::StrReplaceAll(
          (*tokens)[i], {{suffix_, i + 1 == tokens->size() ? "" : " "}});
    }
  }

 private:
  std::string suffix_;
};

class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens->size());
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&]() {
      if (pending_count == 0) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_count; ++k)
          out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& tok : *tokens) {
      int byte = ParseByte(tok);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(tok));
      }
    }
    flush();
    *tokens = std::move(out);
  }

  // "<0xAB>" -> 0xAB, else -1.
  static int ParseByte(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; ++i) {
      const char c = t[i];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else {
        return -1;
      }
    }
    return v;
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& t : *tokens) all += t;
    tokens->assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& tok : *tokens) {
      const std::vector<char32_t> chars = ToChars(tok);
      size_t b = 0;
      while (b < start_ && b < chars.size() && chars[b] == content_) ++b;
      size_t e = chars.size();
      for (size_t k = 0; k < stop_ && e > b && chars[e - 1] == content_; ++k)
        --e;
      tok = FromChars(chars, b, e);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<Range> matches;
    for (std::string& tok : *tokens) {
      matches.clear();
      pattern_->FindMatches(tok, &matches);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (const Range& m : matches) {
        out.append(tok, prev, m.first - prev);
        out.append(content_);
        prev = m.second;
      }
      out.append(tok, prev, std::string::npos);
      tok = std::move(out);
    }
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

class CtcDecoder : public Decoder {
 public:
  CtcDecoder(std::string pad, std::string delimiter, bool cleanup)
      : pad_(std::move(pad)),
        delimiter_(std::move(delimiter)),
        cleanup_(cleanup) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < tokens->size(); ++i) {
      if (i > 0 && (*tokens)[i] == (*tokens)[i - 1]) continue;
      std::string t = (*tokens)[i];
      if (t == pad_) continue;
      if (cleanup_) {
        t = WordPieceDecoder::Cleanup(t);
        t = absl::StrReplaceAll(t, {{delimiter_, " "}});
      }
      if (!t.empty()) out.push_back(std::move(t));
    }
    *tokens = std::move(out);
  }

 private:
  std::string pad_, delimiter_;
  bool cleanup_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

absl::StatusOr<char32_t> SingleChar(const std::string& s, const char* what) {
  if (s.empty() || !IsValidUtf8(s) || CountChars(s) != 1) {
    return absl::InvalidArgumentError(std::string("tokenizer.json: ") + what +
                                      " must be a single character");
  }
  size_t len;
  return DecodeUtf8(s, 0, &len);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: decoder must be an object");
  }
  const std::string type = TypeOf(j);
  if (type == "ByteLevel")
    return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (type == "Metaspace") {
    ASSIGN_OR_RETURN(char32_t rep,
                     SingleChar(GetString(j, "replacement", "\xE2\x96\x81"),
                                "Metaspace replacement"));
    bool strip_first = GetBool(j, "add_prefix_space", true);
    const std::string scheme = GetString(j, "prepend_scheme");
    if (!scheme.empty()) strip_first = scheme != "never";
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(rep, strip_first));
  }
  if (type == "WordPiece") {
    return std::unique_ptr<Decoder>(new WordPieceDecoder(
        GetString(j, "prefix", "##"), GetBool(j, "cleanup", true)));
  }
  if (type == "BPEDecoder") {
    return std::unique_ptr<Decoder>(
        new BpeDecoder(GetString(j, "suffix", "</w>")));
  }
  if (type == "ByteFallback")
    return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "Strip") {
    ASSIGN_OR_RETURN(char32_t c,
                     SingleChar(GetString(j, "content", " "), "Strip content"));
    return std::unique_ptr<Decoder>(
        new StripDecoder(c, static_cast<size_t>(GetInt(j, "start", 0)),
                         static_cast<size_t>(GetInt(j, "stop", 0))));
  }
  if (type == "Replace") {
    if (!Has(j, "pattern")) {
      return absl::InvalidArgumentError(
          "tokenizer.json: Replace needs a pattern");
    }
    ASSIGN_OR_RETURN(auto pattern, MakePattern(j.at("pattern")));
    return std::unique_ptr<Decoder>(
        new ReplaceDecoder(std::move(pattern), GetString(j, "content")));
  }
  if (type == "CTC") {
    return std::unique_ptr<Decoder>(
        new CtcDecoder(GetString(j, "pad_token", "<pad>"),
                       GetString(j, "word_delimiter_token", "|"),
                       GetBool(j, "cleanup", true)));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    if (Has(j, "decoders")) {
      for (const Json& sub : j.at("decoders")) {
        ASSIGN_OR_RETURN(auto p, MakeDecoder(sub));
        parts.push_back(std::move(p));
      }
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(parts)));
  }
  return UnknownType("decoder", type);
}

}  // namespace tokenizer_internal
}  // namespace inferd
