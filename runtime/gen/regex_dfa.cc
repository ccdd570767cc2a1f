#include "runtime/gen/regex_dfa.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

// Sorted, merged, surrogates removed.
Ranges Normalize(Ranges r) {
  Ranges split;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    if (lo < 0xD800 && hi > 0xDFFF) {
      split.push_back({lo, 0xD7FF});
      split.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      split.push_back({0xE000, hi});
    } else if (hi >= 0xD800 && hi <= 0xDFFF) {
      split.push_back({lo, 0xD7FF});
    } else {
      split.push_back({lo, hi});
    }
  }
  std::sort(split.begin(), split.end());
  Ranges out;
  for (auto [lo, hi] : split) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges n = Normalize(r);
  Ranges out;
  char32_t next = 0;
  for (auto [lo, hi] : n) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return Normalize(out);
}

// ---------------------------------------------------------------- Parser

struct Node {
  enum Kind { kEmpty, kSet, kConcat, kAlt, kRepeat };
  Kind kind = kEmpty;
  Ranges set;
  std::vector<int> kids;
  int min = 0;
  int max = 0;  // -1: unbounded
};

class Parser {
 public:
  Parser(absl::string_view pattern, const RegexLimits& limits)
      : limits_(limits) {
    pattern_ = pattern;
  }

  absl::StatusOr<int> Parse(std::vector<Node>* nodes) {
    nodes_ = nodes;
    RETURN_IF_ERROR(Decode());
    if (!cps_.empty() && cps_[0] == '^') pos_ = 1;
    ASSIGN_OR_RETURN(int root, ParseAlt(0));
    if (pos_ < cps_.size()) {
      // Only an unbalanced ')' stops the top-level alternation early.
      return Error("unbalanced ')'");
    }
    return root;
  }

 private:
  absl::Status Decode() {
    for (size_t i = 0; i < pattern_.size();) {
      const auto b = static_cast<uint8_t>(pattern_[i]);
      int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3
                         : (b >> 3) == 30    ? 4
                                             : 0;
      if (len == 0 || i + len > pattern_.size()) {
        return absl::InvalidArgumentError("the pattern is not valid UTF-8");
      }
      char32_t c = len == 1 ? b : b & (0x7F >> len);
      for (int k = 1; k < len; ++k) {
        const auto cb = static_cast<uint8_t>(pattern_[i + k]);
        if ((cb & 0xC0) != 0x80) {
          return absl::InvalidArgumentError("the pattern is not valid UTF-8");
        }
        c = (c << 6) | (cb & 0x3F);
      }
      // Overlong forms, surrogates and code points past U+10FFFF are not
      // UTF-8 either (and would compile into byte sequences no UTF-8 text
      // holds).
      static constexpr char32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
      if (c < kMinOfLength[len] || c > kMaxCodePoint ||
          (c >= 0xD800 && c <= 0xDFFF)) {
        return absl::InvalidArgumentError("the pattern is not valid UTF-8");
      }
      cps_.push_back(c);
      i += len;
    }
    return absl::OkStatus();
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at position ", pos_, " of the pattern"));
  }
  absl::Status Unsupported(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " (at position ", pos_, " of the pattern) is not supported"));
  }

  bool AtEnd() const { return pos_ >= cps_.size(); }
  char32_t Peek() const { return cps_[pos_]; }

  int Add(Node n) {
    nodes_->push_back(std::move(n));
    return static_cast<int>(nodes_->size()) - 1;
  }
  int AddSet(Ranges r) {
    Node n;
    n.kind = Node::kSet;
    if (json_safe_ > 0) {
      // Inside (?J:...): no '"', '\' or control character, so the text can
      // stand unescaped inside a JSON string.
      Ranges out;
      const Ranges forbidden = Normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
      const Ranges allowed = Complement(forbidden);
      for (auto [lo, hi] : Normalize(std::move(r))) {
        for (auto [alo, ahi] : allowed) {
          const char32_t a = std::max(lo, alo), b = std::min(hi, ahi);
          if (a <= b) out.push_back({a, b});
        }
      }
      r = std::move(out);
    }
    n.set = Normalize(std::move(r));
    return Add(std::move(n));
  }

  absl::StatusOr<int> ParseAlt(int depth) {
    if (depth > 200) return Error("groups nested too deeply");
    std::vector<int> alts;
    ASSIGN_OR_RETURN(int first, ParseConcat(depth));
    alts.push_back(first);
    while (!AtEnd() && Peek() == '|') {
      ++pos_;
      ASSIGN_OR_RETURN(int next, ParseConcat(depth));
      alts.push_back(next);
    }
    if (alts.size() == 1) return alts[0];
    Node n;
    n.kind = Node::kAlt;
    n.kids = std::move(alts);
    return Add(std::move(n));
  }

  absl::StatusOr<int> ParseConcat(int depth) {
    Node n;
    n.kind = Node::kConcat;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' && pos_ + 1 == cps_.size()) {
        ++pos_;  // end anchor: full-match semantics already
        continue;
      }
      ASSIGN_OR_RETURN(int atom, ParseRepeat(depth));
      n.kids.push_back(atom);
    }
    if (n.kids.size() == 1) return n.kids[0];
    return Add(std::move(n));
  }

  // Parses {n}, {n,}, {,m}, {n,m} at pos_ (which holds '{'); false (pos_
  // unchanged) when it is not a quantifier, so '{' is a literal.
  bool ParseBraces(int* min, int* max) {
    size_t p = pos_ + 1;
    auto number = [&](int64_t* v) {
      size_t start = p;
      *v = 0;
      while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9') {
        *v = std::min<int64_t>(*v * 10 + (cps_[p] - '0'), 1 << 30);
        ++p;
      }
      return p > start;
    };
    int64_t lo = 0, hi = -1;
    const bool has_lo = number(&lo);
    if (p < cps_.size() && cps_[p] == '}') {
      if (!has_lo) return false;
      hi = lo;
    } else if (p < cps_.size() && cps_[p] == ',') {
      ++p;
      const bool has_hi = number(&hi);
      if (!has_hi) hi = -1;
      if (p >= cps_.size() || cps_[p] != '}') return false;
    } else {
      return false;
    }
    *min = static_cast<int>(lo);
    *max = static_cast<int>(hi);
    pos_ = p + 1;
    return true;
  }

  absl::StatusOr<int> ParseRepeat(int depth) {
    ASSIGN_OR_RETURN(int atom, ParseAtom(depth));
    bool quantified = false;
    while (!AtEnd()) {
      int min = 0, max = 0;
      const char32_t c = Peek();
      if (c == '*') {
        min = 0, max = -1, ++pos_;
      } else if (c == '+') {
        min = 1, max = -1, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{' && ParseBraces(&min, &max)) {
      } else {
        break;
      }
      if (quantified) return Error("multiple repeat");
      quantified = true;
      if (max >= 0 && min > max) return Error("min repeat greater than max");
      if (min > limits_.max_repeat || max > limits_.max_repeat) {
        return absl::InvalidArgumentError(
            absl::StrCat("a repeat count above ", limits_.max_repeat,
                         " is not supported"));
      }
      if (!AtEnd() && Peek() == '?') {
        ++pos_;  // lazy: same language
      } else if (!AtEnd() && Peek() == '+') {
        return Unsupported("a possessive quantifier");
      }
      Node n;
      n.kind = Node::kRepeat;
      n.kids = {atom};
      n.min = min;
      n.max = max;
      atom = Add(std::move(n));
    }
    return atom;
  }

  static Ranges Digit() { return {{'0', '9'}}; }
  static Ranges Word() {
    return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  }
  static Ranges Space() { return {{'\t', '\r'}, {' ', ' '}}; }

  absl::StatusOr<char32_t> Hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (AtEnd()) return Error("incomplete escape");
      const char32_t c = Peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) return Error("bad hex escape");
      v = v * 16 + d;
      ++pos_;
    }
    if (v > kMaxCodePoint) return Error("escape beyond U+10FFFF");
    return v;
  }

  // After '\': the escape as a set of code points.
  absl::StatusOr<Ranges> ParseEscape(bool in_class) {
    if (AtEnd()) return Error("trailing backslash");
    const char32_t c = Peek();
    ++pos_;
    switch (c) {
      case 'd':
        return Digit();
      case 'D':
        return Complement(Digit());
      case 'w':
        return Word();
      case 'W':
        return Complement(Word());
      case 's':
        return Space();
      case 'S':
        return Complement(Space());
      case 'n':
        return Ranges{{'\n', '\n'}};
      case 't':
        return Ranges{{'\t', '\t'}};
      case 'r':
        return Ranges{{'\r', '\r'}};
      case 'f':
        return Ranges{{'\f', '\f'}};
      case 'v':
        return Ranges{{'\v', '\v'}};
      case 'a':
        return Ranges{{'\a', '\a'}};
      case '0':
        return Ranges{{0, 0}};
      case 'x': {
        ASSIGN_OR_RETURN(char32_t v, Hex(2));
        return Ranges{{v, v}};
      }
      case 'u': {
        ASSIGN_OR_RETURN(char32_t v, Hex(4));
        return Ranges{{v, v}};
      }
      case 'U': {
        ASSIGN_OR_RETURN(char32_t v, Hex(8));
        return Ranges{{v, v}};
      }
      case 'b':
        if (in_class) return Ranges{{'\b', '\b'}};
        return Unsupported("a word boundary \\b");
      case 'B':
        return Unsupported("a word boundary \\B");
      case 'A':
      case 'Z':
      case 'z':
        return Unsupported(absl::StrCat("the anchor \\", std::string(1, c)));
      default:
        break;
    }
    if (c >= '1' && c <= '9') return Unsupported("a backreference");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      --pos_;
      return Error(absl::StrCat("unknown escape \\", std::string(1, c)));
    }
    return Ranges{{c, c}};  // escaped punctuation, space or non-ASCII
  }

  absl::StatusOr<int> ParseClass() {
    // pos_ is after '['.
    bool negate = false;
    if (!AtEnd() && Peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      char32_t c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      // One endpoint: a single character, or a set from an escape.
      auto endpoint = [&](Ranges* set) -> absl::StatusOr<bool> {
        const char32_t ch = Peek();
        ++pos_;
        if (ch == '\\') {
          ASSIGN_OR_RETURN(*set, ParseEscape(/*in_class=*/true));
        } else {
          if (ch == '[' && !AtEnd() &&
              (Peek() == ':' || Peek() == '=' || Peek() == '.')) {
            return Unsupported("a POSIX class or nested set");
          }
          *set = {{ch, ch}};
        }
        return set->size() == 1 && (*set)[0].first == (*set)[0].second;
      };
      Ranges lo_set;
      ASSIGN_OR_RETURN(bool lo_single, endpoint(&lo_set));
      if (!AtEnd() && Peek() == '-' && pos_ + 1 < cps_.size() &&
          cps_[pos_ + 1] != ']') {
        ++pos_;  // '-'
        Ranges hi_set;
        ASSIGN_OR_RETURN(bool hi_single, endpoint(&hi_set));
        if (!lo_single || !hi_single) return Error("bad character range");
        if (lo_set[0].first > hi_set[0].first) {
          return Error("bad character range");
        }
        r.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        r.insert(r.end(), lo_set.begin(), lo_set.end());
      }
    }
    return AddSet(negate ? Complement(r) : r);
  }

  absl::StatusOr<int> ParseAtom(int depth) {
    const char32_t c = Peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (!AtEnd() && Peek() == '?') {
          ++pos_;
          if (AtEnd()) return Error("unterminated group");
          const char32_t k = Peek();
          if (k == ':') {
            ++pos_;
          } else if (k == 'J' && pos_ + 1 < cps_.size() &&
                     cps_[pos_ + 1] == ':') {
            pos_ += 2;
            ++json_safe_;
            absl::StatusOr<int> inner = ParseAlt(depth + 1);
            --json_safe_;
            if (!inner.ok()) return inner.status();
            if (AtEnd() || Peek() != ')') return Error("missing ')'");
            ++pos_;
            return *inner;
          } else if (k == 'P' || k == '<') {
            if (k == 'P') ++pos_;
            if (AtEnd()) return Error("unterminated group");
            if (Peek() == '=' ) return Unsupported("a named backreference");
            if (Peek() != '<') return Error("bad group");
            ++pos_;
            if (!AtEnd() && (Peek() == '=' || Peek() == '!')) {
              return Unsupported("a lookbehind assertion");
            }
            while (!AtEnd() && Peek() != '>') ++pos_;
            if (AtEnd()) return Error("unterminated group name");
            ++pos_;
          } else if (k == '=' || k == '!') {
            return Unsupported("a lookahead assertion");
          } else if (k == '#') {
            return Unsupported("a comment group");
          } else if (k == '(') {
            return Unsupported("a conditional group");
          } else {
            return Unsupported("an inline flag group");
          }
        }
        ASSIGN_OR_RETURN(int inner, ParseAlt(depth + 1));
        if (AtEnd() || Peek() != ')') return Error("missing ')'");
        ++pos_;
        return inner;
      }
      case '[':
        ++pos_;
        return ParseClass();
      case '.':
        ++pos_;
        return AddSet(Complement({{'\n', '\n'}}));
      case '\\': {
        ++pos_;
        ASSIGN_OR_RETURN(Ranges r, ParseEscape(/*in_class=*/false));
        return AddSet(std::move(r));
      }
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat");
      case '^':
        return Unsupported("'^' other than at the start");
      case '$':
        return Unsupported("'$' other than at the end");
      default:
        ++pos_;
        return AddSet({{c, c}});
    }
  }

  absl::string_view pattern_;
  const RegexLimits& limits_;
  std::vector<char32_t> cps_;
  size_t pos_ = 0;
  std::vector<Node>* nodes_ = nullptr;
  int json_safe_ = 0;  // inside (?J:...)
};

// ------------------------------------------------------- Thompson's NFA

struct NfaState {
  std::vector<int32_t> eps;
  // One byte-range edge [lo, hi] -> next, when next >= 0.
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t next = -1;
};

struct Frag {
  int32_t start;
  int32_t end;  // no outgoing edges yet
};

class NfaBuilder {
 public:
  NfaBuilder(const std::vector<Node>& nodes, const RegexLimits& limits)
      : nodes_(nodes), limits_(limits) {}

  std::vector<NfaState>& states() { return states_; }

  absl::StatusOr<Frag> Build(int node) {
    const Node& n = nodes_[node];
    switch (n.kind) {
      case Node::kEmpty: {
        ASSIGN_OR_RETURN(int32_t s, New());
        return Frag{s, s};
      }
      case Node::kSet:
        return BuildSet(n.set);
      case Node::kConcat: {
        if (n.kids.empty()) {
          ASSIGN_OR_RETURN(int32_t s, New());
          return Frag{s, s};
        }
        ASSIGN_OR_RETURN(Frag f, Build(n.kids[0]));
        for (size_t i = 1; i < n.kids.size(); ++i) {
          ASSIGN_OR_RETURN(Frag g, Build(n.kids[i]));
          states_[f.end].eps.push_back(g.start);
          f.end = g.end;
        }
        return f;
      }
      case Node::kAlt: {
        ASSIGN_OR_RETURN(int32_t s, New());
        ASSIGN_OR_RETURN(int32_t e, New());
        for (int kid : n.kids) {
          ASSIGN_OR_RETURN(Frag g, Build(kid));
          states_[s].eps.push_back(g.start);
          states_[g.end].eps.push_back(e);
        }
        return Frag{s, e};
      }
      case Node::kRepeat: {
        ASSIGN_OR_RETURN(int32_t s, New());
        int32_t end = s;
        for (int i = 0; i < n.min; ++i) {
          ASSIGN_OR_RETURN(Frag g, Build(n.kids[0]));
          states_[end].eps.push_back(g.start);
          end = g.end;
        }
        if (n.max < 0) {
          ASSIGN_OR_RETURN(Frag g, Build(n.kids[0]));
          ASSIGN_OR_RETURN(int32_t e, New());
          states_[end].eps.push_back(g.start);
          states_[end].eps.push_back(e);
          states_[g.end].eps.push_back(g.start);
          states_[g.end].eps.push_back(e);
          return Frag{s, e};
        }
        if (n.max > n.min) {
          ASSIGN_OR_RETURN(int32_t e, New());
          for (int i = n.min; i < n.max; ++i) {
            ASSIGN_OR_RETURN(Frag g, Build(n.kids[0]));
            states_[end].eps.push_back(g.start);
            states_[end].eps.push_back(e);
            end = g.end;
          }
          states_[end].eps.push_back(e);
          end = e;
        }
        return Frag{s, end};
      }
    }
    return absl::InternalError("unknown regex node");
  }

 private:
  absl::StatusOr<int32_t> New() {
    if (static_cast<int32_t>(states_.size()) >= limits_.max_nfa_states) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the pattern is too complex (more than ", limits_.max_nfa_states,
          " NFA states); use smaller repeat counts or fewer alternatives"));
    }
    states_.emplace_back();
    return static_cast<int32_t>(states_.size()) - 1;
  }

  // A chain of byte ranges from s to e.
  absl::Status AddChain(int32_t s, int32_t e,
                        const std::vector<std::pair<uint8_t, uint8_t>>& seq) {
    int32_t cur = s;
    for (size_t i = 0; i < seq.size(); ++i) {
      int32_t nxt = e;
      if (i + 1 < seq.size()) {
        ASSIGN_OR_RETURN(nxt, New());
      }
      int32_t from = cur;
      if (states_[from].next >= 0) {
        // One edge per state: route through a fresh state.
        ASSIGN_OR_RETURN(int32_t mid, New());
        states_[from].eps.push_back(mid);
        from = mid;
      }
      states_[from].lo = seq[i].first;
      states_[from].hi = seq[i].second;
      states_[from].next = nxt;
      cur = nxt;
    }
    return absl::OkStatus();
  }

  static int Utf8Len(char32_t c) {
    return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  static void Encode(char32_t c, int len, uint8_t* b) {
    if (len == 1) {
      b[0] = static_cast<uint8_t>(c);
      return;
    }
    for (int i = len - 1; i > 0; --i) {
      b[i] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      c >>= 6;
    }
    static const uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    b[0] = static_cast<uint8_t>(kLead[len] | c);
  }

  // Splits [lo, hi] (same UTF-8 length) until each piece is a product of
  // byte ranges, then adds one chain per piece.
  absl::Status AddUtf8Range(int32_t s, int32_t e, char32_t lo, char32_t hi) {
    const int len = Utf8Len(lo);
    const int hi_len = Utf8Len(hi);
    if (len != hi_len) {
      const char32_t bound = len == 1 ? 0x7F : len == 2 ? 0x7FF : 0xFFFF;
      RETURN_IF_ERROR(AddUtf8Range(s, e, lo, bound));
      return AddUtf8Range(s, e, bound + 1, hi);
    }
    for (int i = 1; i < len; ++i) {
      const char32_t m = (char32_t{1} << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) {
          RETURN_IF_ERROR(AddUtf8Range(s, e, lo, lo | m));
          return AddUtf8Range(s, e, (lo | m) + 1, hi);
        }
        if ((hi & m) != m) {
          RETURN_IF_ERROR(AddUtf8Range(s, e, lo, (hi & ~m) - 1));
          return AddUtf8Range(s, e, hi & ~m, hi);
        }
      }
    }
    uint8_t a[4], b[4];
    Encode(lo, len, a);
    Encode(hi, len, b);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (int i = 0; i < len; ++i) seq.push_back({a[i], b[i]});
    return AddChain(s, e, seq);
  }

  absl::StatusOr<Frag> BuildSet(const Ranges& set) {
    ASSIGN_OR_RETURN(int32_t s, New());
    ASSIGN_OR_RETURN(int32_t e, New());
    for (auto [lo, hi] : set) RETURN_IF_ERROR(AddUtf8Range(s, e, lo, hi));
    return Frag{s, e};
  }

  const std::vector<Node>& nodes_;
  const RegexLimits& limits_;
  std::vector<NfaState> states_;
};

}  // namespace

absl::StatusOr<ByteDfa> ByteDfa::Compile(absl::string_view pattern,
                                         const RegexLimits& limits,
                                         int64_t* steps_out) {
  int64_t steps = 0;
  absl::StatusOr<ByteDfa> dfa = Build(pattern, limits, &steps);
  if (steps_out != nullptr) *steps_out = steps;
  return dfa;
}

absl::StatusOr<ByteDfa> ByteDfa::Build(absl::string_view pattern,
                                       const RegexLimits& limits,
                                       int64_t* steps) {
  std::vector<Node> nodes;
  Parser parser(pattern, limits);
  ASSIGN_OR_RETURN(int root, parser.Parse(&nodes));
  NfaBuilder builder(nodes, limits);
  ASSIGN_OR_RETURN(Frag frag, builder.Build(root));
  const std::vector<NfaState>& nfa = builder.states();
  const int32_t accept = frag.end;

  // Byte equivalence classes: bytes no edge tells apart.
  std::array<bool, 257> boundary{};
  boundary[0] = true;
  for (const NfaState& st : nfa) {
    if (st.next < 0) continue;
    boundary[st.lo] = true;
    boundary[st.hi + 1] = true;
  }
  ByteDfa dfa;
  std::vector<uint8_t> rep;  // a byte of each class
  int cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (boundary[b]) {
      ++cls;
      rep.push_back(static_cast<uint8_t>(b));
    }
    dfa.classes_[b] = static_cast<uint8_t>(cls);
  }
  dfa.num_classes_ = cls + 1;

  // Subset construction.
  std::vector<int32_t> mark(nfa.size(), -1);
  int32_t epoch = 0;
  std::vector<int32_t> stack;
  const absl::Status too_slow = absl::InvalidArgumentError(absl::StrCat(
      "the pattern is too complex (building its automaton takes more than ",
      limits.max_steps, " steps); use smaller repeat counts or fewer "
      "alternatives"));
  auto closure = [&](std::vector<int32_t>* set) {
    ++epoch;
    stack.assign(set->begin(), set->end());
    set->clear();
    for (int32_t s : stack) mark[s] = epoch;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      set->push_back(s);
      *steps += 1 + static_cast<int64_t>(nfa[s].eps.size());
      for (int32_t t : nfa[s].eps) {
        if (mark[t] != epoch) {
          mark[t] = epoch;
          stack.push_back(t);
        }
      }
    }
    std::sort(set->begin(), set->end());
  };
  absl::flat_hash_map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<int32_t> trans;
  std::vector<int32_t> init = {frag.start};
  closure(&init);
  ids[init] = 0;
  sets.push_back(init);
  std::vector<int32_t> next;
  int64_t subset_entries = static_cast<int64_t>(init.size()) * 2;
  for (size_t d = 0; d < sets.size(); ++d) {
    trans.resize((d + 1) * dfa.num_classes_, kDead);
    for (int c = 0; c < dfa.num_classes_; ++c) {
      const uint8_t b = rep[c];
      next.clear();
      for (int32_t s : sets[d]) {
        const NfaState& st = nfa[s];
        if (st.next >= 0 && st.lo <= b && b <= st.hi) next.push_back(st.next);
      }
      *steps += static_cast<int64_t>(sets[d].size());
      if (next.empty()) continue;
      closure(&next);
      if (*steps > limits.max_steps) return too_slow;
      auto it = ids.find(next);
      int32_t target;
      if (it != ids.end()) {
        target = it->second;
      } else {
        if (static_cast<int32_t>(sets.size()) >= limits.max_dfa_states) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the pattern is too complex (more than ", limits.max_dfa_states,
              " DFA states); use smaller repeat counts or fewer "
              "alternatives"));
        }
        subset_entries += static_cast<int64_t>(next.size()) * 2;  // map + list
        if (subset_entries > limits.max_subset_entries) {
          return absl::InvalidArgumentError(
              "the pattern is too complex (its automaton's states stand for "
              "too many NFA states); use smaller repeat counts or fewer "
              "alternatives");
        }
        target = static_cast<int32_t>(sets.size());
        ids.emplace(next, target);
        sets.push_back(next);
      }
      trans[d * dfa.num_classes_ + c] = target;
    }
  }
  const int32_t n = static_cast<int32_t>(sets.size());
  std::vector<uint8_t> acc(n, 0);
  for (int32_t d = 0; d < n; ++d) {
    acc[d] = std::binary_search(sets[d].begin(), sets[d].end(), accept);
  }
  // Live states: those that reach an accepting state (reverse search).
  std::vector<std::vector<int32_t>> rev(n);
  for (int32_t d = 0; d < n; ++d) {
    for (int c = 0; c < dfa.num_classes_; ++c) {
      const int32_t t = trans[d * dfa.num_classes_ + c];
      if (t >= 0) rev[t].push_back(d);
    }
  }
  std::vector<uint8_t> live(n, 0);
  stack.clear();
  for (int32_t d = 0; d < n; ++d) {
    if (acc[d]) {
      live[d] = 1;
      stack.push_back(d);
    }
  }
  while (!stack.empty()) {
    const int32_t d = stack.back();
    stack.pop_back();
    for (int32_t p : rev[d]) {
      if (!live[p]) {
        live[p] = 1;
        stack.push_back(p);
      }
    }
  }
  if (!live[0]) {
    return absl::InvalidArgumentError("the pattern matches no string");
  }
  std::vector<int32_t> renum(n, kDead);
  int32_t kept = 0;
  for (int32_t d = 0; d < n; ++d) {
    if (live[d]) renum[d] = kept++;
  }
  dfa.trans_.assign(static_cast<size_t>(kept) * dfa.num_classes_, kDead);
  dfa.accepting_.assign(kept, 0);
  dfa.has_next_.assign(kept, 0);
  for (int32_t d = 0; d < n; ++d) {
    if (!live[d]) continue;
    const int32_t nd = renum[d];
    dfa.accepting_[nd] = acc[d];
    for (int c = 0; c < dfa.num_classes_; ++c) {
      const int32_t t = trans[d * dfa.num_classes_ + c];
      const int32_t nt = t >= 0 ? renum[t] : kDead;
      dfa.trans_[static_cast<size_t>(nd) * dfa.num_classes_ + c] = nt;
      if (nt >= 0) dfa.has_next_[nd] = 1;
    }
  }
  return dfa;
}

bool ByteDfa::FullMatch(absl::string_view text) const {
  int32_t s = start();
  for (char ch : text) {
    s = Next(s, static_cast<uint8_t>(ch));
    if (s == kDead) return false;
  }
  return accepting(s);
}

std::string RegexEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    switch (c) {
      case '\\': case '.': case '^': case '$': case '|': case '?': case '*':
      case '+': case '(': case ')': case '[': case ']': case '{': case '}':
        out.push_back('\\');
        out.push_back(c);
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace inferd
