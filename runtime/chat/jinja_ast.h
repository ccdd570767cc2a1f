// Internal: the syntax tree of a parsed Jinja-subset template, and the
// parser that builds it (jinja_parser.cc). Immutable after parsing, so one
// tree may be rendered by many threads at once.
#ifndef INFERD_RUNTIME_CHAT_JINJA_AST_H_
#define INFERD_RUNTIME_CHAT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/chat/jinja_value.h"

namespace inferd::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // args
    kTuple,      // args
    kDict,       // args: key, value, key, value...
    kAttr,       // args[0].name
    kSubscript,  // args[0][args[1]]
    kSlice,      // args: start, stop, step (null when absent)
    kCall,       // args[0](args[1:], kwargs)
    kFilter,     // args[0] | name(args[1:], kwargs)
    kTest,       // args[0] is [not] name(args[1:])
    kNeg,        // -args[0]
    kPos,        // +args[0]
    kNot,        // not args[0]
    kBinary,     // args[0] op args[1]: + - * / // % ** ~
    kAnd,
    kOr,
    kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ...
    kCond,       // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;              // name, attribute, filter, test, operator
  std::vector<std::string> ops;  // kCompare operators
  bool negated = false;          // kTest
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; else_body
    kFor,       // for targets in expr [if cond]: body; else_body
    kSet,       // set targets = expr  /  set target.attr = expr
    kSetBlock,  // set targets[0] %} body {% endset
    kMacro,     // macro name(params) body
    kBreak,
    kContinue,
    kBlock,     // body rendered in place ({% generation %}, {% with %})
  };
  Kind kind;
  int line = 0;
  int col = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;                      // kFor filter
  std::vector<ExprPtr> conditions;   // kIf
  std::vector<Body> bodies;          // kIf
  Body body;
  Body else_body;
  std::vector<std::string> targets;  // kFor / kSet names; kSet attr: {ns, attr}
  bool attr_target = false;          // kSet: set targets[0].targets[1] = ...
  std::string name;                  // kMacro
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro defaults
  // kBlock for {% with %}: assignments made in a new scope.
  std::vector<std::pair<std::string, ExprPtr>> with_vars;
  bool new_scope = false;
};

// Parses template source (after newline normalization) into statements.
// Errors are INVALID_ARGUMENT "line L:C: message".
absl::StatusOr<Body> ParseTemplate(absl::string_view source);

// Whether a filter / test name is implemented (checked at parse time, like
// Jinja's TemplateAssertionError for unknown filters).
bool IsKnownFilter(absl::string_view name);
bool IsKnownTest(absl::string_view name);

}  // namespace inferd::jinja

#endif  // INFERD_RUNTIME_CHAT_JINJA_AST_H_
