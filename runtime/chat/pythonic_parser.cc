// The `pythonic` tool-call format (Llama 3.2, Llama 4, ToolACE): the whole
// output is a Python list of calls with keyword arguments,
// [f(a=1, b="x"), g()], optionally after <|python_start|> (Llama 4, closed
// by <|python_end|>) or <|python_tag|>. Argument values are Python
// literals, written out as JSON. Not thread-safe: one parser per sample.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/tool_parser.h"

namespace inferd {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::string_view kStartMarkers[] = {"<|python_start|>",
                                               "<|python_tag|>"};
constexpr absl::string_view kEndMarker = "<|python_end|>";

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsIdentChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }
// Tool names may hold '.' and '-' too (OpenAI's [A-Za-z0-9_.-]).
bool IsToolNameChar(char c) { return IsIdentChar(c) || c == '.' || c == '-'; }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// What reading a piece of text that is still arriving found.
enum class Read {
  kOk,    // the thing is whole; no later text changes it
  kMore,  // the text ended before it did
  kFail,  // not the thing, whatever follows
};

// Whether `text` starts with `marker`, or may once more text comes.
Read StartsWithMarker(absl::string_view text, absl::string_view marker) {
  if (absl::StartsWith(text, marker)) return Read::kOk;
  return absl::StartsWith(marker, text) ? Read::kMore : Read::kFail;
}

void AppendUtf8(uint32_t cp, std::string* s) {
  if (cp < 0x80) {
    *s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *s += static_cast<char>(0xC0 | cp >> 6);
    *s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *s += static_cast<char>(0xE0 | cp >> 12);
    *s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    *s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *s += static_cast<char>(0xF0 | cp >> 18);
    *s += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    *s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    *s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The surrogate code point whose 3-byte form (ED A0..BF xx) is at s[i],
// else 0.
uint32_t SurrogateAt(absl::string_view s, size_t i) {
  if (i + 3 > s.size() || static_cast<uint8_t>(s[i]) != 0xED ||
      (static_cast<uint8_t>(s[i + 1]) & 0xE0) != 0xA0) {
    return 0;
  }
  return 0xD000 | (static_cast<uint8_t>(s[i + 1]) & 0x3F) << 6 |
         (static_cast<uint8_t>(s[i + 2]) & 0x3F);
}

// Python keeps "\ud83d\ude00" as two code points; json.dumps writes them
// as two escapes that JSON readers join into one (U+1F600). Here they are
// joined; a lone surrogate, which UTF-8 cannot hold, becomes U+FFFD.
std::string PairSurrogates(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const uint32_t hi = SurrogateAt(s, i);
    if (hi == 0) {
      out += s[i++];
      continue;
    }
    const uint32_t lo = SurrogateAt(s, i + 3);
    if (hi < 0xDC00 && lo >= 0xDC00) {
      AppendUtf8(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), &out);
      i += 6;
    } else {
      AppendUtf8(0xFFFD, &out);
      i += 3;
    }
  }
  return out;
}

// Python literals as JSON values: str, int, float, True/False/None, lists
// and tuples (arrays), dicts with str keys. A value that reaches the end of
// the text is kMore, since more text could still extend or close it ("1" ->
// "12", "Tru" -> "True").
class LiteralReader {
 public:
  LiteralReader(absl::string_view text, size_t pos) : text_(text), pos_(pos) {}

  // Where the value read ends.
  size_t pos() const { return pos_; }

  Read Value(Json* out, int depth = 0) {
    if (!SkipWs()) return Read::kMore;
    if (depth > kMaxDepth) return Read::kFail;
    const char c = text_[pos_];
    if (c == '"' || c == '\'') {
      std::string s;
      const Read r = String(&s);
      if (r == Read::kOk) *out = std::move(s);
      return r;
    }
    if (c == '[' || c == '(') return Sequence(out, depth);
    if (c == '{') return Dict(out, depth);
    if (IsDigit(c) || c == '-' || c == '+' || c == '.') return Number(out);
    if (IsIdentStart(c)) return Constant(out);
    return Read::kFail;
  }

 private:
  // Deeper nesting is no tool argument (and would cost stack).
  static constexpr int kMaxDepth = 64;

  // Whether a character follows the whitespace at pos_.
  bool SkipWs() {
    while (pos_ < text_.size() && IsWs(text_[pos_])) ++pos_;
    return pos_ < text_.size();
  }

  // '...', "...", '''...''' or """...""", with Python's escapes.
  Read String(std::string* out) {
    const char quote = text_[pos_];
    const std::string triple(3, quote);
    const absl::string_view start = text_.substr(pos_, 3);
    if (start.size() < 3 && absl::StartsWith(triple, start)) {
      return Read::kMore;  // '' may be empty or open '''
    }
    const bool is_triple = start == triple;
    size_t p = pos_ + (is_triple ? 3 : 1);
    std::string s;
    bool surrogates = false;
    while (true) {
      if (p >= text_.size()) return Read::kMore;
      const char c = text_[p];
      if (c == quote) {
        if (!is_triple) {
          ++p;
          break;
        }
        const absl::string_view end = text_.substr(p, 3);
        if (end == triple) {
          p += 3;
          break;
        }
        if (end.size() < 3 && absl::StartsWith(triple, end)) {
          return Read::kMore;
        }
      } else if (c == '\\') {
        const Read r = Escape(&p, &s, &surrogates);
        if (r != Read::kOk) return r;
        continue;
      } else if (c == '\n' && !is_triple) {
        return Read::kFail;
      }
      s += c;
      ++p;
    }
    pos_ = p;
    *out = surrogates ? PairSurrogates(s) : std::move(s);
    return Read::kOk;
  }

  // The escape at text_[*p] (a backslash), appended to *s.
  Read Escape(size_t* p, std::string* s, bool* surrogates) {
    if (*p + 1 >= text_.size()) return Read::kMore;
    const char e = text_[*p + 1];
    *p += 2;
    int hex_digits = 0;
    switch (e) {
      case 'n':
        *s += '\n';
        return Read::kOk;
      case 't':
        *s += '\t';
        return Read::kOk;
      case 'r':
        *s += '\r';
        return Read::kOk;
      case 'b':
        *s += '\b';
        return Read::kOk;
      case 'f':
        *s += '\f';
        return Read::kOk;
      case 'v':
        *s += '\v';
        return Read::kOk;
      case 'a':
        *s += '\a';
        return Read::kOk;
      case '\\':
      case '\'':
      case '"':
        *s += e;
        return Read::kOk;
      case '\n':  // a line continuation
        return Read::kOk;
      case 'x':
        hex_digits = 2;
        break;
      case 'u':
        hex_digits = 4;
        break;
      case 'U':
        hex_digits = 8;
        break;
      default:
        if (e >= '0' && e <= '7') {  // octal, up to 3 digits
          uint32_t cp = e - '0';
          for (int i = 1; i < 3; ++i, ++*p) {
            if (*p >= text_.size()) return Read::kMore;
            if (text_[*p] < '0' || text_[*p] > '7') break;
            cp = cp * 8 + (text_[*p] - '0');
          }
          AppendUtf8(cp, s);
          return Read::kOk;
        }
        // Python keeps an unknown escape as written.
        *s += '\\';
        *s += e;
        return Read::kOk;
    }
    uint32_t cp = 0;
    for (int i = 0; i < hex_digits; ++i, ++*p) {
      if (*p >= text_.size()) return Read::kMore;
      const int d = HexDigit(text_[*p]);
      if (d < 0) return Read::kFail;
      cp = cp << 4 | d;
    }
    if (cp > 0x10FFFF) return Read::kFail;
    if (cp >= 0xD800 && cp <= 0xDFFF) *surrogates = true;
    AppendUtf8(cp, s);
    return Read::kOk;
  }

  // An int or a float, signed: 42, -7, 3.14, .5, 5., 1e-3.
  Read Number(Json* out) {
    const size_t size = text_.size();
    size_t p = pos_;
    auto digits = [&] {
      const size_t from = p;
      while (p < size && IsDigit(text_[p])) ++p;
      return p - from;
    };
    if (text_[p] == '-' || text_[p] == '+') ++p;
    size_t mantissa_digits = digits();
    bool is_float = false;
    if (p < size && text_[p] == '.') {
      is_float = true;
      ++p;
      mantissa_digits += digits();
    }
    if (p < size && mantissa_digits == 0) return Read::kFail;
    if (p < size && (text_[p] == 'e' || text_[p] == 'E')) {
      is_float = true;
      ++p;
      if (p < size && (text_[p] == '-' || text_[p] == '+')) ++p;
      if (digits() == 0 && p < size) return Read::kFail;
    }
    if (p >= size) return Read::kMore;
    absl::string_view number = text_.substr(pos_, p - pos_);
    if (number[0] == '+') number.remove_prefix(1);
    pos_ = p;
    if (!is_float) {
      int64_t i;
      uint64_t u;
      if (absl::SimpleAtoi(number, &i)) {
        *out = i;
        return Read::kOk;
      }
      if (absl::SimpleAtoi(number, &u)) {
        *out = u;
        return Read::kOk;
      }
      // Beyond 64 bits: a double, as JSON readers would take it.
    }
    double d;
    if (!absl::SimpleAtod(number, &d)) return Read::kFail;
    *out = d;
    return Read::kOk;
  }

  // True, False or None.
  Read Constant(Json* out) {
    size_t p = pos_;
    while (p < text_.size() && IsIdentChar(text_[p])) ++p;
    const absl::string_view word = text_.substr(pos_, p - pos_);
    if (p == text_.size()) {
      for (absl::string_view name : {"True", "False", "None"}) {
        if (absl::StartsWith(name, word)) return Read::kMore;
      }
      return Read::kFail;
    }
    pos_ = p;
    if (word == "True") {
      *out = true;
    } else if (word == "False") {
      *out = false;
    } else if (word == "None") {
      *out = nullptr;
    } else {
      return Read::kFail;
    }
    return Read::kOk;
  }

  // [a, b] or (a, b): an array. (a) is a itself, (a,) a 1-tuple.
  Read Sequence(Json* out, int depth) {
    const char close = text_[pos_++] == '[' ? ']' : ')';
    Json items = Json::array();
    bool comma = false;
    while (true) {
      if (!SkipWs()) return Read::kMore;
      if (text_[pos_] == close) break;
      Json item;
      const Read r = Value(&item, depth + 1);
      if (r != Read::kOk) return r;
      items.push_back(std::move(item));
      if (!SkipWs()) return Read::kMore;
      if (text_[pos_] == close) break;
      if (text_[pos_] != ',') return Read::kFail;
      ++pos_;
      comma = true;
    }
    ++pos_;
    if (close == ')' && items.size() == 1 && !comma) {
      *out = std::move(items[0]);
    } else {
      *out = std::move(items);
    }
    return Read::kOk;
  }

  // {"k": v, ...}; a repeated key keeps its place and takes the last value,
  // as in Python.
  Read Dict(Json* out, int depth) {
    ++pos_;
    Json object = Json::object();
    while (true) {
      if (!SkipWs()) return Read::kMore;
      if (text_[pos_] == '}') break;
      if (text_[pos_] != '"' && text_[pos_] != '\'') return Read::kFail;
      std::string key;
      Read r = String(&key);
      if (r != Read::kOk) return r;
      if (!SkipWs()) return Read::kMore;
      if (text_[pos_++] != ':') return Read::kFail;
      Json value;
      r = Value(&value, depth + 1);
      if (r != Read::kOk) return r;
      object[key] = std::move(value);
      if (!SkipWs()) return Read::kMore;
      if (text_[pos_] == '}') break;
      if (text_[pos_++] != ',') return Read::kFail;
    }
    ++pos_;
    *out = std::move(object);
    return Read::kOk;
  }

  const absl::string_view text_;
  size_t pos_;
};

// A state machine over the call list. The text of an unfinished call is
// kept (buf_) until the call is whole, then given out as a tool call, or
// turns out not to be one and is given out as content unchanged. An
// argument's value is read again from its start on each Feed until it is
// whole (O(n) per piece for a value of n bytes; values are short).
class PythonicToolParser : public OutputParser {
 public:
  explicit PythonicToolParser(ToolCallIdFn ids) : ids_(std::move(ids)) {}

  ParsedDelta Feed(absl::string_view text) override {
    buf_.append(text.data(), text.size());
    ParsedDelta out;
    Run(false, &out);
    return out;
  }

  ParsedDelta Finish() override {
    ParsedDelta out;
    Run(true, &out);
    return out;
  }

  int tool_calls() const override { return calls_; }

 private:
  enum class State {
    kStart,     // whitespace, then a start marker or '[' (else content)
    kOpen,      // after a start marker: '['
    kCall,      // a call's name (or ']' after a trailing comma)
    kParen,     // '(' after the name
    kKeyword,   // an argument's name, or ')'
    kEquals,    // '=' after it
    kValue,     // its value, a Python literal
    kArgNext,   // ',' or ')'
    kCallNext,  // ',' or ']'
    kEnd,       // after ']': whitespace and <|python_end|>, then content
    kContent,   // the rest is content
  };

  void Run(bool finish, ParsedDelta* out) {
    while (state_ != State::kContent) {
      const Read r = Step(out);
      if (r == Read::kMore && !finish) return;
      // kFail, or the generation ended first: no call list (any more), and
      // the text since the last call is content.
      if (r != Read::kOk) state_ = State::kContent;
    }
    out->content += buf_;
    buf_.clear();
    pos_ = 0;
  }

  // Advances from state_: kOk when it moved on, kMore when it needs more
  // text.
  Read Step(ParsedDelta* out) {
    switch (state_) {
      case State::kStart: {
        if (!SkipWs()) return Read::kMore;
        const absl::string_view rest = absl::string_view(buf_).substr(pos_);
        if (rest[0] == '[') {
          ++pos_;
          state_ = State::kCall;
          return Read::kOk;
        }
        Read found = Read::kFail;
        for (absl::string_view marker : kStartMarkers) {
          const Read r = StartsWithMarker(rest, marker);
          if (r == Read::kOk) {
            pos_ += marker.size();
            state_ = State::kOpen;
            return Read::kOk;
          }
          if (r == Read::kMore) found = r;
        }
        return found;
      }
      case State::kOpen:
        return Expect('[', State::kCall);
      case State::kCall: {
        const bool more = SkipWs();
        if (calls_ > 0) Consume();  // a broken call is content from here
        if (!more) return Read::kMore;
        if (buf_[pos_] == ']' && calls_ > 0) {  // [f(), ]
          return Expect(']', State::kEnd);
        }
        return Name(true, &name_, State::kParen);
      }
      case State::kParen:
        args_ = Json::object();
        return Expect('(', State::kKeyword);
      case State::kKeyword:
        if (!SkipWs()) return Read::kMore;
        if (buf_[pos_] == ')') return EndCall(out);
        // A positional argument (no name) fails here.
        return Name(false, &keyword_, State::kEquals);
      case State::kEquals:
        return Expect('=', State::kValue);
      case State::kValue: {
        LiteralReader reader(buf_, pos_);
        Json value;
        const Read r = reader.Value(&value);
        if (r != Read::kOk) return r;
        // A keyword given twice is a SyntaxError in Python.
        if (args_.contains(keyword_)) return Read::kFail;
        args_[keyword_] = std::move(value);
        pos_ = reader.pos();
        state_ = State::kArgNext;
        return Read::kOk;
      }
      case State::kArgNext:
        if (!SkipWs()) return Read::kMore;
        if (buf_[pos_] == ')') return EndCall(out);
        return Expect(',', State::kKeyword);
      case State::kCallNext:
        // Whitespace and commas between calls are nobody's content; a list
        // cut short after a call (max_tokens) just ends.
        SkipWs();
        Consume();
        if (buf_.empty()) return Read::kMore;
        if (buf_[0] == ']') return Expect(']', State::kEnd);
        return Expect(',', State::kCall);
      case State::kEnd: {
        SkipWs();
        Consume();
        if (buf_.empty()) return Read::kMore;
        if (!end_marker_seen_) {
          const Read r = StartsWithMarker(buf_, kEndMarker);
          if (r == Read::kOk) {
            buf_.erase(0, kEndMarker.size());
            end_marker_seen_ = true;
          }
          if (r != Read::kFail) return r;
        }
        state_ = State::kContent;
        return Read::kOk;
      }
      case State::kContent:
        break;
    }
    return Read::kOk;
  }

  // Whether a character follows the whitespace at pos_.
  bool SkipWs() {
    while (pos_ < buf_.size() && IsWs(buf_[pos_])) ++pos_;
    return pos_ < buf_.size();
  }

  // The text before pos_ is used up: no fallback gives it back.
  void Consume() {
    buf_.erase(0, pos_);
    pos_ = 0;
  }

  // `c` after whitespace, then state `next`.
  Read Expect(char c, State next) {
    if (!SkipWs()) return Read::kMore;
    if (buf_[pos_] != c) return Read::kFail;
    ++pos_;
    state_ = next;
    return Read::kOk;
  }

  // A Python identifier (or, with `tool_name`, a tool's name) into *out,
  // then state `next`.
  Read Name(bool tool_name, std::string* out, State next) {
    if (!SkipWs()) return Read::kMore;
    if (!IsIdentStart(buf_[pos_])) return Read::kFail;
    size_t p = pos_ + 1;
    while (p < buf_.size() &&
           (tool_name ? IsToolNameChar(buf_[p]) : IsIdentChar(buf_[p]))) {
      ++p;
    }
    if (p == buf_.size()) return Read::kMore;
    out->assign(buf_, pos_, p - pos_);
    pos_ = p;
    state_ = next;
    return Read::kOk;
  }

  // The ')' of a call: the call, whole.
  Read EndCall(ParsedDelta* out) {
    ++pos_;
    Consume();
    out->tool_calls.push_back(ToolCallDelta{
        calls_++, ids_(), name_,
        args_.dump(-1, ' ', false, Json::error_handler_t::replace)});
    state_ = State::kCallNext;
    return Read::kOk;
  }

  const ToolCallIdFn ids_;
  State state_ = State::kStart;
  std::string buf_;  // text not given out yet
  size_t pos_ = 0;   // how far buf_ is read
  std::string name_;
  std::string keyword_;
  Json args_;
  bool end_marker_seen_ = false;
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<OutputParser> NewPythonicToolParser(ToolCallIdFn ids) {
  return std::make_unique<PythonicToolParser>(
      ids != nullptr ? std::move(ids) : ToolCallIdFn(RandomToolCallId));
}

}  // namespace inferd
