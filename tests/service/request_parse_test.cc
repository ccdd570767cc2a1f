#include "service/grpc/request_parse.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "grpcpp/support/slice.h"
#include "inferd/v1/inference.pb.h"
#include "inferd/v1/models.pb.h"

namespace inferd {
namespace {

using ::testing::HasSubstr;

// Wire-format writers (the encoding is written out by hand so that the
// tests can put bytes protobuf's own serializer would refuse).
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Field(int number, const std::string& payload) {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) +
         Varint(payload.size()) + payload;
}
std::string VarintField(int number, uint64_t v) {
  return Varint(static_cast<uint64_t>(number) << 3) + Varint(v);
}

// Silences protobuf's log line for each string it rejects.
class QuietProtobuf {
 public:
  QuietProtobuf() : old_(google::protobuf::SetLogHandler(nullptr)) {}
  ~QuietProtobuf() { google::protobuf::SetLogHandler(old_); }

 private:
  google::protobuf::LogHandler* old_;
};

std::string ErrorOf(const std::string& bytes, google::protobuf::Message* msg) {
  QuietProtobuf quiet;
  absl::Status s = ParseRequestBytes(bytes, msg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(RequestParseTest, ParsesAValidRequest) {
  v1::GenerateRequest want;
  want.set_model("m");
  want.set_prompt("caf\xc3\xa9 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
  want.mutable_sampling()->add_stop("\xe2\x82\xac");
  want.mutable_sampling()->set_max_tokens(7);
  (*want.mutable_sampling()->mutable_logit_bias())[3] = 1.5f;
  auto* m = want.add_messages();
  m->set_role("user");
  m->set_content("hi");
  want.mutable_response_format()->mutable_choice()->add_values("yes");
  const std::string bytes = want.SerializeAsString();
  v1::GenerateRequest got;
  got.set_model("stale");  // cleared by the parse
  ASSERT_TRUE(ParseRequestBytes(bytes, &got).ok());
  EXPECT_EQ(got.SerializeAsString(), bytes);
  EXPECT_TRUE(DiagnoseWireBytes(bytes, *v1::GenerateRequest::descriptor()).ok());
}

TEST(RequestParseTest, NamesTheStringFieldThatIsNotUtf8) {
  v1::TokenizeRequest tok;
  EXPECT_EQ(ErrorOf(Field(1, "embed") + Field(2, "ab\xff\xfe"), &tok),
            "text is not valid UTF-8 (byte 0xff at offset 2 of the string's "
            "4 bytes); string fields hold UTF-8 text: encode the text as "
            "UTF-8, replacing or dropping invalid bytes");
  EXPECT_EQ(tok.model(), "");  // nothing of a rejected request is kept

  v1::GenerateRequest gen;
  const std::string ok_msg = Field(1, "user") + Field(2, "ok");
  const std::string bad_msg = Field(1, "user") + Field(2, "x\xc3\x28");
  EXPECT_THAT(ErrorOf(Field(8, ok_msg) + Field(8, bad_msg), &gen),
              HasSubstr("messages[1].content is not valid UTF-8 (byte 0x28 at "
                        "offset 2 of the string's 3 bytes breaks the "
                        "character that starts at offset 1)"));
  EXPECT_THAT(ErrorOf(Field(6, Field(11, "a") + Field(11, "b\xe2\x82")), &gen),
              HasSubstr("sampling.stop[1] is not valid UTF-8 (the string's 3 "
                        "bytes end inside the character that starts at "
                        "offset 1)"));
  // A UTF-16 surrogate encoded in UTF-8.
  EXPECT_THAT(
      ErrorOf(Field(10, Field(3, Field(1, "\xed\xa0\x80"))), &gen),
      HasSubstr("response_format.choice.values[0] is not valid UTF-8 (byte "
                "0xa0 at offset 1"));
  // An overlong '/' in the oneof prompt.
  EXPECT_THAT(ErrorOf(Field(3, "\xc0\xaf"), &gen),
              HasSubstr("prompt is not valid UTF-8 (byte 0xc0 at offset 0"));
  EXPECT_THAT(ErrorOf(Field(10, Field(1, "{\"a\":\xf4\x90\x80\x80}")), &gen),
              HasSubstr("response_format.json_schema is not valid UTF-8 (byte "
                        "0x90 at offset 6"));

  v1::EmbedRequest embed;
  EXPECT_THAT(ErrorOf(Field(3, "a") + Field(3, "b") + Field(3, "\x80"), &embed),
              HasSubstr("texts[2] is not valid UTF-8 (byte 0x80 at offset 0"));
  v1::ClassifyRequest classify;
  EXPECT_THAT(
      ErrorOf(Field(3, Field(1, "a") + Field(2, "b\xfe")), &classify),
      HasSubstr("pairs[0].second is not valid UTF-8 (byte 0xfe at offset 1"));
  v1::RerankRequest rerank;
  EXPECT_THAT(ErrorOf(Field(2, "q") + Field(3, "d\xff"), &rerank),
              HasSubstr("documents[0] is not valid UTF-8"));
  v1::GetModelRequest get;
  EXPECT_THAT(ErrorOf(Field(1, "\xff"), &get),
              HasSubstr("name is not valid UTF-8"));
}

TEST(RequestParseTest, NamesTheFlawOfAMalformedMessage) {
  v1::TokenizeRequest tok;
  // A length past the end: the message was cut.
  const std::string cut = Field(1, "embed") + Field(2, std::string(300, 'a'));
  EXPECT_EQ(ErrorOf(cut.substr(0, 16), &tok),
            "the request is not a valid inferd.v1.TokenizeRequest message: at "
            "byte 7, field 2 (text) claims 300 bytes but 6 are left "
            "(truncated?)");
  EXPECT_THAT(ErrorOf(Field(1, "embed").substr(0, 5), &tok),
              HasSubstr("at byte 0, field 1 (model) claims 5 bytes but 3 are "
                        "left"));
  EXPECT_THAT(ErrorOf(std::string("\x08\xff\xff", 3), &tok),
              HasSubstr("at byte 0, field 1 (model): its varint is truncated"));
  EXPECT_THAT(ErrorOf(Varint(2 << 3 | 7) + "x", &tok),
              HasSubstr("field 2 (text) has wire type 7, which protobuf does "
                        "not define"));
  EXPECT_THAT(ErrorOf(VarintField(0, 1), &tok),
              HasSubstr("field number 0 is not allowed"));
  EXPECT_THAT(ErrorOf(Varint(9 << 3 | 4), &tok),
              HasSubstr("ends a group that was never started"));
  EXPECT_THAT(ErrorOf(Varint(9 << 3 | 3) + VarintField(1, 1), &tok),
              HasSubstr("the group of field 9 has no end"));
  // Packed lists: a varint cut short.
  v1::DetokenizeRequest detok;
  EXPECT_THAT(ErrorOf(Field(2, "\x01\x80"), &detok),
              HasSubstr("at byte 3, token_ids: a packed varint is truncated"));
  v1::GenerateRequest gen;
  EXPECT_THAT(ErrorOf(Field(4, Field(1, "\x05\xff")), &gen),
              HasSubstr("at byte 5 (in prompt_token_ids), "
                        "prompt_token_ids.ids: a packed varint is truncated"));
  // Inside a nested message, the path is given.
  EXPECT_THAT(ErrorOf(Field(8, Field(1, "user") + Varint(2 << 3 | 2) + "\x09"),
                      &gen),
              HasSubstr("at byte 8 (in messages[0]), field 2 (content) claims "
                        "9 bytes but 0 are left"));
}

TEST(RequestParseTest, AcceptsWhatProtobufAccepts) {
  // Unknown fields of every wire type, groups included, and a field sent
  // with another wire type than its own are kept as unknown fields.
  v1::TokenizeRequest tok;
  const std::string bytes =
      Field(1, "m") + VarintField(99, 5) + Field(100, "\xff") +
      Varint(101 << 3 | 3) + VarintField(1, 2) + Varint(102 << 3 | 3) +
      Varint(102 << 3 | 4) + Varint(101 << 3 | 4) +
      Varint(103 << 3 | 5) + std::string(4, '\0') + VarintField(2, 7);
  ASSERT_TRUE(ParseRequestBytes(bytes, &tok).ok());
  EXPECT_EQ(tok.model(), "m");
  EXPECT_TRUE(DiagnoseWireBytes(bytes, *v1::TokenizeRequest::descriptor()).ok());
  v1::ListModelsRequest list;
  EXPECT_TRUE(ParseRequestBytes("", &list).ok());
  // A 5-byte tag whose bits past 32 protobuf drops (found by
  // request_parse_fuzz; its corpus keeps the input as tag_past_32_bits).
  const std::string long_tag = Field(1, "m") + "\x9d\x8d\x96\x9d\x72" + "abcd";
  ASSERT_TRUE(ParseRequestBytes(long_tag, &tok).ok());
  EXPECT_EQ(tok.model(), "m");
  // Six bytes are one too many for a tag.
  EXPECT_THAT(ErrorOf(std::string("\x80\x80\x80\x80\x80\x01", 6), &tok),
              HasSubstr("at byte 0, a field tag is truncated or longer than 5 "
                        "bytes"));
}

// The UTF-8 check agrees with protobuf's own on random short strings that
// mix ASCII, continuation bytes, every kind of lead byte and the bytes at
// the edges of the valid ranges.
TEST(RequestParseTest, Utf8CheckAgreesWithProtobuf) {
  const unsigned char alphabet[] = {
      0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
      0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3,
      0xf4, 0xf5, 0xf8, 0xfe, 0xff};
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> len(0, 6);
  std::uniform_int_distribution<size_t> pick(0, sizeof(alphabet) - 1);
  QuietProtobuf quiet;
  int valid = 0;
  int invalid = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int n = len(rng);
    for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(alphabet[pick(rng)]));
    v1::TokenizeRequest msg;
    const bool protobuf_ok = msg.ParseFromString(Field(2, s));
    const size_t at = FirstInvalidUtf8(s);
    ASSERT_EQ(protobuf_ok, at == absl::string_view::npos)
        << "string " << testing::PrintToString(s);
    if (protobuf_ok) {
      ++valid;
    } else {
      ASSERT_LE(at, s.size());
      v1::TokenizeRequest parsed;
      absl::Status st = ParseRequestBytes(Field(2, s), &parsed);
      ASSERT_THAT(std::string(st.message()), HasSubstr("text is not valid UTF-8"));
      ++invalid;
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(valid, 1000);
  EXPECT_GT(invalid, 1000);
}

TEST(RequestParseTest, ReadsAByteBufferOfSeveralSlices) {
  v1::EmbedRequest want;
  want.set_model("embed");
  want.add_texts(std::string(5000, 'x'));
  const std::string bytes = want.SerializeAsString();
  std::vector<grpc::Slice> slices = {grpc::Slice(bytes.substr(0, 1000)),
                                     grpc::Slice(bytes.substr(1000))};
  grpc::ByteBuffer raw(slices.data(), slices.size());
  v1::EmbedRequest got;
  ASSERT_TRUE(ParseRequest(raw, &got).ok());
  EXPECT_EQ(got.texts(0), want.texts(0));

  grpc::ByteBuffer out;
  ASSERT_TRUE(SerializeResponse(want, &out).ok());
  v1::EmbedRequest back;
  ASSERT_TRUE(ParseRequest(out, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), bytes);

  grpc::ByteBuffer empty;
  v1::ListModelsRequest list;
  EXPECT_TRUE(ParseRequest(empty, &list).ok());
}

}  // namespace
}  // namespace inferd
