// Lexer and recursive-descent parser for the Jinja subset, following the
// grammar and operator precedence of Jinja2 (jinja2/lexer.py, parser.py),
// with the options transformers renders chat templates with:
// trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/chat/jinja_ast.h"
#include "runtime/chat/jinja_value.h"
#include "runtime/common/status_macros.h"

namespace inferd::jinja {
namespace {

constexpr int kMaxParseDepth = 100;

struct Token {
  enum Type {
    kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt,
    kFloat, kOp, kEof
  };
  Type type;
  std::string value;
  int64_t ival = 0;
  double fval = 0;
  size_t offset = 0;
};

bool IsWs(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v' || (c >= 0x1c && c <= 0x1f);
}

class Lexer {
 public:
  explicit Lexer(absl::string_view src) : src_(src) {}

  absl::Status Run(std::vector<Token>* out) {
    out_ = out;
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t start = absl::string_view::npos;
      for (size_t p = src_.find('{', pos); p != absl::string_view::npos;
           p = src_.find('{', p + 1)) {
        if (p + 1 < n && (src_[p + 1] == '{' || src_[p + 1] == '%' ||
                          src_[p + 1] == '#')) {
          start = p;
          break;
        }
      }
      if (start == absl::string_view::npos) {
        Emit(Token::kText, std::string(src_.substr(pos)), pos);
        break;
      }
      std::string text(src_.substr(pos, start - pos));
      char kind = src_[start + 1];
      char sign = start + 2 < n ? src_[start + 2] : '\0';
      if (sign == '-') {
        RStripPython(&text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop spaces and tabs between a line start and a
        // block or comment tag.
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          if (text.find_first_not_of(" \t", l_pos) == std::string::npos) {
            text.resize(l_pos);
          }
        }
      }
      if (!text.empty()) Emit(Token::kText, std::move(text), pos);
      size_t p = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        size_t q = src_.find("#}", p);
        if (q == absl::string_view::npos) {
          return Error(start, "Missing end of comment tag");
        }
        char before = q > p ? src_[q - 1] : '\0';
        pos = q + 2;
        if (before == '-') {
          while (pos < n && IsWs(src_[pos])) ++pos;
        } else if (before != '+' && pos < n && src_[pos] == '\n') {
          ++pos;
        }
        line_starting = pos > 0 && src_[pos - 1] == '\n';
        continue;
      }
      bool block = kind == '%';
      Emit(block ? Token::kBlockBegin : Token::kVarBegin, "", start);
      RETURN_IF_ERROR(LexTag(block, p, &pos));
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Emit(Token::kEof, "", n);
    return absl::OkStatus();
  }

  absl::Status Error(size_t offset, absl::string_view message) const {
    return ErrorAt(src_, offset, message);
  }

  static absl::Status ErrorAt(absl::string_view src, size_t offset,
                              absl::string_view message) {
    int line = 1, col = 1;
    for (size_t i = 0; i < offset && i < src.size(); ++i) {
      if (src[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("chat template syntax error at line ", line, ":", col,
                     ": ", message));
  }

 private:
  void Emit(Token::Type type, std::string value, size_t offset) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.offset = offset;
    out_->push_back(std::move(t));
  }

  static void RStripPython(std::string* s) {
    // Python str.rstrip(): ASCII whitespace plus the common Unicode spaces.
    while (!s->empty()) {
      unsigned char c = static_cast<unsigned char>(s->back());
      if (IsWs(static_cast<char>(c))) {
        s->pop_back();
      } else if (s->size() >= 2 && c == 0xa0 &&
                 static_cast<unsigned char>((*s)[s->size() - 2]) == 0xc2) {
        s->resize(s->size() - 2);
      } else {
        break;
      }
    }
  }

  absl::Status LexTag(bool block, size_t p, size_t* end) {
    const size_t n = src_.size();
    int depth = 0;  // Brackets open: end markers are operators inside them.
    const char close = block ? '%' : '}';
    while (true) {
      while (p < n && IsWs(src_[p])) ++p;
      if (p >= n) {
        return Error(p, block ? "unexpected end of template, expected '%}'"
                              : "unexpected end of template, expected '}}'");
      }
      if (depth == 0) {
        if (src_.compare(p, 3, std::string("-") + close + "}") == 0) {
          p += 3;
          Emit(block ? Token::kBlockEnd : Token::kVarEnd, "", p);
          while (p < n && IsWs(src_[p])) ++p;
          *end = p;
          return absl::OkStatus();
        }
        if (block && src_.compare(p, 3, "+%}") == 0) {
          Emit(Token::kBlockEnd, "", p);
          *end = p + 3;
          return absl::OkStatus();
        }
        if (src_.compare(p, 2, std::string(1, close) + "}") == 0) {
          Emit(block ? Token::kBlockEnd : Token::kVarEnd, "", p);
          p += 2;
          if (block && p < n && src_[p] == '\n') ++p;  // trim_blocks
          *end = p;
          return absl::OkStatus();
        }
      }
      char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t q = p;
        while (q < n && (std::isalnum(static_cast<unsigned char>(src_[q])) ||
                         src_[q] == '_')) {
          ++q;
        }
        Emit(Token::kName, std::string(src_.substr(p, q - p)), p);
        p = q;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        RETURN_IF_ERROR(LexNumber(&p));
      } else if (c == '\'' || c == '"') {
        RETURN_IF_ERROR(LexString(&p));
      } else {
        static const char* const kOps[] = {
            "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
            "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":",
            "|", ";"};
        bool matched = false;
        for (const char* op : kOps) {
          size_t len = std::char_traits<char>::length(op);
          if (src_.compare(p, len, op) == 0) {
            if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
            if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && len == 1) {
              if (depth == 0) return Error(p, absl::StrCat("unexpected '", op, "'"));
              --depth;
            }
            Emit(Token::kOp, op, p);
            p += len;
            matched = true;
            break;
          }
        }
        if (!matched) {
          return Error(p, absl::StrCat("unexpected char '", std::string(1, c), "'"));
        }
      }
    }
  }

  absl::Status LexNumber(size_t* pos) {
    const size_t n = src_.size();
    size_t p = *pos;
    size_t start = p;
    auto digits = [&]() {
      while (p < n && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                       (src_[p] == '_' && p + 1 < n &&
                        std::isdigit(static_cast<unsigned char>(src_[p + 1]))))) {
        ++p;
      }
    };
    digits();
    bool is_float = false;
    if (p + 1 < n && src_[p] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      ++p;
      digits();
      is_float = true;
    }
    if (p < n && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        p = q;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < p; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t;
    t.offset = start;
    t.value = text;
    if (is_float) {
      t.type = Token::kFloat;
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = Token::kInt;
      errno = 0;
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(start, "integer literal out of range");
    }
    out_->push_back(std::move(t));
    *pos = p;
    return absl::OkStatus();
  }

  // Python string-literal escapes (Jinja decodes with "unicode-escape").
  absl::Status LexString(size_t* pos) {
    const size_t n = src_.size();
    size_t p = *pos;
    char quote = src_[p++];
    std::string value;
    while (true) {
      if (p >= n) return Error(*pos, "unterminated string literal");
      char c = src_[p];
      if (c == quote) {
        ++p;
        break;
      }
      if (c != '\\') {
        value.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= n) return Error(*pos, "unterminated string literal");
      char e = src_[p + 1];
      p += 2;
      auto hex = [&](int count) -> absl::StatusOr<uint32_t> {
        if (p + count > n) return Error(p, "truncated \\x/\\u escape");
        uint32_t v = 0;
        for (int i = 0; i < count; ++i) {
          char h = src_[p + i];
          if (!std::isxdigit(static_cast<unsigned char>(h))) {
            return Error(p, "truncated \\x/\\u escape");
          }
          v = v * 16 + (std::isdigit(static_cast<unsigned char>(h))
                            ? h - '0'
                            : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
        }
        p += count;
        return v;
      };
      switch (e) {
        case '\n': break;
        case '\\': value.push_back('\\'); break;
        case '\'': value.push_back('\''); break;
        case '"': value.push_back('"'); break;
        case 'n': value.push_back('\n'); break;
        case 't': value.push_back('\t'); break;
        case 'r': value.push_back('\r'); break;
        case 'b': value.push_back('\b'); break;
        case 'f': value.push_back('\f'); break;
        case 'v': value.push_back('\v'); break;
        case 'a': value.push_back('\a'); break;
        case 'x': {
          ASSIGN_OR_RETURN(uint32_t v, hex(2));
          AppendUtf8(v, &value);
          break;
        }
        case 'u': {
          ASSIGN_OR_RETURN(uint32_t v, hex(4));
          AppendUtf8(v, &value);
          break;
        }
        case 'U': {
          ASSIGN_OR_RETURN(uint32_t v, hex(8));
          if (v > 0x10ffff) return Error(p, "illegal Unicode character");
          AppendUtf8(v, &value);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = e - '0';
            for (int i = 0; i < 2 && p < n && src_[p] >= '0' && src_[p] <= '7'; ++i) {
              v = v * 8 + (src_[p++] - '0');
            }
            AppendUtf8(v, &value);
          } else {
            value.push_back('\\');
            value.push_back(e);
          }
      }
    }
    Token t;
    t.type = Token::kString;
    t.value = std::move(value);
    t.offset = *pos;
    out_->push_back(std::move(t));
    *pos = p;
    return absl::OkStatus();
  }

  absl::string_view src_;
  std::vector<Token>* out_ = nullptr;
};

class Parser {
 public:
  Parser(absl::string_view src, std::vector<Token> tokens)
      : src_(src), tokens_(std::move(tokens)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<Body> ParseAll() {
    Body body;
    ASSIGN_OR_RETURN(std::string end, ParseBody({}, &body));
    (void)end;
    return body;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(int* d) : depth(d) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  };

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t k = 1) const {
    return tokens_[std::min(pos_ + k, tokens_.size() - 1)];
  }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(absl::string_view op) const {
    return Cur().type == Token::kOp && Cur().value == op;
  }
  bool IsName(absl::string_view name) const {
    return Cur().type == Token::kName && Cur().value == name;
  }
  absl::Status Error(const Token& t, absl::string_view message) const {
    return Lexer::ErrorAt(src_, t.offset, message);
  }
  absl::Status ErrorHere(absl::string_view message) const {
    return Error(Cur(), message);
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case Token::kEof: return "end of template";
      case Token::kBlockEnd: return "end of statement block";
      case Token::kVarEnd: return "end of print statement";
      case Token::kText: return "template text";
      case Token::kString: return "string";
      case Token::kInt: case Token::kFloat: return "number";
      default: return absl::StrCat("'", t.value, "'");
    }
  }
  absl::Status ExpectOp(absl::string_view op) {
    if (!IsOp(op)) {
      return ErrorHere(absl::StrCat("expected '", op, "', got ", Describe(Cur())));
    }
    Advance();
    return absl::OkStatus();
  }
  absl::Status ExpectName(absl::string_view name) {
    if (!IsName(name)) {
      return ErrorHere(absl::StrCat("expected '", name, "', got ", Describe(Cur())));
    }
    Advance();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectIdentifier() {
    if (Cur().type != Token::kName) {
      return ErrorHere(absl::StrCat("expected a name, got ", Describe(Cur())));
    }
    std::string name = Cur().value;
    Advance();
    return name;
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().type != Token::kBlockEnd) {
      return ErrorHere(absl::StrCat("expected end of statement block, got ",
                                    Describe(Cur())));
    }
    Advance();
    return absl::OkStatus();
  }
  void Locate(Expr* e, const Token& t) const { LineCol(t.offset, &e->line, &e->col); }
  void Locate(Stmt* s, const Token& t) const { LineCol(t.offset, &s->line, &s->col); }
  void LineCol(size_t offset, int* line, int* col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    *line = static_cast<int>(it - line_starts_.begin());
    *col = static_cast<int>(offset - *(it - 1)) + 1;
  }
  ExprPtr NewExpr(Expr::Kind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    Locate(e.get(), at);
    return e;
  }

  // Parses statements until one of `end_tags` opens a block; consumes the
  // block-begin and the tag name and returns the name ("" at end of input
  // when end_tags is empty).
  absl::StatusOr<std::string> ParseBody(const std::vector<std::string>& end_tags,
                                        Body* body) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return ErrorHere("template nested too deeply");
    while (true) {
      const Token& t = Cur();
      switch (t.type) {
        case Token::kEof:
          if (!end_tags.empty()) {
            return ErrorHere(absl::StrCat(
                "unexpected end of template; looking for the tags: ",
                absl::StrJoin(end_tags, ", ")));
          }
          return std::string();
        case Token::kText: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kText;
          s->text = t.value;
          Locate(s.get(), t);
          body->push_back(std::move(s));
          Advance();
          break;
        }
        case Token::kVarBegin: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kOutput;
          Locate(s.get(), t);
          Advance();
          ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
          if (Cur().type != Token::kVarEnd) {
            return ErrorHere(absl::StrCat("expected end of print statement, got ",
                                          Describe(Cur())));
          }
          Advance();
          body->push_back(std::move(s));
          break;
        }
        case Token::kBlockBegin: {
          const Token& begin = t;
          Advance();
          if (Cur().type != Token::kName) {
            return ErrorHere(absl::StrCat("expected a tag name, got ", Describe(Cur())));
          }
          std::string tag = Cur().value;
          if (std::find(end_tags.begin(), end_tags.end(), tag) != end_tags.end()) {
            Advance();
            return tag;
          }
          ASSIGN_OR_RETURN(StmtPtr s, ParseStatement(begin));
          body->push_back(std::move(s));
          break;
        }
        default:
          return ErrorHere(absl::StrCat("unexpected ", Describe(t)));
      }
    }
  }

  absl::StatusOr<StmtPtr> ParseStatement(const Token& begin) {
    auto s = std::make_unique<Stmt>();
    Locate(s.get(), begin);
    const Token& name_tok = Cur();
    std::string tag = name_tok.value;
    Advance();
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false));
        RETURN_IF_ERROR(ExpectBlockEnd());
        Body body;
        ASSIGN_OR_RETURN(std::string end, ParseBody({"elif", "else", "endif"}, &body));
        s->conditions.push_back(std::move(cond));
        s->bodies.push_back(std::move(body));
        if (end == "elif") continue;
        if (end == "else") {
          RETURN_IF_ERROR(ExpectBlockEnd());
          ASSIGN_OR_RETURN(end, ParseBody({"endif"}, &s->else_body));
        }
        RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
    }
    if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      RETURN_IF_ERROR(ParseTargets(&s->targets));
      RETURN_IF_ERROR(ExpectName("in"));
      ASSIGN_OR_RETURN(s->expr, ParseTuple(false, /*stop_at_if=*/true));
      if (IsName("if")) {
        Advance();
        ASSIGN_OR_RETURN(s->cond, ParseExpression());
      }
      if (IsName("recursive")) return ErrorHere("unsupported: recursive for loops");
      RETURN_IF_ERROR(ExpectBlockEnd());
      ++loop_depth_;
      ASSIGN_OR_RETURN(std::string end, ParseBody({"endfor", "else"}, &s->body));
      --loop_depth_;
      if (end == "else") {
        RETURN_IF_ERROR(ExpectBlockEnd());
        ASSIGN_OR_RETURN(end, ParseBody({"endfor"}, &s->else_body));
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "set") {
      ASSIGN_OR_RETURN(std::string first, ExpectIdentifier());
      if (IsOp(".")) {
        Advance();
        ASSIGN_OR_RETURN(std::string attr, ExpectIdentifier());
        s->targets = {first, attr};
        s->attr_target = true;
      } else {
        s->targets.push_back(first);
        while (IsOp(",")) {
          Advance();
          if (IsOp("=")) break;
          ASSIGN_OR_RETURN(std::string more, ExpectIdentifier());
          s->targets.push_back(more);
        }
      }
      if (IsOp("=")) {
        Advance();
        s->kind = Stmt::Kind::kSet;
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
        RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      if (s->attr_target || s->targets.size() != 1) {
        return ErrorHere("expected '='");
      }
      if (IsOp("|")) return ErrorHere("unsupported: filtered block set");
      s->kind = Stmt::Kind::kSetBlock;
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(std::string end, ParseBody({"endset"}, &s->body));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "macro") {
      s->kind = Stmt::Kind::kMacro;
      ASSIGN_OR_RETURN(s->name, ExpectIdentifier());
      RETURN_IF_ERROR(ExpectOp("("));
      while (!IsOp(")")) {
        ASSIGN_OR_RETURN(std::string param, ExpectIdentifier());
        ExprPtr def;
        if (IsOp("=")) {
          Advance();
          ASSIGN_OR_RETURN(def, ParseExpression());
        }
        s->params.emplace_back(param, std::move(def));
        if (!IsOp(",")) break;
        Advance();
      }
      RETURN_IF_ERROR(ExpectOp(")"));
      RETURN_IF_ERROR(ExpectBlockEnd());
      int saved_loop_depth = loop_depth_;
      loop_depth_ = 0;
      ASSIGN_OR_RETURN(std::string end, ParseBody({"endmacro"}, &s->body));
      loop_depth_ = saved_loop_depth;
      if (Cur().type == Token::kName) Advance();  // {% endmacro name %}
      RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) {
        return Error(name_tok, absl::StrCat("'", tag, "' outside of a loop"));
      }
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "generation") {
      s->kind = Stmt::Kind::kBlock;
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(std::string end, ParseBody({"endgeneration"}, &s->body));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "with") {
      s->kind = Stmt::Kind::kBlock;
      s->new_scope = true;
      while (Cur().type != Token::kBlockEnd) {
        if (!s->with_vars.empty()) RETURN_IF_ERROR(ExpectOp(","));
        ASSIGN_OR_RETURN(std::string var, ExpectIdentifier());
        RETURN_IF_ERROR(ExpectOp("="));
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        s->with_vars.emplace_back(var, std::move(value));
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(std::string end, ParseBody({"endwith"}, &s->body));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    return Error(name_tok, absl::StrCat("unsupported or unknown tag '", tag, "'"));
  }

  absl::Status ParseTargets(std::vector<std::string>* targets) {
    bool paren = IsOp("(");
    if (paren) Advance();
    while (true) {
      ASSIGN_OR_RETURN(std::string name, ExpectIdentifier());
      targets->push_back(name);
      if (!IsOp(",")) break;
      Advance();
      if (Cur().type != Token::kName || IsName("in")) break;
    }
    if (paren) RETURN_IF_ERROR(ExpectOp(")"));
    return absl::OkStatus();
  }

  // A tuple when commas follow; else the single expression.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, bool stop_at_if = false) {
    (void)stop_at_if;
    const Token& start = Cur();
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!IsOp(",")) break;
        Advance();
        saw_comma = true;
        if (Cur().type == Token::kVarEnd || Cur().type == Token::kBlockEnd ||
            IsOp(")")) {
          break;
        }
      }
      ExprPtr e;
      if (with_condexpr) {
        ASSIGN_OR_RETURN(e, ParseExpression());
      } else {
        ASSIGN_OR_RETURN(e, ParseOr());
      }
      items.push_back(std::move(e));
    }
    if (!saw_comma) return std::move(items[0]);
    ExprPtr t = NewExpr(Expr::Kind::kTuple, start);
    t->args = std::move(items);
    return t;
  }

  absl::StatusOr<ExprPtr> ParseExpression() {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return ErrorHere("expression nested too deeply");
    const Token& start = Cur();
    ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    while (IsName("if")) {
      Advance();
      ExprPtr c = NewExpr(Expr::Kind::kCond, start);
      ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr other;
      if (IsName("else")) {
        Advance();
        ASSIGN_OR_RETURN(other, ParseExpression());
      }
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ASSIGN_OR_RETURN(ExprPtr e, ParseAnd());
    while (IsName("or")) {
      ExprPtr b = NewExpr(Expr::Kind::kOr, Cur());
      Advance();
      ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
      b->args.push_back(std::move(e));
      b->args.push_back(std::move(r));
      e = std::move(b);
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
    while (IsName("and")) {
      ExprPtr b = NewExpr(Expr::Kind::kAnd, Cur());
      Advance();
      ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
      b->args.push_back(std::move(e));
      b->args.push_back(std::move(r));
      e = std::move(b);
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(&depth_);
      if (depth_ > kMaxParseDepth) return ErrorHere("expression nested too deeply");
      ExprPtr n = NewExpr(Expr::Kind::kNot, Cur());
      Advance();
      ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      n->args.push_back(std::move(operand));
      return n;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    const Token& start = Cur();
    ASSIGN_OR_RETURN(ExprPtr e, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == Token::kOp &&
          (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" ||
           Cur().value == "<=" || Cur().value == ">" || Cur().value == ">=")) {
        op = Cur().value;
        Advance();
      } else if (IsName("in")) {
        op = "in";
        Advance();
      } else if (IsName("not") && Peek().type == Token::kName &&
                 Peek().value == "in") {
        op = "notin";
        Advance();
        Advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = NewExpr(Expr::Kind::kCompare, start);
        cmp->args.push_back(std::move(e));
      }
      ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(r));
    }
    if (cmp) return cmp;
    return e;
  }

  template <typename Next>
  absl::StatusOr<ExprPtr> ParseBinary(std::initializer_list<const char*> ops,
                                      Next next) {
    ASSIGN_OR_RETURN(ExprPtr e, next());
    while (Cur().type == Token::kOp) {
      bool match = false;
      for (const char* op : ops) match = match || Cur().value == op;
      if (!match) break;
      ExprPtr b = NewExpr(Expr::Kind::kBinary, Cur());
      b->name = Cur().value;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr r, next());
      b->args.push_back(std::move(e));
      b->args.push_back(std::move(r));
      e = std::move(b);
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    return ParseBinary({"+", "-"}, [this] { return ParseConcat(); });
  }
  absl::StatusOr<ExprPtr> ParseConcat() {
    return ParseBinary({"~"}, [this] { return ParseMath2(); });
  }
  absl::StatusOr<ExprPtr> ParseMath2() {
    return ParseBinary({"*", "/", "//", "%"}, [this] { return ParsePow(); });
  }
  absl::StatusOr<ExprPtr> ParsePow() {
    return ParseBinary({"**"}, [this] { return ParseUnary(true); });
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return ErrorHere("expression nested too deeply");
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = NewExpr(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur());
      Advance();
      ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      e->args.push_back(std::move(operand));
    } else {
      ASSIGN_OR_RETURN(e, ParsePrimary());
    }
    ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    if (with_filter) {
      ASSIGN_OR_RETURN(e, ParseFilterExpr(std::move(e)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    switch (t.type) {
      case Token::kName: {
        ExprPtr e;
        if (t.value == "true" || t.value == "True") {
          e = NewExpr(Expr::Kind::kLiteral, t);
          e->literal = Value::Bool(true);
        } else if (t.value == "false" || t.value == "False") {
          e = NewExpr(Expr::Kind::kLiteral, t);
          e->literal = Value::Bool(false);
        } else if (t.value == "none" || t.value == "None") {
          e = NewExpr(Expr::Kind::kLiteral, t);
          e->literal = Value::None();
        } else {
          e = NewExpr(Expr::Kind::kName, t);
          e->name = t.value;
        }
        Advance();
        return e;
      }
      case Token::kString: {
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        std::string s;
        while (Cur().type == Token::kString) {
          s += Cur().value;
          Advance();
        }
        e->literal = Value::String(std::move(s));
        return e;
      }
      case Token::kInt: {
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        e->literal = Value::Int(t.ival);
        Advance();
        return e;
      }
      case Token::kFloat: {
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        e->literal = Value::Float(t.fval);
        Advance();
        return e;
      }
      case Token::kOp:
        if (t.value == "(") {
          Advance();
          if (IsOp(")")) {
            Advance();
            ExprPtr e = NewExpr(Expr::Kind::kTuple, t);
            return e;
          }
          ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true));
          RETURN_IF_ERROR(ExpectOp(")"));
          return e;
        }
        if (t.value == "[") {
          ExprPtr e = NewExpr(Expr::Kind::kList, t);
          Advance();
          while (!IsOp("]")) {
            if (!e->args.empty()) {
              RETURN_IF_ERROR(ExpectOp(","));
              if (IsOp("]")) break;
            }
            ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
            e->args.push_back(std::move(item));
          }
          RETURN_IF_ERROR(ExpectOp("]"));
          return e;
        }
        if (t.value == "{") {
          ExprPtr e = NewExpr(Expr::Kind::kDict, t);
          Advance();
          while (!IsOp("}")) {
            if (!e->args.empty()) {
              RETURN_IF_ERROR(ExpectOp(","));
              if (IsOp("}")) break;
            }
            ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
            RETURN_IF_ERROR(ExpectOp(":"));
            ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
            e->args.push_back(std::move(key));
            e->args.push_back(std::move(value));
          }
          RETURN_IF_ERROR(ExpectOp("}"));
          return e;
        }
        break;
      default:
        break;
    }
    return Error(t, absl::StrCat("unexpected ", Describe(t)));
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr e) {
    while (true) {
      const Token& t = Cur();
      if (IsOp(".")) {
        Advance();
        if (Cur().type == Token::kName) {
          ExprPtr a = NewExpr(Expr::Kind::kAttr, t);
          a->name = Cur().value;
          a->args.push_back(std::move(e));
          Advance();
          e = std::move(a);
        } else if (Cur().type == Token::kInt) {
          ExprPtr s = NewExpr(Expr::Kind::kSubscript, t);
          ExprPtr idx = NewExpr(Expr::Kind::kLiteral, Cur());
          idx->literal = Value::Int(Cur().ival);
          Advance();
          s->args.push_back(std::move(e));
          s->args.push_back(std::move(idx));
          e = std::move(s);
        } else {
          return ErrorHere("expected an attribute name after '.'");
        }
      } else if (IsOp("[")) {
        Advance();
        ExprPtr s = NewExpr(Expr::Kind::kSubscript, t);
        s->args.push_back(std::move(e));
        ASSIGN_OR_RETURN(ExprPtr index, ParseSubscriptIndex());
        s->args.push_back(std::move(index));
        RETURN_IF_ERROR(ExpectOp("]"));
        e = std::move(s);
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscriptIndex() {
    const Token& start = Cur();
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (true) {
      if (IsOp(":")) {
        is_slice = true;
        if (++part > 2) return ErrorHere("invalid slice");
        Advance();
        continue;
      }
      if (IsOp("]")) break;
      if (parts[part]) return ErrorHere("expected ']'");
      ASSIGN_OR_RETURN(parts[part], ParseExpression());
    }
    if (!is_slice) {
      if (!parts[0]) return ErrorHere("expected an index");
      return std::move(parts[0]);
    }
    ExprPtr s = NewExpr(Expr::Kind::kSlice, start);
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  absl::Status ParseCallArgs(Expr* call) {
    RETURN_IF_ERROR(ExpectOp("("));
    const size_t base = call->args.size();  // The callee / filtered value.
    while (!IsOp(")")) {
      if (call->args.size() > base || !call->kwargs.empty()) {
        RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      if (IsOp("*") || IsOp("**")) return ErrorHere("unsupported: *args / **kwargs");
      if (Cur().type == Token::kName && Peek().type == Token::kOp &&
          Peek().value == "=") {
        std::string key = Cur().value;
        Advance();
        Advance();
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        call->kwargs.emplace_back(key, std::move(value));
      } else {
        if (!call->kwargs.empty()) {
          return ErrorHere("positional argument follows keyword argument");
        }
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        call->args.push_back(std::move(value));
      }
    }
    return ExpectOp(")");
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr c = NewExpr(Expr::Kind::kCall, Cur());
    c->args.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseCallArgs(c.get()));
    return c;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        Advance();
        const Token& name_tok = Cur();
        ASSIGN_OR_RETURN(std::string name, ExpectIdentifier());
        while (IsOp(".")) {
          Advance();
          ASSIGN_OR_RETURN(std::string more, ExpectIdentifier());
          absl::StrAppend(&name, ".", more);
        }
        if (!IsKnownFilter(name)) {
          return Error(name_tok, absl::StrCat("No filter named '", name, "'."));
        }
        ExprPtr f = NewExpr(Expr::Kind::kFilter, name_tok);
        f->name = name;
        f->args.push_back(std::move(e));
        if (IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(f.get()));
        e = std::move(f);
      } else if (IsName("is")) {
        Advance();
        ExprPtr t = NewExpr(Expr::Kind::kTest, Cur());
        if (IsName("not")) {
          t->negated = true;
          Advance();
        }
        const Token& name_tok = Cur();
        ASSIGN_OR_RETURN(std::string name, ExpectIdentifier());
        if (!IsKnownTest(name)) {
          return Error(name_tok, absl::StrCat("No test named '", name, "'."));
        }
        t->name = name;
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          RETURN_IF_ERROR(ParseCallArgs(t.get()));
        } else if ((Cur().type == Token::kName || Cur().type == Token::kString ||
                    Cur().type == Token::kInt || Cur().type == Token::kFloat ||
                    IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) return ErrorHere("You cannot chain multiple tests with is");
          ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  absl::string_view src_;
  std::vector<Token> tokens_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(absl::string_view source) {
  std::vector<Token> tokens;
  Lexer lexer(source);
  RETURN_IF_ERROR(lexer.Run(&tokens));
  Parser parser(source, std::move(tokens));
  return parser.ParseAll();
}

}  // namespace inferd::jinja
