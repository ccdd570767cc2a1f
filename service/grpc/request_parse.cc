#include "service/grpc/request_parse.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/slice.h"

namespace inferd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

// Where a string stops being valid UTF-8: `at` is the first byte that
// cannot belong to valid UTF-8 there (s.size() when the string ends inside
// a character) and `start` the first byte of the character it breaks.
struct Utf8Break {
  size_t start = absl::string_view::npos;
  size_t at = absl::string_view::npos;
};

Utf8Break FindUtf8Break(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Length of the character and the range of its second byte (which
    // rules out overlong forms, surrogates and code points past U+10FFFF).
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c == 0xE0) {
      len = 3;
      lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      len = 3;
    } else if (c == 0xED) {
      len = 3;
      hi = 0x9F;
    } else if (c == 0xF0) {
      len = 4;
      lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      len = 4;
    } else if (c == 0xF4) {
      len = 4;
      hi = 0x8F;
    } else {
      return {i, i};  // a continuation byte or a byte UTF-8 never uses
    }
    for (int k = 1; k < len; ++k) {
      if (i + k >= n) return {i, n};
      const unsigned char b = p[i + k];
      const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) return {i, i + k};
    }
    i += len;
  }
  return {};
}

std::string Bytes(size_t n) {
  return n == 1 ? "1 byte" : absl::StrCat(n, " bytes");
}

std::string Utf8Problem(absl::string_view path, absl::string_view s,
                        const Utf8Break& b) {
  std::string where;
  if (b.at == s.size()) {
    where = absl::StrFormat(
        "the string's %s end inside the character that starts at offset %d",
        Bytes(s.size()), b.start);
  } else {
    where = absl::StrFormat("byte 0x%02x at offset %d of the string's %s",
                            static_cast<unsigned char>(s[b.at]), b.at,
                            Bytes(s.size()));
    if (b.start != b.at) {
      absl::StrAppendFormat(&where,
                            " breaks the character that starts at offset %d",
                            b.start);
    }
  }
  return absl::StrCat(
      path, " is not valid UTF-8 (", where,
      "); string fields hold UTF-8 text: encode the text as UTF-8, replacing "
      "or dropping invalid bytes");
}

// Walks the wire format of one message against its descriptor. Offsets in
// the errors count from the start of the request.
class WireChecker {
 public:
  WireChecker(absl::string_view bytes, const Descriptor& root)
      : bytes_(bytes), root_(root) {}

  absl::Status Check(const Descriptor& type, size_t begin, size_t end,
                     const std::string& path, int depth) {
    if (depth > kMaxDepth) {
      return Malformed(path, begin,
                       absl::StrCat("messages nest deeper than ", kMaxDepth,
                                    " levels"));
    }
    const bool proto3 = type.file()->syntax() == FileDescriptor::SYNTAX_PROTO3;
    std::map<int, int> seen;  // occurrences per field number (list indices)
    size_t pos = begin;
    while (pos < end) {
      const size_t tag_at = pos;
      uint64_t tag = 0;
      if (!ReadTag(&pos, end, &tag)) {
        return Malformed(path, tag_at,
                         "a field tag is truncated or longer than 5 bytes");
      }
      const uint64_t number = tag >> 3;
      const int wire = static_cast<int>(tag & 7);
      if (number == 0) {
        return Malformed(path, tag_at, "field number 0 is not allowed");
      }
      const FieldDescriptor* field =
          type.FindFieldByNumber(static_cast<int>(number));
      const std::string label =
          field != nullptr
              ? absl::StrCat("field ", number, " (", field->name(), ")")
              : absl::StrCat("field ", number);
      switch (wire) {
        case 0: {  // varint
          uint64_t v = 0;
          if (!ReadVarint(&pos, end, &v)) {
            return Malformed(path, tag_at,
                             absl::StrCat(label, ": its varint is truncated "
                                                 "or longer than 10 bytes"));
          }
          break;
        }
        case 1:  // 64-bit
        case 5: {  // 32-bit
          const size_t size = wire == 1 ? 8 : 4;
          if (end - pos < size) {
            return Malformed(path, tag_at,
                             absl::StrCat(label, ": needs ", size,
                                          " bytes but ", end - pos,
                                          " are left (truncated?)"));
          }
          pos += size;
          break;
        }
        case 2: {  // length-delimited
          uint64_t len = 0;
          if (!ReadVarint(&pos, end, &len, kMaxSizeBytes)) {
            return Malformed(path, tag_at,
                             absl::StrCat(label, ": its length is truncated"));
          }
          if (len > end - pos) {
            return Malformed(path, tag_at,
                             absl::StrCat(label, " claims ", len,
                                          " bytes but ", end - pos,
                                          " are left (truncated?)"));
          }
          const size_t value_at = pos;
          pos += len;
          if (field == nullptr) break;
          std::string name =
              path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
          // A list element's index (a packed list comes in one piece).
          if (field->is_repeated() && !field->is_packable()) {
            absl::StrAppend(&name, "[", seen[field->number()]++, "]");
          }
          if (field->type() == FieldDescriptor::TYPE_STRING && proto3) {
            const absl::string_view s = bytes_.substr(value_at, len);
            const Utf8Break b = FindUtf8Break(s);
            if (b.at != absl::string_view::npos) {
              return absl::InvalidArgumentError(Utf8Problem(name, s, b));
            }
          } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
            absl::Status s = Check(*field->message_type(), value_at,
                                   value_at + len, name, depth + 1);
            if (!s.ok()) return s;
          } else if (field->is_packable()) {
            absl::Status s = CheckPacked(*field, value_at, value_at + len,
                                         name, path, tag_at);
            if (!s.ok()) return s;
          }
          break;
        }
        case 3: {  // start group: skip to its end group
          absl::Status s = SkipGroup(static_cast<int>(number), tag_at, &pos,
                                     end, path, depth);
          if (!s.ok()) return s;
          break;
        }
        case 4:
          return Malformed(path, tag_at,
                           absl::StrCat(label, ": ends a group that was "
                                               "never started"));
        default:
          return Malformed(path, tag_at,
                           absl::StrCat(label, " has wire type ", wire,
                                        ", which protobuf does not define"));
      }
    }
    return absl::OkStatus();
  }

 private:
  // Protobuf's own parser stops at this depth.
  static constexpr int kMaxDepth = 100;

  // Protobuf reads tags and lengths as 32-bit varints of at most 5 bytes
  // (a tag's bits past 32 are dropped), other varints in at most 10.
  static constexpr int kMaxSizeBytes = 5;

  bool ReadVarint(size_t* pos, size_t end, uint64_t* value,
                  int max_bytes = 10) const {
    uint64_t v = 0;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
      if (*pos >= end) return false;
      const auto b = static_cast<unsigned char>(bytes_[(*pos)++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;
  }

  // The values of a packed repeated scalar field: whole varints, or a
  // whole number of fixed-size values.
  absl::Status CheckPacked(const FieldDescriptor& field, size_t begin,
                           size_t end, const std::string& name,
                           const std::string& path, size_t tag_at) {
    size_t fixed = 0;
    switch (field.type()) {
      case FieldDescriptor::TYPE_FIXED32:
      case FieldDescriptor::TYPE_SFIXED32:
      case FieldDescriptor::TYPE_FLOAT:
        fixed = 4;
        break;
      case FieldDescriptor::TYPE_FIXED64:
      case FieldDescriptor::TYPE_SFIXED64:
      case FieldDescriptor::TYPE_DOUBLE:
        fixed = 8;
        break;
      default:
        break;
    }
    if (fixed != 0) {
      if ((end - begin) % fixed == 0) return absl::OkStatus();
      return Malformed(path, tag_at,
                       absl::StrCat(name, " packs ", end - begin,
                                    " bytes, not a whole number of ", fixed,
                                    "-byte values"));
    }
    size_t pos = begin;
    while (pos < end) {
      const size_t at = pos;
      uint64_t v = 0;
      if (!ReadVarint(&pos, end, &v)) {
        return Malformed(path, at,
                         absl::StrCat(name, ": a packed varint is truncated "
                                            "or longer than 10 bytes"));
      }
    }
    return absl::OkStatus();
  }

  bool ReadTag(size_t* pos, size_t end, uint64_t* tag) const {
    if (!ReadVarint(pos, end, tag, kMaxSizeBytes)) return false;
    *tag &= UINT32_MAX;
    return true;
  }

  // Skips the fields of a group (nested groups included) through the end
  // group of `number`.
  absl::Status SkipGroup(int number, size_t start_at, size_t* pos, size_t end,
                         const std::string& path, int depth) {
    std::vector<int> open = {number};
    while (!open.empty()) {
      if (depth + static_cast<int>(open.size()) > kMaxDepth) {
        return Malformed(path, start_at,
                         absl::StrCat("groups nest deeper than ", kMaxDepth,
                                      " levels"));
      }
      const size_t tag_at = *pos;
      uint64_t tag = 0;
      if (*pos >= end) {
        return Malformed(path, start_at,
                         absl::StrCat("the group of field ", open.back(),
                                      " has no end (truncated?)"));
      }
      if (!ReadTag(pos, end, &tag) || (tag >> 3) == 0) {
        return Malformed(path, tag_at, "a field tag is truncated or invalid");
      }
      const int n = static_cast<int>(tag >> 3);
      uint64_t v = 0;
      switch (tag & 7) {
        case 0:
          if (!ReadVarint(pos, end, &v)) {
            return Malformed(path, tag_at, "a varint is truncated");
          }
          break;
        case 1:
        case 5: {
          const size_t size = (tag & 7) == 1 ? 8 : 4;
          if (end - *pos < size) {
            return Malformed(path, tag_at, "a fixed-size field is truncated");
          }
          *pos += size;
          break;
        }
        case 2:
          if (!ReadVarint(pos, end, &v, kMaxSizeBytes) || v > end - *pos) {
            return Malformed(path, tag_at,
                             "a length-delimited field is truncated");
          }
          *pos += v;
          break;
        case 3:
          open.push_back(n);
          break;
        case 4:
          if (n != open.back()) {
            return Malformed(path, tag_at,
                             absl::StrCat("the end of group ", n,
                                          " closes group ", open.back()));
          }
          open.pop_back();
          break;
        default:
          return Malformed(path, tag_at,
                           absl::StrCat("wire type ", tag & 7,
                                        " is not defined by protobuf"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Malformed(const std::string& path, size_t at,
                         absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request is not a valid ", root_.full_name(), " message: at byte ",
        at, path.empty() ? "" : absl::StrCat(" (in ", path, ")"), ", ", what));
  }

  absl::string_view bytes_;
  const Descriptor& root_;
};

}  // namespace

size_t FirstInvalidUtf8(absl::string_view s) { return FindUtf8Break(s).at; }

absl::Status DiagnoseWireBytes(absl::string_view bytes,
                               const Descriptor& type) {
  WireChecker checker(bytes, type);
  return checker.Check(type, 0, bytes.size(), "", 0);
}

absl::Status ParseRequestBytes(absl::string_view bytes,
                               google::protobuf::Message* msg) {
  msg->Clear();
  if (bytes.size() <= static_cast<size_t>(INT32_MAX) &&
      msg->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::OkStatus();
  }
  msg->Clear();
  absl::Status why = DiagnoseWireBytes(bytes, *msg->GetDescriptor());
  if (!why.ok()) return why;
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ",
                   msg->GetDescriptor()->full_name(), " message (",
                   bytes.size(), " bytes that protobuf could not parse)"));
}

absl::Status ParseRequest(const grpc::ByteBuffer& raw,
                          google::protobuf::Message* msg) {
  if (!raw.Valid()) return ParseRequestBytes("", msg);  // an empty message
  grpc::Slice slice;
  // One slice is parsed in place; several (a large message) are joined.
  if (!raw.TrySingleSlice(&slice).ok() &&
      !raw.DumpToSingleSlice(&slice).ok()) {
    return absl::InternalError("could not read the request's bytes");
  }
  return ParseRequestBytes(
      absl::string_view(reinterpret_cast<const char*>(slice.begin()),
                        slice.size()),
      msg);
}

absl::Status SerializeResponse(const google::protobuf::Message& msg,
                               grpc::ByteBuffer* out) {
  bool own_buffer = false;
  grpc::Status s = grpc::SerializationTraits<google::protobuf::Message>::Serialize(
      msg, out, &own_buffer);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("could not serialize the ",
                                            msg.GetDescriptor()->full_name(),
                                            ": ", s.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace inferd
