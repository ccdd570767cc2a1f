// Request parsing for inferd's raw (ByteBuffer) gRPC handlers, with a
// diagnosis of bytes that do not parse.
//
// gRPC's C++ callback API answers a request its protobuf parser rejects
// with UNIMPLEMENTED and an empty message (unary and server-streaming
// calls), or ends the reads of a bidi stream as if the client had closed
// it; the reason is lost. So inferd registers its methods as raw callbacks
// and parses the bytes here: a request that protobuf rejects is walked
// field by field against its descriptor to find what is wrong, and the
// call is answered INVALID_ARGUMENT naming it, e.g.
//   messages[1].content is not valid UTF-8 (byte 0xff at offset 12 of the
//   string's 20 bytes); ...
//   the request is not a valid inferd.v1.TokenizeRequest message: at byte
//   9, field 2 (text) claims 300 bytes but 6 are left (truncated?)
// Pure functions; thread-safe.
#ifndef INFERD_SERVICE_GRPC_REQUEST_PARSE_H_
#define INFERD_SERVICE_GRPC_REQUEST_PARSE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace inferd {

// Parses `bytes` into `msg` (cleared first). OK, or INVALID_ARGUMENT with
// the diagnosis of DiagnoseWireBytes.
absl::Status ParseRequestBytes(absl::string_view bytes,
                               google::protobuf::Message* msg);

// The same for the payload of a raw gRPC call.
absl::Status ParseRequest(const grpc::ByteBuffer& raw,
                          google::protobuf::Message* msg);

// Serializes a response for a raw gRPC call. INTERNAL if protobuf fails
// (a message over 2 GiB).
absl::Status SerializeResponse(const google::protobuf::Message& msg,
                               grpc::ByteBuffer* out);

// What is wrong with `bytes` as an encoding of `type`: the first string
// field (proto3) that is not valid UTF-8, by its path from the request
// (`sampling.stop[1]`), or the first flaw of the wire format (a truncated
// varint or field, an invalid wire type or field number, an unmatched
// group), by its byte offset and the field it is in. OK when neither is
// found.
absl::Status DiagnoseWireBytes(absl::string_view bytes,
                               const google::protobuf::Descriptor& type);

// Offset of the first byte at which `s` stops being valid UTF-8 (RFC 3629:
// no overlong forms, surrogates or code points past U+10FFFF, as protobuf
// checks), or npos when all of it is valid.
size_t FirstInvalidUtf8(absl::string_view s);

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_REQUEST_PARSE_H_
