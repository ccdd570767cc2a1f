// libFuzzer target: the wire-format diagnosis of service/grpc/request_parse.cc
// against protobuf's own parser. The first byte picks the request type
// (the first four in request_fuzz's order, so its corpus seeds this one);
// the rest is the bytes a client sent. Protobuf is the reference: when it
// accepts the bytes, the diagnosis must find nothing wrong (no false
// alarm on a valid request), and when it rejects them, the diagnosis must
// say why (no rejection left unexplained: the client would get the
// generic message). Either disagreement traps.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "inferd/v1/inference.pb.h"
#include "inferd/v1/models.pb.h"
#include "service/grpc/request_parse.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

const google::protobuf::Message* Prototype(uint8_t pick) {
  namespace v1 = inferd::v1;
  switch (pick % 8) {
    case 0: return &v1::GenerateRequest::default_instance();
    case 1: return &v1::EmbedRequest::default_instance();
    case 2: return &v1::RerankRequest::default_instance();
    case 3: return &v1::ClassifyRequest::default_instance();
    case 4: return &v1::TokenizeRequest::default_instance();
    case 5: return &v1::DetokenizeRequest::default_instance();
    case 6: return &v1::GetModelRequest::default_instance();
    default: return &v1::ListModelsRequest::default_instance();
  }
}

// Map entries in key order, so that two parses of the same bytes compare
// equal.
std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Protobuf logs a line for each invalid string it meets.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 1),
                                size - 1);
  std::unique_ptr<google::protobuf::Message> msg(Prototype(data[0])->New());
  const bool protobuf_ok =
      msg->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  const absl::Status diagnosis =
      inferd::DiagnoseWireBytes(bytes, *msg->GetDescriptor());
  if (protobuf_ok != diagnosis.ok()) {
    fprintf(stderr, "protobuf %s; diagnosis: %s\n",
            protobuf_ok ? "accepts" : "rejects", diagnosis.ToString().c_str());
    __builtin_trap();
  }
  if (!diagnosis.ok()) {
    Check(diagnosis.code() == absl::StatusCode::kInvalidArgument);
    Check(!diagnosis.message().empty());
  }
  // ParseRequestBytes agrees, and a valid request round-trips.
  std::unique_ptr<google::protobuf::Message> parsed(msg->New());
  const absl::Status status = inferd::ParseRequestBytes(bytes, parsed.get());
  Check(status.ok() == protobuf_ok);
  if (protobuf_ok) {
    Check(Deterministic(*parsed) == Deterministic(*msg));
  }
  return 0;
}
