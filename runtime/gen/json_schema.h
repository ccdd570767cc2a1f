// CompileJsonSchema: turns a JSON Schema into a regular expression (ByteDfa
// syntax) whose full matches are exactly the compact JSON texts that
// validate against it (with the bounds below), for structured output.
// Stateless; thread-safe.
//
// Supported: "type" (object, array, string, number, integer, boolean, null,
// or a list of them), "properties" (emitted in the schema's order; the ones
// in "required" always, the others optionally), "required",
// "additionalProperties": false (also the default: no other keys),
// "items", "minItems", "maxItems", "enum", "const", "anyOf", "minLength",
// "maxLength", integer "minimum" / "maximum" / "exclusiveMinimum" /
// "exclusiveMaximum", "format" date / time / date-time / uuid, "$ref" to a
// "#/..." JSON pointer into the schema (e.g. "#/$defs/Address", inlined;
// "$defs" / "definitions" hold them), and the annotations title,
// description, default, examples, $schema, $id, $comment. Anything else
// (a recursive "$ref", "oneOf", "pattern", "multipleOf", ...) is
// INVALID_ARGUMENT naming the keyword and where it is.
//
// Shape of the output: no whitespace except an optional single space after
// ':' and ','; strings use only the escapes \" \\ \/ \b \f \n \r \t (other
// characters appear as themselves); integers have at most 16 digits,
// numbers at most 16 integer and 15 fraction digits and a 2-digit
// exponent (so every number is a finite double).
#ifndef INFERD_RUNTIME_GEN_JSON_SCHEMA_H_
#define INFERD_RUNTIME_GEN_JSON_SCHEMA_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd {

// `json`: the schema as JSON text. The error message says where (a JSON
// pointer into the schema) and what, e.g. "at /properties/a: '$ref' is not
// supported".
absl::StatusOr<std::string> CompileJsonSchema(absl::string_view json);

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_JSON_SCHEMA_H_
