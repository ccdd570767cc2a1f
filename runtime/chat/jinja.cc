#include "runtime/chat/jinja.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/status_macros.h"

namespace inferd::jinja {
namespace {

// Templates may not call these (transformers renders in an
// ImmutableSandboxedEnvironment, which rejects mutating methods).
constexpr const char* kUnsafeMethods[] = {
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
    "update", "setdefault", "popitem"};

enum Builtin { kRange, kNamespace, kRaiseException, kStrftimeNow, kDict };

struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Lookup(absl::string_view name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent) {
      for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it) {
        if (it->first == name) return &it->second;
      }
    }
    return nullptr;
  }
  void Set(absl::string_view name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(std::string(name), std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

// Case mapping for ASCII, Latin-1, basic Greek and Cyrillic (what chat
// content mostly needs); other code points are left as they are.
uint32_t UpperCp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}
uint32_t LowerCp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}
std::string MapCase(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = DecodeUtf8(s, &i);
    uint32_t mapped = upper ? UpperCp(cp) : LowerCp(cp);
    if (mapped == cp) {
      out.append(s, start, i - start);
    } else {
      AppendUtf8(mapped, &out);
    }
  }
  return out;
}
std::string PyLower(std::string s) { return MapCase(s, false); }
std::string PyUpper(std::string s) { return MapCase(s, true); }

// Python str.strip/lstrip/rstrip; `chars` null means whitespace.
std::string PyStrip(const std::string& s, const std::string* chars, bool left,
                    bool right) {
  std::vector<uint32_t> set;
  if (chars != nullptr) {
    for (size_t i = 0; i < chars->size();) set.push_back(DecodeUtf8(*chars, &i));
  }
  auto strip_cp = [&](uint32_t cp) {
    if (chars == nullptr) return IsPySpace(cp);
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t i = begin;
      if (!strip_cp(DecodeUtf8(s, &i))) break;
      begin = i;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) {
        --start;
      }
      size_t i = start;
      uint32_t cp = DecodeUtf8(s, &i);
      if (i != end || !strip_cp(cp)) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

// Python's str.title() (for the method) and Jinja's title filter.
std::string PyTitle(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      out.push_back(static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u)));
      prev_cased = true;
    } else {
      out.push_back(c);
      prev_cased = u >= 0x80 && prev_cased;
    }
  }
  return out;
}

std::string JinjaTitle(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' ||
               (u < 0x80 && std::isspace(u));
    if (sep) {
      out.push_back(c);
      word_start = true;
    } else {
      out.push_back(static_cast<char>(word_start ? std::toupper(u) : std::tolower(u)));
      word_start = false;
    }
  }
  return out;
}

std::vector<std::string> PySplitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      lines.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(s[i]);
    }
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

class Renderer {
 public:
  Renderer(const RenderOptions& options) : opts_(options) {}

  absl::Status Run(const Body& body, const Value& globals, std::string* out) {
    root_.Set("range", MakeBuiltin("range", kRange));
    root_.Set("namespace", MakeBuiltin("namespace", kNamespace));
    root_.Set("raise_exception", MakeBuiltin("raise_exception", kRaiseException));
    root_.Set("strftime_now", MakeBuiltin("strftime_now", kStrftimeNow));
    root_.Set("dict", MakeBuiltin("dict", kDict));
    if (globals.is_dict()) {
      for (const auto& [k, v] : globals.dict().entries) {
        if (k.is_string()) root_.Set(k.str(), v);
      }
    }
    Flow flow = Flow::kNormal;
    return Exec(body, &root_, out, &flow);
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(int* d) : depth(d) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  };

  static Value MakeBuiltin(const char* name, Builtin b) {
    auto fn = std::make_shared<Callable>();
    fn->name = name;
    fn->builtin = b;
    return Value::Function(std::move(fn));
  }

  template <typename Node>
  absl::Status Err(const Node& at, absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template error at line ", at.line, ": ", message));
  }

  template <typename Node>
  absl::Status Tick(const Node& at) {
    if (++steps_ > opts_.max_steps) {
      return Err(at, "template exceeded the evaluation step limit");
    }
    if (depth_ > opts_.max_depth) {
      return Err(at, "template exceeded the recursion depth limit");
    }
    return absl::OkStatus();
  }

  template <typename Node>
  absl::Status CheckString(const Node& at, size_t size) const {
    if (size > opts_.max_output_bytes) {
      return Err(at, absl::StrCat("output or string longer than ",
                                  opts_.max_output_bytes, " bytes"));
    }
    return absl::OkStatus();
  }

  template <typename Node>
  absl::StatusOr<Value> MakeList(const Node& at, std::vector<Value> items,
                                 bool tuple = false) const {
    if (items.size() > opts_.max_list_items) {
      return Err(at, absl::StrCat("list longer than ", opts_.max_list_items, " items"));
    }
    Value v = Value::List(std::move(items), tuple);
    if (v.Depth() > Value::kMaxDepth) return Err(at, "value nested too deeply");
    return v;
  }

  template <typename Node>
  absl::StatusOr<Value> MakeDict(const Node& at, std::shared_ptr<ValueDict> d) const {
    Value v = Value::Dict(std::move(d));
    if (v.Depth() > Value::kMaxDepth) return Err(at, "value nested too deeply");
    return v;
  }

  template <typename Node>
  absl::StatusOr<std::string> ToStr(const Node& at, const Value& v) const {
    std::string s;
    v.StrTo(&s, opts_.max_output_bytes);
    RETURN_IF_ERROR(CheckString(at, s.size()));
    return s;
  }

  // ---- Statements ----

  absl::Status Exec(const Body& body, Frame* frame, std::string* out, Flow* flow) {
    for (const StmtPtr& s : body) {
      RETURN_IF_ERROR(ExecOne(*s, frame, out, flow));
      if (*flow != Flow::kNormal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  absl::Status Append(const Stmt& at, std::string* out, absl::string_view s) {
    RETURN_IF_ERROR(CheckString(at, out->size() + s.size()));
    out->append(s.data(), s.size());
    return absl::OkStatus();
  }

  absl::Status ExecOne(const Stmt& s, Frame* frame, std::string* out, Flow* flow) {
    DepthGuard guard(&depth_);
    RETURN_IF_ERROR(Tick(s));
    switch (s.kind) {
      case Stmt::Kind::kText:
        return Append(s, out, s.text);
      case Stmt::Kind::kOutput: {
        ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
        if (v.is_string()) return Append(s, out, v.str());
        ASSIGN_OR_RETURN(std::string text, ToStr(s, v));
        return Append(s, out, text);
      }
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          ASSIGN_OR_RETURN(Value c, Eval(*s.conditions[i], frame));
          if (c.Truthy()) return Exec(s.bodies[i], frame, out, flow);
        }
        return Exec(s.else_body, frame, out, flow);
      case Stmt::Kind::kFor:
        return ExecFor(s, frame, out, flow);
      case Stmt::Kind::kSet: {
        ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
        if (s.attr_target) {
          const Value* ns = frame->Lookup(s.targets[0]);
          if (ns == nullptr || !ns->is_namespace()) {
            return Err(s, "can only assign attributes on a namespace");
          }
          if (!s.targets[1].empty() && s.targets[1][0] == '_') {
            return Err(s, "cannot store underscore-prefixed attributes on a namespace");
          }
          if (ContainsNamespace(v, 0)) {
            return Err(s, "cannot store a namespace inside a namespace");
          }
          ns->mutable_namespace()->Set(Value::String(s.targets[1]), std::move(v));
          ValueDict* d = ns->mutable_namespace();
          d->depth = 1;
          for (const auto& [k, item] : d->entries) {
            d->depth = std::max(d->depth, item.Depth() + 1);
          }
          if (d->depth > Value::kMaxDepth) return Err(s, "value nested too deeply");
          return absl::OkStatus();
        }
        return Assign(s, s.targets, std::move(v), frame);
      }
      case Stmt::Kind::kSetBlock: {
        std::string text;
        Flow inner = Flow::kNormal;
        RETURN_IF_ERROR(Exec(s.body, frame, &text, &inner));
        frame->Set(s.targets[0], Value::String(std::move(text)));
        return absl::OkStatus();
      }
      case Stmt::Kind::kMacro: {
        auto fn = std::make_shared<Callable>();
        fn->name = s.name;
        fn->macro = &s;
        frame->Set(s.name, Value::Function(std::move(fn)));
        return absl::OkStatus();
      }
      case Stmt::Kind::kBreak:
        *flow = Flow::kBreak;
        return absl::OkStatus();
      case Stmt::Kind::kContinue:
        *flow = Flow::kContinue;
        return absl::OkStatus();
      case Stmt::Kind::kBlock: {
        if (!s.new_scope) return Exec(s.body, frame, out, flow);
        Frame inner;
        inner.parent = frame;
        for (const auto& [name, expr] : s.with_vars) {
          ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
          inner.Set(name, std::move(v));
        }
        return Exec(s.body, &inner, out, flow);
      }
    }
    return absl::OkStatus();
  }

  static bool ContainsNamespace(const Value& v, int depth) {
    if (v.is_namespace()) return true;
    if (depth > Value::kMaxDepth) return false;
    if (v.is_list()) {
      for (const Value& item : v.items()) {
        if (ContainsNamespace(item, depth + 1)) return true;
      }
    } else if (v.is_dict()) {
      for (const auto& [k, item] : v.dict().entries) {
        if (ContainsNamespace(item, depth + 1)) return true;
      }
    }
    return false;
  }

  absl::Status Assign(const Stmt& at, const std::vector<std::string>& targets,
                      Value v, Frame* frame) {
    if (targets.size() == 1) {
      frame->Set(targets[0], std::move(v));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
    if (items.size() != targets.size()) {
      return Err(at, items.size() > targets.size()
                         ? absl::StrCat("too many values to unpack (expected ",
                                        targets.size(), ")")
                         : absl::StrCat("not enough values to unpack (expected ",
                                        targets.size(), ", got ", items.size(), ")"));
    }
    for (size_t i = 0; i < targets.size(); ++i) frame->Set(targets[i], items[i]);
    return absl::OkStatus();
  }

  // Python iter(): list items, dict keys, string characters.
  template <typename Node>
  absl::StatusOr<std::vector<Value>> Iterate(const Node& at, const Value& v) const {
    switch (v.type()) {
      case Value::Type::kUndefined:
        return std::vector<Value>();
      case Value::Type::kList:
        return v.items();
      case Value::Type::kDict: {
        std::vector<Value> keys;
        for (const auto& [k, val] : v.dict().entries) keys.push_back(k);
        return keys;
      }
      case Value::Type::kString: {
        std::vector<Value> chars;
        for (std::string& c : Utf8Chars(v.str())) chars.push_back(Value::String(std::move(c)));
        return chars;
      }
      default:
        return Err(at, absl::StrCat("'", PyTypeName(v), "' object is not iterable"));
    }
  }

  absl::Status ExecFor(const Stmt& s, Frame* frame, std::string* out, Flow* flow) {
    ASSIGN_OR_RETURN(Value seq, Eval(*s.expr, frame));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(s, seq));
    if (s.cond) {
      std::vector<Value> kept;
      for (Value& item : items) {
        Frame f;
        f.parent = frame;
        RETURN_IF_ERROR(Assign(s, s.targets, item, &f));
        ASSIGN_OR_RETURN(Value c, Eval(*s.cond, &f));
        if (c.Truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Flow inner = Flow::kNormal;
      return Exec(s.else_body, frame, out, &inner);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    static const char* const kLoopKeys[] = {
        "index", "index0", "revindex", "revindex0", "first", "last",
        "length", "depth", "depth0", "previtem", "nextitem"};
    std::vector<Value> keys;
    for (const char* k : kLoopKeys) keys.push_back(Value::String(k));
    for (int64_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(Tick(s));
      Frame f;
      f.parent = frame;
      auto loop = std::make_shared<ValueDict>();
      loop->entries.reserve(11);
      Value values[] = {Value::Int(i + 1), Value::Int(i), Value::Int(n - i),
                        Value::Int(n - i - 1), Value::Bool(i == 0),
                        Value::Bool(i == n - 1), Value::Int(n), Value::Int(1),
                        Value::Int(0), i > 0 ? items[i - 1] : Value(),
                        i + 1 < n ? items[i + 1] : Value()};
      for (int k = 0; k < 11; ++k) loop->entries.emplace_back(keys[k], std::move(values[k]));
      f.vars.emplace_back("loop", Value::Dict(std::move(loop)));
      RETURN_IF_ERROR(Assign(s, s.targets, items[i], &f));
      Flow inner = Flow::kNormal;
      RETURN_IF_ERROR(Exec(s.body, &f, out, &inner));
      if (inner == Flow::kBreak) break;
    }
    (void)flow;
    return absl::OkStatus();
  }

  // ---- Expressions ----

  absl::StatusOr<Value> Eval(const Expr& e, Frame* frame) {
    DepthGuard guard(&depth_);
    RETURN_IF_ERROR(Tick(e));
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = frame->Lookup(e.name);
        return v == nullptr ? Value() : *v;
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const ExprPtr& a : e.args) {
          ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
          items.push_back(std::move(v));
        }
        return MakeList(e, std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        auto d = std::make_shared<ValueDict>();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], frame));
          ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], frame));
          if (k.is_list() && !k.is_tuple()) return Err(e, "unhashable type: 'list'");
          if (k.is_dict()) return Err(e, "unhashable type: 'dict'");
          d->Set(std::move(k), std::move(v));
        }
        return MakeDict(e, std::move(d));
      }
      case Expr::Kind::kAttr: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
        return GetAttr(e, obj, e.name);
      }
      case Expr::Kind::kSubscript: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
        if (obj.is_undefined()) return UndefinedError(e, *e.args[0]);
        if (e.args[1]->kind == Expr::Kind::kSlice) return EvalSlice(e, obj, *e.args[1], frame);
        ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], frame));
        return GetItem(e, obj, key);
      }
      case Expr::Kind::kSlice:
        return Err(e, "unexpected slice");
      case Expr::Kind::kCall:
        return EvalCall(e, frame);
      case Expr::Kind::kFilter: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        ASSIGN_OR_RETURN(auto args, EvalArgs(e, frame, 1));
        return ApplyFilter(e, e.name, v, args.first, args.second);
      }
      case Expr::Kind::kTest: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        ASSIGN_OR_RETURN(auto args, EvalArgs(e, frame, 1));
        ASSIGN_OR_RETURN(bool r, ApplyTest(e, e.name, v, args.first));
        return Value::Bool(r != e.negated);
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        if (!v.is_number()) {
          return Err(e, absl::StrCat("bad operand type for unary ",
                                     e.kind == Expr::Kind::kNeg ? "-" : "+", ": '",
                                     PyTypeName(v), "'"));
        }
        if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::Int(v.int_value()) : v;
        if (v.is_float()) return Value::Float(-v.AsDouble());
        if (v.int_value() == std::numeric_limits<int64_t>::min()) {
          return Err(e, "integer overflow");
        }
        return Value::Int(-v.int_value());
      }
      case Expr::Kind::kNot: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        return Value::Bool(!v.Truthy());
      }
      case Expr::Kind::kAnd: {
        ASSIGN_OR_RETURN(Value l, Eval(*e.args[0], frame));
        if (!l.Truthy()) return l;
        return Eval(*e.args[1], frame);
      }
      case Expr::Kind::kOr: {
        ASSIGN_OR_RETURN(Value l, Eval(*e.args[0], frame));
        if (l.Truthy()) return l;
        return Eval(*e.args[1], frame);
      }
      case Expr::Kind::kBinary: {
        ASSIGN_OR_RETURN(Value l, Eval(*e.args[0], frame));
        ASSIGN_OR_RETURN(Value r, Eval(*e.args[1], frame));
        return Binary(e, e.name, l, r);
      }
      case Expr::Kind::kCompare: {
        ASSIGN_OR_RETURN(Value l, Eval(*e.args[0], frame));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          ASSIGN_OR_RETURN(Value r, Eval(*e.args[i + 1], frame));
          ASSIGN_OR_RETURN(bool ok, Compare(e, e.ops[i], l, r));
          if (!ok) return Value::Bool(false);
          l = std::move(r);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kCond: {
        ASSIGN_OR_RETURN(Value c, Eval(*e.args[0], frame));
        if (c.Truthy()) return Eval(*e.args[1], frame);
        if (e.args[2]) return Eval(*e.args[2], frame);
        return Value();
      }
    }
    return Err(e, "unknown expression");
  }

  static std::string Describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return absl::StrCat("'", e.name, "'");
    if (e.kind == Expr::Kind::kAttr) return absl::StrCat("attribute '", e.name, "'");
    return "value";
  }

  absl::Status UndefinedError(const Expr& at, const Expr& what) const {
    return Err(at, absl::StrCat(Describe(what), " is undefined"));
  }

  absl::StatusOr<std::pair<std::vector<Value>, std::vector<std::pair<std::string, Value>>>>
  EvalArgs(const Expr& e, Frame* frame, size_t first) {
    std::pair<std::vector<Value>, std::vector<std::pair<std::string, Value>>> out;
    for (size_t i = first; i < e.args.size(); ++i) {
      ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], frame));
      out.first.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      ASSIGN_OR_RETURN(Value v, Eval(*x, frame));
      out.second.emplace_back(k, std::move(v));
    }
    return out;
  }

  absl::StatusOr<Value> GetAttr(const Expr& at, const Value& obj,
                                absl::string_view name) const {
    switch (obj.type()) {
      case Value::Type::kUndefined:
        return UndefinedError(at, *at.args[0]);
      case Value::Type::kDict:
      case Value::Type::kNamespace: {
        const Value* v = obj.dict().Find(name);
        return v == nullptr ? Value() : *v;
      }
      default:
        return Value();
    }
  }

  absl::StatusOr<Value> GetItem(const Expr& at, const Value& obj, const Value& key) const {
    switch (obj.type()) {
      case Value::Type::kDict:
      case Value::Type::kNamespace: {
        const Value* v = obj.dict().Find(key);
        return v == nullptr ? Value() : *v;
      }
      case Value::Type::kList:
      case Value::Type::kString: {
        if (!key.is_int() && !key.is_bool()) return Value();
        int64_t n = obj.is_list() ? static_cast<int64_t>(obj.items().size())
                                  : obj.Length();
        int64_t i = key.int_value();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        if (obj.is_list()) return obj.items()[i];
        return Value::String(Utf8Chars(obj.str())[i]);
      }
      default:
        (void)at;
        return Value();
    }
  }

  absl::StatusOr<Value> EvalSlice(const Expr& at, const Value& obj,
                                  const Expr& slice, Frame* frame) {
    Value parts[3];
    for (int i = 0; i < 3; ++i) {
      if (slice.args[i]) {
        ASSIGN_OR_RETURN(parts[i], Eval(*slice.args[i], frame));
        if (!parts[i].is_none() && !parts[i].is_int() && !parts[i].is_bool()) {
          return Err(at, "slice indices must be integers or None");
        }
      }
    }
    std::vector<Value> items;
    std::vector<std::string> chars;
    int64_t n;
    if (obj.is_list()) {
      n = static_cast<int64_t>(obj.items().size());
    } else if (obj.is_string()) {
      chars = Utf8Chars(obj.str());
      n = static_cast<int64_t>(chars.size());
    } else {
      return Err(at, absl::StrCat("'", PyTypeName(obj), "' object is not subscriptable"));
    }
    auto has = [](const Value& v) { return v.is_int() || v.is_bool(); };
    int64_t step = has(parts[2]) ? parts[2].int_value() : 1;
    if (step == 0) return Err(at, "slice step cannot be zero");
    int64_t start, stop;
    // Python's PySlice_AdjustIndices.
    auto adjust = [&](const Value& v, int64_t def, bool is_stop) {
      (void)is_stop;
      if (!has(v)) return def;
      int64_t x = v.int_value();
      if (x < 0) {
        x += n;
        if (x < 0) x = step < 0 ? -1 : 0;
      } else if (x >= n) {
        x = step < 0 ? n - 1 : n;
      }
      return x;
    };
    start = adjust(parts[0], step < 0 ? n - 1 : 0, false);
    stop = adjust(parts[1], step < 0 ? -1 : n, true);
    std::string s;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.is_list()) {
        items.push_back(obj.items()[i]);
      } else {
        s += chars[i];
      }
    }
    if (obj.is_string()) return Value::String(std::move(s));
    return MakeList(at, std::move(items), obj.is_tuple());
  }

  absl::StatusOr<bool> Compare(const Expr& at, const std::string& op,
                               const Value& l, const Value& r) {
    if (op == "==") return Equals(l, r);
    if (op == "!=") return !Equals(l, r);
    if (op == "in" || op == "notin") {
      ASSIGN_OR_RETURN(bool in, Contains(at, r, l));
      return in == (op == "in");
    }
    if (l.is_undefined() || r.is_undefined()) {
      return Err(at, absl::StrCat("'", op, "' not supported with an undefined value"));
    }
    absl::StatusOr<bool> result;
    if (op == "<") result = Less(l, r);
    else if (op == ">") result = Less(r, l);
    else if (op == "<=") {
      ASSIGN_OR_RETURN(bool lt, Less(l, r));
      result = lt || Equals(l, r);
    } else {
      ASSIGN_OR_RETURN(bool gt, Less(r, l));
      result = gt || Equals(l, r);
    }
    if (!result.ok()) return Err(at, result.status().message());
    return result;
  }

  absl::StatusOr<bool> Contains(const Expr& at, const Value& container,
                                const Value& item) const {
    switch (container.type()) {
      case Value::Type::kUndefined:
        return false;
      case Value::Type::kString:
        if (!item.is_string()) {
          return Err(at, absl::StrCat("'in <string>' requires string as left operand, not ",
                                      PyTypeName(item)));
        }
        return container.str().find(item.str()) != std::string::npos;
      case Value::Type::kList:
        for (const Value& v : container.items()) {
          if (Equals(v, item)) return true;
        }
        return false;
      case Value::Type::kDict:
        return container.dict().Find(item) != nullptr;
      default:
        return Err(at, absl::StrCat("argument of type '", PyTypeName(container),
                                    "' is not iterable"));
    }
  }

  absl::StatusOr<Value> Binary(const Expr& at, const std::string& op, const Value& l,
                               const Value& r) {
    if (op == "~") {
      std::string s;
      l.StrTo(&s, opts_.max_output_bytes);
      r.StrTo(&s, opts_.max_output_bytes);
      RETURN_IF_ERROR(CheckString(at, s.size()));
      return Value::String(std::move(s));
    }
    auto unsupported = [&]() {
      if (l.is_undefined()) return UndefinedError(at, *at.args[0]);
      if (r.is_undefined()) return UndefinedError(at, *at.args[1]);
      return Err(at, absl::StrCat("unsupported operand type(s) for ", op, ": '",
                                  PyTypeName(l), "' and '", PyTypeName(r), "'"));
    };
    if (l.is_number() && r.is_number()) {
      bool fl = l.is_float() || r.is_float();
      double a = l.AsDouble(), b = r.AsDouble();
      int64_t x = l.int_value(), y = r.int_value(), z = 0;
      if (op == "+") {
        if (fl) return Value::Float(a + b);
        if (__builtin_add_overflow(x, y, &z)) return Err(at, "integer overflow");
        return Value::Int(z);
      }
      if (op == "-") {
        if (fl) return Value::Float(a - b);
        if (__builtin_sub_overflow(x, y, &z)) return Err(at, "integer overflow");
        return Value::Int(z);
      }
      if (op == "*") {
        if (fl) return Value::Float(a * b);
        if (__builtin_mul_overflow(x, y, &z)) return Err(at, "integer overflow");
        return Value::Int(z);
      }
      if (op == "/") {
        if (b == 0) return Err(at, "division by zero");
        return Value::Float(a / b);
      }
      if (op == "//" || op == "%") {
        if (fl ? b == 0 : y == 0) {
          return Err(at, op == "//" ? "integer division or modulo by zero"
                                    : "modulo by zero");
        }
        if (fl) {
          double m = std::fmod(a, b);
          if (m != 0 && ((m < 0) != (b < 0))) m += b;
          if (op == "%") return Value::Float(m);
          return Value::Float(std::floor((a - m) / b + 0.5 - 0.5));
        }
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          return Err(at, "integer overflow");
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return op == "//" ? Value::Int(q) : Value::Int(m);
      }
      if (op == "**") {
        if (!fl && y >= 0) {
          int64_t result = 1, base = x;
          for (int64_t k = y; k > 0; k >>= 1) {
            if (k & 1) {
              if (__builtin_mul_overflow(result, base, &result)) return Err(at, "integer overflow");
            }
            if (k > 1 && __builtin_mul_overflow(base, base, &base)) {
              return Err(at, "integer overflow");
            }
          }
          return Value::Int(result);
        }
        if (a == 0 && b < 0) return Err(at, "zero to a negative power");
        return Value::Float(std::pow(a, b));
      }
      return unsupported();
    }
    if (op == "+") {
      if (l.is_string() && r.is_string()) {
        RETURN_IF_ERROR(CheckString(at, l.str().size() + r.str().size()));
        return Value::String(l.str() + r.str());
      }
      if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
        if (l.items().size() + r.items().size() > opts_.max_list_items) {
          return Err(at, "list too long");
        }
        std::vector<Value> items = l.items();
        items.insert(items.end(), r.items().begin(), r.items().end());
        return MakeList(at, std::move(items), l.is_tuple());
      }
      return unsupported();
    }
    if (op == "*") {
      const Value* seq = (l.is_string() || l.is_list()) ? &l : &r;
      const Value* count = seq == &l ? &r : &l;
      if ((seq->is_string() || seq->is_list()) && (count->is_int() || count->is_bool())) {
        int64_t k = std::max<int64_t>(0, count->int_value());
        if (seq->is_string()) {
          if (k > 0 && seq->str().size() * static_cast<double>(k) > opts_.max_output_bytes) {
            return Err(at, "string too long");
          }
          std::string s;
          for (int64_t i = 0; i < k; ++i) s += seq->str();
          return Value::String(std::move(s));
        }
        if (k > 0 && seq->items().size() * static_cast<double>(k) > opts_.max_list_items) {
          return Err(at, "list too long");
        }
        std::vector<Value> items;
        for (int64_t i = 0; i < k; ++i) {
          items.insert(items.end(), seq->items().begin(), seq->items().end());
        }
        return MakeList(at, std::move(items), seq->is_tuple());
      }
    }
    return unsupported();
  }

  // ---- Calls ----

  absl::StatusOr<Value> EvalCall(const Expr& e, Frame* frame) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {
      ASSIGN_OR_RETURN(Value obj, Eval(*callee.args[0], frame));
      if (obj.is_undefined()) return UndefinedError(e, *callee.args[0]);
      if (obj.is_string() || obj.is_dict() || obj.is_list()) {
        ASSIGN_OR_RETURN(auto args, EvalArgs(e, frame, 1));
        return CallMethod(e, obj, callee.name, args.first, args.second);
      }
      ASSIGN_OR_RETURN(Value fn, GetAttr(callee, obj, callee.name));
      ASSIGN_OR_RETURN(auto args, EvalArgs(e, frame, 1));
      return CallValue(e, callee, fn, args.first, args.second);
    }
    ASSIGN_OR_RETURN(Value fn, Eval(callee, frame));
    ASSIGN_OR_RETURN(auto args, EvalArgs(e, frame, 1));
    return CallValue(e, callee, fn, args.first, args.second);
  }

  using Kwargs = std::vector<std::pair<std::string, Value>>;

  // Positional argument i, else keyword `name`, else nullptr.
  static const Value* Arg(const std::vector<Value>& args, const Kwargs& kwargs,
                          size_t i, absl::string_view name) {
    if (i < args.size()) return &args[i];
    for (const auto& [k, v] : kwargs) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  absl::StatusOr<Value> CallValue(const Expr& at, const Expr& callee, const Value& fn,
                                  const std::vector<Value>& args, const Kwargs& kwargs) {
    if (fn.is_undefined()) return UndefinedError(at, callee);
    if (!fn.is_callable()) {
      return Err(at, absl::StrCat("'", PyTypeName(fn), "' object is not callable"));
    }
    const Callable& c = *fn.fn();
    if (c.macro != nullptr) return CallMacro(at, *static_cast<const Stmt*>(c.macro), args, kwargs);
    switch (c.builtin) {
      case kRaiseException: {
        const Value* msg = Arg(args, kwargs, 0, "message");
        return absl::InvalidArgumentError(
            absl::StrCat("chat template raised an exception at line ", at.line, ": ",
                         msg == nullptr ? "" : msg->Str()));
      }
      case kRange: {
        int64_t start = 0, stop = 0, step = 1;
        for (const Value& a : args) {
          if (!a.is_int() && !a.is_bool()) {
            return Err(at, absl::StrCat("'", PyTypeName(a), "' object cannot be interpreted as an integer"));
          }
        }
        if (args.size() == 1) {
          stop = args[0].int_value();
        } else if (args.size() == 2 || args.size() == 3) {
          start = args[0].int_value();
          stop = args[1].int_value();
          if (args.size() == 3) step = args[2].int_value();
        } else {
          return Err(at, "range expected 1 to 3 integer arguments");
        }
        if (step == 0) return Err(at, "range() arg 3 must not be zero");
        double count = std::ceil((static_cast<double>(stop) - start) / step);
        if (count > static_cast<double>(opts_.max_list_items)) {
          return Err(at, "range too big");
        }
        std::vector<Value> items;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          items.push_back(Value::Int(i));
        }
        return MakeList(at, std::move(items));
      }
      case kNamespace:
      case kDict: {
        auto d = std::make_shared<ValueDict>();
        if (!args.empty()) {
          if (args.size() > 1 || !args[0].is_dict()) {
            return Err(at, absl::StrCat(c.name, "() takes a mapping and keyword arguments"));
          }
          d->entries = args[0].dict().entries;
        }
        for (const auto& [k, v] : kwargs) d->Set(Value::String(k), v);
        if (c.builtin == kDict) return MakeDict(at, std::move(d));
        for (const auto& [k, v] : d->entries) {
          if (k.is_string() && !k.str().empty() && k.str()[0] == '_') {
            return Err(at, "cannot store underscore-prefixed attributes on a namespace");
          }
          if (ContainsNamespace(v, 0)) return Err(at, "cannot store a namespace inside a namespace");
        }
        Value ns = Value::Namespace(d);
        d->depth = 1;
        for (const auto& [k, item] : d->entries) d->depth = std::max(d->depth, item.Depth() + 1);
        return ns;
      }
      case kStrftimeNow: {
        const Value* fmt = Arg(args, kwargs, 0, "format");
        if (fmt == nullptr || !fmt->is_string()) return Err(at, "strftime_now expects a format string");
        absl::Time now = opts_.now == absl::InfinitePast() ? absl::Now() : opts_.now;
        std::tm tm = absl::ToTM(now, opts_.time_zone);
        std::string out(256, '\0');
        if (fmt->str().find('\0') != std::string::npos || fmt->str().size() > 200) {
          return Err(at, "strftime_now: bad format");
        }
        size_t n = std::strftime(&out[0], out.size(), fmt->str().c_str(), &tm);
        if (n == 0 && !fmt->str().empty()) return Err(at, "strftime_now: bad format");
        out.resize(n);
        return Value::String(std::move(out));
      }
      default:
        return Err(at, "unknown function");
    }
  }

  absl::StatusOr<Value> CallMacro(const Expr& at, const Stmt& macro,
                                  const std::vector<Value>& args, const Kwargs& kwargs) {
    if (args.size() > macro.params.size()) {
      return Err(at, absl::StrCat("macro '", macro.name, "' takes not more than ",
                                  macro.params.size(), " argument(s)"));
    }
    Frame f;
    f.parent = &root_;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, def] = macro.params[i];
      const Value* v = Arg(args, kwargs, i, name);
      if (v != nullptr) {
        f.Set(name, *v);
      } else if (def) {
        ASSIGN_OR_RETURN(Value d, Eval(*def, &f));
        f.Set(name, std::move(d));
      } else {
        f.Set(name, Value());
      }
    }
    for (const auto& [k, v] : kwargs) {
      bool known = false;
      for (const auto& p : macro.params) known = known || p.first == k;
      if (!known) {
        return Err(at, absl::StrCat("macro '", macro.name, "' takes no keyword argument '", k, "'"));
      }
    }
    std::string out;
    Flow flow = Flow::kNormal;
    DepthGuard guard(&depth_);
    RETURN_IF_ERROR(Exec(macro.body, &f, &out, &flow));
    return Value::String(std::move(out));
  }

  absl::StatusOr<Value> CallMethod(const Expr& at, const Value& obj, const std::string& name,
                                   const std::vector<Value>& args, const Kwargs& kwargs) {
    for (const char* unsafe : kUnsafeMethods) {
      if (name == unsafe) {
        return Err(at, absl::StrCat("access to attribute '", name, "' of '", PyTypeName(obj),
                                    "' object is unsafe"));
      }
    }
    auto str_arg = [&](size_t i, absl::string_view kw) -> const std::string* {
      const Value* v = Arg(args, kwargs, i, kw);
      return v != nullptr && v->is_string() ? &v->str() : nullptr;
    };
    if (obj.is_string()) {
      const std::string& s = obj.str();
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const Value* chars = Arg(args, kwargs, 0, "chars");
        const std::string* cs = chars != nullptr && chars->is_string() ? &chars->str() : nullptr;
        return Value::String(PyStrip(s, cs, name != "rstrip", name != "lstrip"));
      }
      if (name == "upper") return Value::String(PyUpper(s));
      if (name == "lower") return Value::String(PyLower(s));
      if (name == "title") return Value::String(PyTitle(s));
      if (name == "capitalize") {
        std::string r = PyLower(s);
        if (!r.empty()) r[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(r[0])));
        return Value::String(r);
      }
      if (name == "startswith" || name == "endswith") {
        const Value* p = Arg(args, kwargs, 0, "prefix");
        if (p == nullptr) return Err(at, absl::StrCat(name, "() takes at least 1 argument"));
        std::vector<Value> options = p->is_list() ? p->items() : std::vector<Value>{*p};
        for (const Value& o : options) {
          if (!o.is_string()) return Err(at, absl::StrCat(name, " first arg must be str or a tuple of str"));
          const std::string& x = o.str();
          bool hit = x.size() <= s.size() &&
                     (name == "startswith" ? s.compare(0, x.size(), x) == 0
                                           : s.compare(s.size() - x.size(), x.size(), x) == 0);
          if (hit) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      if (name == "split" || name == "rsplit") return Split(at, s, args, kwargs, name == "rsplit");
      if (name == "splitlines") {
        std::vector<Value> items;
        for (std::string& l : PySplitLines(s)) items.push_back(Value::String(std::move(l)));
        return MakeList(at, std::move(items));
      }
      if (name == "replace") {
        const std::string* old_s = str_arg(0, "old");
        const std::string* new_s = str_arg(1, "new");
        if (old_s == nullptr || new_s == nullptr) return Err(at, "replace() expects two strings");
        const Value* count = Arg(args, kwargs, 2, "count");
        return Replace(at, s, *old_s, *new_s, count != nullptr && count->is_int() ? count->int_value() : -1);
      }
      if (name == "find" || name == "rfind" || name == "index" || name == "count") {
        const std::string* sub = str_arg(0, "sub");
        if (sub == nullptr) return Err(at, absl::StrCat(name, "() expects a string"));
        if (name == "count") {
          if (sub->empty()) return Value::Int(Utf8Length(s) + 1);
          int64_t n = 0;
          for (size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
          return Value::Int(n);
        }
        size_t p = name == "rfind" ? s.rfind(*sub) : s.find(*sub);
        if (p == std::string::npos) {
          if (name == "index") return Err(at, "substring not found");
          return Value::Int(-1);
        }
        return Value::Int(Utf8Length(absl::string_view(s).substr(0, p)));
      }
      if (name == "join") {
        const Value* seq = Arg(args, kwargs, 0, "iterable");
        if (seq == nullptr) return Err(at, "join() takes exactly one argument");
        ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, *seq));
        std::string out;
        for (size_t i = 0; i < items.size(); ++i) {
          if (!items[i].is_string()) return Err(at, "join() expects strings");
          if (i > 0) out += s;
          out += items[i].str();
          RETURN_IF_ERROR(CheckString(at, out.size()));
        }
        return Value::String(std::move(out));
      }
      if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
          name == "islower" || name == "isupper") {
        if (s.empty()) return Value::Bool(false);
        bool ok = true, cased = false;
        for (char ch : s) {
          unsigned char u = static_cast<unsigned char>(ch);
          if (name == "isdigit") ok = ok && std::isdigit(u);
          if (name == "isalpha") ok = ok && std::isalpha(u);
          if (name == "isalnum") ok = ok && std::isalnum(u);
          if (name == "isspace") ok = ok && std::isspace(u);
          if (name == "islower") { ok = ok && !std::isupper(u); cased = cased || std::islower(u); }
          if (name == "isupper") { ok = ok && !std::islower(u); cased = cased || std::isupper(u); }
        }
        if (name == "islower" || name == "isupper") ok = ok && cased;
        return Value::Bool(ok);
      }
      if (name == "format") return Format(at, s, args, kwargs);
      return Err(at, absl::StrCat("'str' object has no attribute '", name, "'"));
    }
    if (obj.is_dict()) {
      const ValueDict& d = obj.dict();
      if (name == "items" || name == "keys" || name == "values") {
        std::vector<Value> items;
        for (const auto& [k, v] : d.entries) {
          if (name == "items") {
            items.push_back(Value::List({k, v}, true));
          } else {
            items.push_back(name == "keys" ? k : v);
          }
        }
        return MakeList(at, std::move(items));
      }
      if (name == "get") {
        const Value* key = Arg(args, kwargs, 0, "key");
        if (key == nullptr) return Err(at, "get expected at least 1 argument");
        const Value* v = d.Find(*key);
        if (v != nullptr) return *v;
        const Value* def = Arg(args, kwargs, 1, "default");
        return def != nullptr ? *def : Value::None();
      }
      if (name == "copy") return obj;
      // Not a method: a key holding a callable (e.g. a macro in a dict).
      const Value* v = d.Find(name);
      if (v != nullptr && v->is_callable()) return CallValue(at, *at.args[0], *v, args, kwargs);
      return Err(at, absl::StrCat("'dict' object has no attribute '", name, "'"));
    }
    if (obj.is_list()) {
      if (name == "index" || name == "count") {
        const Value* x = Arg(args, kwargs, 0, "value");
        if (x == nullptr) return Err(at, absl::StrCat(name, "() takes exactly one argument"));
        int64_t n = 0;
        for (size_t i = 0; i < obj.items().size(); ++i) {
          if (Equals(obj.items()[i], *x)) {
            if (name == "index") return Value::Int(static_cast<int64_t>(i));
            ++n;
          }
        }
        if (name == "index") return Err(at, "value is not in list");
        return Value::Int(n);
      }
      if (name == "copy") return obj;
      return Err(at, absl::StrCat("'list' object has no attribute '", name, "'"));
    }
    return Err(at, "not callable");
  }

  absl::StatusOr<Value> Split(const Expr& at, const std::string& s,
                              const std::vector<Value>& args, const Kwargs& kwargs,
                              bool from_right) {
    const Value* sep = Arg(args, kwargs, 0, "sep");
    const Value* max = Arg(args, kwargs, 1, "maxsplit");
    int64_t maxsplit = max != nullptr && max->is_int() ? max->int_value() : -1;
    std::vector<std::string> parts;
    if (sep == nullptr || sep->is_none()) {
      // Runs of whitespace; no empty parts.
      std::vector<std::pair<size_t, size_t>> words;
      size_t i = 0;
      while (i < s.size()) {
        size_t j = i;
        uint32_t cp = DecodeUtf8(s, &j);
        if (IsPySpace(cp)) {
          i = j;
          continue;
        }
        size_t start = i;
        while (i < s.size()) {
          size_t k = i;
          if (IsPySpace(DecodeUtf8(s, &k))) break;
          i = k;
        }
        words.emplace_back(start, i);
      }
      if (maxsplit < 0 || static_cast<size_t>(maxsplit) + 1 >= words.size()) {
        for (auto [a, b] : words) parts.push_back(s.substr(a, b - a));
      } else if (!from_right) {
        for (int64_t k = 0; k < maxsplit; ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
        parts.push_back(PyStrip(s.substr(words[maxsplit].first), nullptr, false, true));
      } else {
        size_t first = words.size() - maxsplit;
        parts.push_back(PyStrip(s.substr(0, words[first - 1].second), nullptr, true, false));
        for (size_t k = first; k < words.size(); ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      }
    } else {
      if (!sep->is_string()) return Err(at, "must be str or None");
      const std::string& d = sep->str();
      if (d.empty()) return Err(at, "empty separator");
      if (!from_right) {
        size_t start = 0;
        int64_t n = 0;
        for (size_t p = s.find(d); p != std::string::npos && (maxsplit < 0 || n < maxsplit);
             p = s.find(d, start), ++n) {
          parts.push_back(s.substr(start, p - start));
          start = p + d.size();
        }
        parts.push_back(s.substr(start));
      } else {
        size_t end = s.size();
        int64_t n = 0;
        std::vector<std::string> rev;
        while (maxsplit < 0 || n < maxsplit) {
          if (end < d.size()) break;
          size_t p = s.rfind(d, end - d.size());
          if (p == std::string::npos) break;
          rev.push_back(s.substr(p + d.size(), end - p - d.size()));
          end = p;
          ++n;
        }
        rev.push_back(s.substr(0, end));
        parts.assign(rev.rbegin(), rev.rend());
      }
    }
    std::vector<Value> items;
    for (std::string& p : parts) items.push_back(Value::String(std::move(p)));
    return MakeList(at, std::move(items));
  }

  absl::StatusOr<Value> Replace(const Expr& at, const std::string& s, const std::string& old_s,
                                const std::string& new_s, int64_t count) {
    std::string out;
    if (old_s.empty()) {
      std::vector<std::string> chars = Utf8Chars(s);
      int64_t n = 0;
      for (const std::string& c : chars) {
        if (count < 0 || n < count) {
          out += new_s;
          ++n;
        }
        out += c;
        RETURN_IF_ERROR(CheckString(at, out.size()));
      }
      if (count < 0 || n < count) out += new_s;
      return Value::String(std::move(out));
    }
    size_t start = 0;
    int64_t n = 0;
    for (size_t p = s.find(old_s); p != std::string::npos && (count < 0 || n < count);
         p = s.find(old_s, start), ++n) {
      out.append(s, start, p - start);
      out += new_s;
      start = p + old_s.size();
      RETURN_IF_ERROR(CheckString(at, out.size()));
    }
    out.append(s, start, std::string::npos);
    RETURN_IF_ERROR(CheckString(at, out.size()));
    return Value::String(std::move(out));
  }

  // str.format with {} / {0} / {name} fields (no format specs).
  absl::StatusOr<Value> Format(const Expr& at, const std::string& s,
                               const std::vector<Value>& args, const Kwargs& kwargs) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == '{' && i + 1 < s.size() && s[i + 1] == '{') {
        out.push_back('{');
        ++i;
      } else if (c == '}' && i + 1 < s.size() && s[i + 1] == '}') {
        out.push_back('}');
        ++i;
      } else if (c == '{') {
        size_t close = s.find('}', i);
        if (close == std::string::npos) return Err(at, "Single '{' encountered in format string");
        std::string field = s.substr(i + 1, close - i - 1);
        if (field.find_first_of(":!.[") != std::string::npos) {
          return Err(at, "unsupported: format specs in str.format");
        }
        const Value* v = nullptr;
        if (field.empty()) {
          v = auto_index < args.size() ? &args[auto_index] : nullptr;
          ++auto_index;
        } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
          size_t idx = std::stoul(field.substr(0, 9));
          v = idx < args.size() ? &args[idx] : nullptr;
        } else {
          for (const auto& [k, x] : kwargs) {
            if (k == field) v = &x;
          }
        }
        if (v == nullptr) return Err(at, absl::StrCat("format: missing argument '", field, "'"));
        v->StrTo(&out, opts_.max_output_bytes);
        i = close;
      } else if (c == '}') {
        return Err(at, "Single '}' encountered in format string");
      } else {
        out.push_back(c);
      }
      RETURN_IF_ERROR(CheckString(at, out.size()));
    }
    return Value::String(std::move(out));
  }

  // ---- Filters and tests ----

  // Attribute path "a.b" of an item, as Jinja's make_attrgetter.
  absl::StatusOr<Value> AttrPath(const Expr& at, const Value& item, const Value& path) {
    if (path.is_int()) return GetItem(at, item, path);
    if (!path.is_string()) return Err(at, "attribute must be a string");
    Value v = item;
    size_t start = 0;
    const std::string& p = path.str();
    while (true) {
      size_t dot = p.find('.', start);
      std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (v.is_undefined()) return Err(at, absl::StrCat("attribute '", part, "' of an undefined value"));
      bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      if (numeric && (v.is_list() || v.is_string())) {
        ASSIGN_OR_RETURN(v, GetItem(at, v, Value::Int(std::stoll(part.substr(0, 18)))));
      } else if (v.is_dict() || v.is_namespace()) {
        const Value* x = v.dict().Find(part);
        v = x == nullptr ? Value() : *x;
      } else {
        v = Value();
      }
      if (dot == std::string::npos) return v;
      start = dot + 1;
    }
  }

  absl::StatusOr<Value> ApplyFilter(const Expr& at, const std::string& name, const Value& v,
                                    const std::vector<Value>& args, const Kwargs& kwargs) {
    auto arg = [&](size_t i, absl::string_view kw) { return Arg(args, kwargs, i, kw); };
    if (name == "safe") return v;
    if (name == "default" || name == "d") {
      const Value* def = arg(0, "default_value");
      const Value* boolean = arg(1, "boolean");
      bool use_default = v.is_undefined() ||
                         (boolean != nullptr && boolean->Truthy() && !v.Truthy());
      if (!use_default) return v;
      return def != nullptr ? *def : Value::String("");
    }
    if (name == "length" || name == "count") {
      int64_t n = v.Length();
      if (n < 0) return Err(at, absl::StrCat("object of type '", PyTypeName(v), "' has no len()"));
      return Value::Int(n);
    }
    if (name == "string") {
      ASSIGN_OR_RETURN(std::string s, ToStr(at, v));
      return Value::String(std::move(s));
    }
    if (name == "tojson") {
      JsonDumpOptions o;
      o.max_bytes = opts_.max_output_bytes;
      if (const Value* x = arg(0, "ensure_ascii")) o.ensure_ascii = x->Truthy();
      if (const Value* x = arg(1, "indent"); x != nullptr && !x->is_none()) {
        o.has_indent = true;
        if (x->is_string()) {
          o.indent = x->str();
        } else if (x->is_int()) {
          o.indent = std::string(std::max<int64_t>(0, std::min<int64_t>(x->int_value(), 1000)), ' ');
        } else {
          return Err(at, "tojson: indent must be an int or a string");
        }
      }
      if (const Value* x = arg(2, "separators"); x != nullptr && !x->is_none()) {
        if (!x->is_list() || x->items().size() != 2 || !x->items()[0].is_string() ||
            !x->items()[1].is_string()) {
          return Err(at, "tojson: separators must be a pair of strings");
        }
        o.custom_item_separator = true;
        o.item_separator = x->items()[0].str();
        o.key_separator = x->items()[1].str();
      }
      if (const Value* x = arg(3, "sort_keys")) o.sort_keys = x->Truthy();
      auto json = JsonDumps(v, o);
      if (!json.ok()) return Err(at, json.status().message());
      return Value::String(*std::move(json));
    }
    if (name == "items") {
      if (v.is_undefined()) return MakeList(at, {});
      if (!v.is_dict()) return Err(at, "Can only get item pairs from a mapping.");
      std::vector<Value> items;
      for (const auto& [k, x] : v.dict().entries) items.push_back(Value::List({k, x}, true));
      return MakeList(at, std::move(items));
    }
    if (name == "list") {
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
      return MakeList(at, std::move(items));
    }
    if (name == "first" || name == "last") {
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
      if (v.is_string()) {
        std::vector<std::string> chars = Utf8Chars(v.str());
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
        return Value::String(std::move(out));
      }
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
      std::reverse(items.begin(), items.end());
      return MakeList(at, std::move(items));
    }
    if (name == "join") {
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
      const Value* d = arg(0, "d");
      const Value* attribute = arg(1, "attribute");
      std::string sep = d != nullptr ? d->Str() : "";
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += sep;
        Value item = items[i];
        if (attribute != nullptr && !attribute->is_none()) {
          ASSIGN_OR_RETURN(item, AttrPath(at, item, *attribute));
        }
        item.StrTo(&out, opts_.max_output_bytes);
        RETURN_IF_ERROR(CheckString(at, out.size()));
      }
      return Value::String(std::move(out));
    }
    if (name == "trim") {
      ASSIGN_OR_RETURN(std::string s, ToStr(at, v));
      const Value* chars = arg(0, "chars");
      const std::string* cs = chars != nullptr && chars->is_string() ? &chars->str() : nullptr;
      return Value::String(PyStrip(s, cs, true, true));
    }
    if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
      ASSIGN_OR_RETURN(std::string s, ToStr(at, v));
      if (name == "upper") return Value::String(PyUpper(s));
      if (name == "lower") return Value::String(PyLower(s));
      if (name == "title") return Value::String(JinjaTitle(s));
      s = PyLower(s);
      if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
      return Value::String(s);
    }
    if (name == "replace") {
      ASSIGN_OR_RETURN(std::string s, ToStr(at, v));
      const Value* old_s = arg(0, "old");
      const Value* new_s = arg(1, "new");
      const Value* count = arg(2, "count");
      if (old_s == nullptr || new_s == nullptr) return Err(at, "replace expects old and new");
      return Replace(at, s, old_s->Str(), new_s->Str(),
                     count != nullptr && count->is_int() ? count->int_value() : -1);
    }
    if (name == "int") {
      const Value* def = arg(0, "default");
      Value fallback = def != nullptr ? *def : Value::Int(0);
      if (v.is_int() || v.is_bool()) return Value::Int(v.int_value());
      if (v.is_float()) {
        double f = v.AsDouble();
        if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return fallback;
        return Value::Int(static_cast<int64_t>(f));
      }
      if (v.is_string()) {
        std::string s = PyStrip(v.str(), nullptr, true, true);
        char* end = nullptr;
        errno = 0;
        long long i = std::strtoll(s.c_str(), &end, 10);
        if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value::Int(i);
        double f = std::strtod(s.c_str(), &end);
        if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(f) && std::fabs(f) < 9.2e18) {
          return Value::Int(static_cast<int64_t>(f));
        }
      }
      return fallback;
    }
    if (name == "float") {
      const Value* def = arg(0, "default");
      Value fallback = def != nullptr ? *def : Value::Float(0.0);
      if (v.is_number()) return Value::Float(v.AsDouble());
      if (v.is_string()) {
        std::string s = PyStrip(v.str(), nullptr, true, true);
        char* end = nullptr;
        double f = std::strtod(s.c_str(), &end);
        if (!s.empty() && end == s.c_str() + s.size()) return Value::Float(f);
      }
      return fallback;
    }
    if (name == "abs") {
      if (v.is_float()) return Value::Float(std::fabs(v.AsDouble()));
      if (v.is_int() || v.is_bool()) {
        if (v.int_value() == std::numeric_limits<int64_t>::min()) return Err(at, "integer overflow");
        return Value::Int(std::llabs(v.int_value()));
      }
      return Err(at, absl::StrCat("bad operand type for abs(): '", PyTypeName(v), "'"));
    }
    if (name == "round") {
      const Value* precision = arg(0, "precision");
      const Value* method = arg(1, "method");
      int64_t p = precision != nullptr && precision->is_int() ? precision->int_value() : 0;
      std::string m = method != nullptr ? method->Str() : "common";
      if (m != "common" && m != "ceil" && m != "floor") {
        return Err(at, "method must be common, ceil or floor");
      }
      if (!v.is_number()) return Err(at, absl::StrCat("type ", PyTypeName(v), " doesn't define __round__"));
      if (m == "common" && !v.is_float()) return Value::Int(v.int_value());
      double scale = std::pow(10.0, static_cast<double>(p));
      double x = v.AsDouble() * scale;
      double r = m == "common" ? std::nearbyint(x) : m == "ceil" ? std::ceil(x) : std::floor(x);
      return Value::Float(r / scale);
    }
    if (name == "indent") {
      ASSIGN_OR_RETURN(std::string s, ToStr(at, v));
      const Value* width = arg(0, "width");
      const Value* first = arg(1, "first");
      const Value* blank = arg(2, "blank");
      std::string pad = width == nullptr ? "    "
                        : width->is_string() ? width->str()
                                             : std::string(std::max<int64_t>(0, std::min<int64_t>(width->int_value(), 1000)), ' ');
      std::vector<std::string> lines = PySplitLines(s + "\n");
      std::string out;
      if (blank != nullptr && blank->Truthy()) {
        out = absl::StrJoin(lines, "\n" + pad);
      } else {
        for (size_t i = 0; i < lines.size(); ++i) {
          if (i > 0) out += "\n" + (lines[i].empty() ? "" : pad);
          out += lines[i];
          RETURN_IF_ERROR(CheckString(at, out.size()));
        }
      }
      if (first != nullptr && first->Truthy()) out = pad + out;
      RETURN_IF_ERROR(CheckString(at, out.size()));
      return Value::String(std::move(out));
    }
    if (name == "escape" || name == "e") {
      ASSIGN_OR_RETURN(std::string s, ToStr(at, v));
      std::string out;
      for (char c : s) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out.push_back(c);
        }
      }
      RETURN_IF_ERROR(CheckString(at, out.size()));
      return Value::String(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      bool by_attr = name == "selectattr" || name == "rejectattr";
      bool keep_if = name == "selectattr" || name == "select";
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
      size_t next = 0;
      Value attr;
      if (by_attr) {
        if (args.empty()) return Err(at, absl::StrCat(name, ": missing attribute"));
        attr = args[next++];
      }
      std::string test;
      if (next < args.size()) test = args[next++].Str();
      std::vector<Value> test_args(args.begin() + next, args.end());
      if (!test.empty() && !IsKnownTest(test)) return Err(at, absl::StrCat("No test named '", test, "'."));
      std::vector<Value> kept;
      for (const Value& item : items) {
        Value x = item;
        if (by_attr) {
          ASSIGN_OR_RETURN(x, AttrPath(at, item, attr));
        }
        bool r;
        if (test.empty()) {
          r = x.Truthy();
        } else {
          ASSIGN_OR_RETURN(r, ApplyTest(at, test, x, test_args));
        }
        if (r == keep_if) kept.push_back(item);
      }
      return MakeList(at, std::move(kept));
    }
    if (name == "map") {
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
      const Value* attribute = nullptr;
      const Value* def = nullptr;
      for (const auto& [k, x] : kwargs) {
        if (k == "attribute") attribute = &x;
        if (k == "default") def = &x;
      }
      std::vector<Value> out;
      if (attribute != nullptr) {
        for (const Value& item : items) {
          ASSIGN_OR_RETURN(Value x, AttrPath(at, item, *attribute));
          if (x.is_undefined() && def != nullptr) x = *def;
          out.push_back(std::move(x));
        }
        return MakeList(at, std::move(out));
      }
      if (args.empty() || !args[0].is_string()) return Err(at, "map: expected a filter name or attribute=");
      std::string filter = args[0].str();
      if (!IsKnownFilter(filter)) return Err(at, absl::StrCat("No filter named '", filter, "'."));
      std::vector<Value> rest(args.begin() + 1, args.end());
      for (const Value& item : items) {
        ASSIGN_OR_RETURN(Value x, ApplyFilter(at, filter, item, rest, kwargs));
        out.push_back(std::move(x));
      }
      return MakeList(at, std::move(out));
    }
    if (name == "unique" || name == "sort" || name == "min" || name == "max" || name == "sum" ||
        name == "dictsort") {
      return ApplySequenceFilter(at, name, v, args, kwargs);
    }
    return Err(at, absl::StrCat("No filter named '", name, "'."));
  }

  absl::StatusOr<Value> ApplySequenceFilter(const Expr& at, const std::string& name, const Value& v,
                                            const std::vector<Value>& args, const Kwargs& kwargs) {
    auto arg = [&](size_t i, absl::string_view kw) { return Arg(args, kwargs, i, kw); };
    if (name == "dictsort") {
      if (!v.is_dict()) return Err(at, "dictsort: expected a mapping");
      const Value* cs = arg(0, "case_sensitive");
      const Value* by = arg(1, "by");
      const Value* reverse = arg(2, "reverse");
      bool case_sensitive = cs != nullptr && cs->Truthy();
      int pos = by != nullptr && by->is_string() && by->str() == "value" ? 1 : 0;
      std::vector<Value> items;
      for (const auto& [k, x] : v.dict().entries) items.push_back(Value::List({k, x}, true));
      absl::Status error;
      auto key = [&](const Value& item) {
        Value x = item.items()[pos];
        if (!case_sensitive && x.is_string()) return Value::String(PyLower(x.str()));
        return x;
      };
      std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        auto lt = Less(key(a), key(b));
        if (!lt.ok()) { error = lt.status(); return false; }
        return *lt;
      });
      if (!error.ok()) return Err(at, error.message());
      if (reverse != nullptr && reverse->Truthy()) std::reverse(items.begin(), items.end());
      return MakeList(at, std::move(items));
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(at, v));
    bool is_sort = name == "sort";
    const Value* reverse = is_sort ? arg(0, "reverse") : nullptr;
    const Value* cs = is_sort ? arg(1, "case_sensitive") : arg(0, "case_sensitive");
    const Value* attribute = is_sort ? arg(2, "attribute")
                             : name == "sum" ? arg(0, "attribute")
                                             : arg(1, "attribute");
    bool case_sensitive = cs != nullptr && cs->Truthy();
    std::vector<Value> keys;
    for (const Value& item : items) {
      Value k = item;
      if (attribute != nullptr && !attribute->is_none()) {
        ASSIGN_OR_RETURN(k, AttrPath(at, item, *attribute));
      }
      if (!case_sensitive && k.is_string() && name != "sum") k = Value::String(PyLower(k.str()));
      keys.push_back(std::move(k));
    }
    if (name == "sum") {
      const Value* start = arg(1, "start");
      Value total = start != nullptr ? *start : Value::Int(0);
      for (const Value& k : keys) {
        ASSIGN_OR_RETURN(total, Binary(at, "+", total, k));
      }
      return total;
    }
    if (name == "unique") {
      std::vector<Value> out, seen;
      for (size_t i = 0; i < items.size(); ++i) {
        bool dup = false;
        for (const Value& s : seen) dup = dup || Equals(s, keys[i]);
        if (dup) continue;
        seen.push_back(keys[i]);
        out.push_back(items[i]);
      }
      return MakeList(at, std::move(out));
    }
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    absl::Status error;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      auto lt = Less(keys[a], keys[b]);
      if (!lt.ok()) { error = lt.status(); return false; }
      return *lt;
    });
    if (!error.ok()) return Err(at, error.message());
    if (name == "min" || name == "max") {
      if (items.empty()) return Value();
      if (name == "min") return items[order.front()];
      // Python max() keeps the first of equal maxima.
      size_t best = order.back();
      for (size_t i = 0; i < items.size(); ++i) {
        auto lt = Less(keys[i], keys[best]);
        if (lt.ok() && !*lt && !Less(keys[best], keys[i]).value_or(true)) { best = i; break; }
      }
      return items[best];
    }
    std::vector<Value> out;
    if (reverse != nullptr && reverse->Truthy()) {
      // Python's sorted(reverse=True) keeps equal items in their order.
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return Less(keys[b], keys[a]).value_or(false);
      });
    }
    for (size_t i : order) out.push_back(items[i]);
    return MakeList(at, std::move(out));
  }

  absl::StatusOr<bool> ApplyTest(const Expr& at, const std::string& name, const Value& v,
                                 const std::vector<Value>& args) {
    auto need_arg = [&]() -> absl::StatusOr<Value> {
      if (args.empty()) return Err(at, absl::StrCat("test '", name, "' needs an argument"));
      return args[0];
    };
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.bool_value();
    if (name == "false") return v.is_bool() && !v.bool_value();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "callable") return v.is_callable();
    if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    if (name == "lower" || name == "upper") {
      if (!v.is_string()) return false;
      std::string s = v.str();
      return name == "lower" ? PyLower(s) == s : PyUpper(s) == s;
    }
    if (name == "odd" || name == "even" || name == "divisibleby") {
      if (!v.is_int() && !v.is_bool()) {
        if (!v.is_float()) return Err(at, absl::StrCat("test '", name, "' needs a number"));
      }
      if (name == "divisibleby") {
        ASSIGN_OR_RETURN(Value d, need_arg());
        ASSIGN_OR_RETURN(Value m, Binary(at, "%", v, d));
        return m.AsDouble() == 0;
      }
      ASSIGN_OR_RETURN(Value m, Binary(at, "%", v, Value::Int(2)));
      return (m.AsDouble() != 0) == (name == "odd");
    }
    if (name == "eq" || name == "equalto" || name == "==") {
      ASSIGN_OR_RETURN(Value o, need_arg());
      return Equals(v, o);
    }
    if (name == "ne" || name == "!=") {
      ASSIGN_OR_RETURN(Value o, need_arg());
      return !Equals(v, o);
    }
    if (name == "sameas") {
      ASSIGN_OR_RETURN(Value o, need_arg());
      if (v.is_none() || v.is_bool() || v.is_undefined()) return v.type() == o.type() && Equals(v, o);
      return Equals(v, o) && (v.is_list() || v.is_dict() || v.is_namespace()) &&
             v.Depth() == o.Depth();
    }
    if (name == "lt" || name == "lessthan" || name == "gt" || name == "greaterthan" ||
        name == "le" || name == "ge" || name == "<" || name == ">" || name == "<=" ||
        name == ">=") {
      ASSIGN_OR_RETURN(Value o, need_arg());
      std::string op = name == "lt" || name == "lessthan" ? "<"
                       : name == "gt" || name == "greaterthan" ? ">"
                       : name == "le" ? "<=" : name == "ge" ? ">=" : name;
      return Compare(at, op, v, o);
    }
    if (name == "in") {
      ASSIGN_OR_RETURN(Value o, need_arg());
      return Contains(at, o, v);
    }
    return Err(at, absl::StrCat("No test named '", name, "'."));
  }

  const RenderOptions& opts_;
  Frame root_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

bool IsKnownFilter(absl::string_view name) {
  static const char* const kFilters[] = {
      "abs", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first",
      "float", "indent", "int", "items", "join", "last", "length", "list", "lower", "map",
      "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
      "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper"};
  for (const char* f : kFilters) {
    if (name == f) return true;
  }
  return false;
}

bool IsKnownTest(absl::string_view name) {
  static const char* const kTests[] = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false",
      "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan",
      "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence",
      "string", "true", "undefined", "upper", "==", "!=", "<", ">", "<=", ">="};
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Template>> Template::Parse(absl::string_view source) {
  // Jinja normalizes newlines and drops one trailing newline
  // (keep_trailing_newline=False).
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text.push_back(source[i]);
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  ASSIGN_OR_RETURN(Body body, ParseTemplate(text));
  std::unique_ptr<Template> t(new Template());
  t->body_ = std::move(body);
  return t;
}

absl::StatusOr<std::string> Template::Render(const Value& globals,
                                             const RenderOptions& options) const {
  Renderer renderer(options);
  std::string out;
  RETURN_IF_ERROR(renderer.Run(body_, globals, &out));
  return out;
}

}  // namespace inferd::jinja
