#include "runtime/loader/safetensors.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/loader/test_util.h"

namespace inferd {
namespace {

using ::testing::HasSubstr;
using testing_util::Assemble;
using testing_util::BuildSafetensors;
using testing_util::Bytes;
using testing_util::HeaderFor;
using testing_util::LengthPrefix;
using testing_util::RawTensor;
using testing_util::ScratchDir;

RawTensor F32(const std::string& name, std::vector<int64_t> shape,
              std::vector<float> values) {
  return {name, "F32", std::move(shape), Bytes(values)};
}

TEST(SafetensorsTest, OpensFileAndReturnsZeroCopyViews) {
  ScratchDir dir;
  const std::string path = dir.Write(
      "m.safetensors",
      BuildSafetensors({F32("a", {2, 3}, {1, 2, 3, 4, 5, 6}),
                        F32("b", {3}, {7, 8, 9})},
                       {{"format", "pt"}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensor_count(), 2u);
  EXPECT_EQ((*file)->data_bytes(), 36u);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  EXPECT_THAT((*file)->Names(), ::testing::ElementsAre("a", "b"));

  auto a = (*file)->Get("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->rank, 2);
  EXPECT_EQ(a->dim(0), 2);
  EXPECT_EQ(a->dim(1), 3);
  EXPECT_EQ(a->strides[0], 3);
  EXPECT_TRUE(a->is_contiguous());
  float values[6];
  std::memcpy(values, a->data, sizeof(values));
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[5], 6.0f);
  auto b = (*file)->Get("b");
  ASSERT_TRUE(b.ok());
  // Zero copy: b follows a directly in the mapping.
  EXPECT_EQ(static_cast<const char*>(b->data),
            static_cast<const char*>(a->data) + 24);
  const SafetensorsTensorInfo* info = (*file)->Find("b");
  ASSERT_NE(info, nullptr);
  // The alignment is the largest power of two (<= 64) dividing the address.
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->data);
  EXPECT_EQ(addr % info->alignment, 0u);
  if (info->alignment < 64) {
    EXPECT_NE(addr % (info->alignment * 2), 0u);
  }
}

TEST(SafetensorsTest, ReadsEveryDType) {
  std::vector<RawTensor> tensors = {
      {"f32", "F32", {2}, Bytes(std::vector<float>{1.5f, -2.0f})},
      {"f16", "F16", {2}, Bytes(std::vector<uint16_t>{0x3c00, 0xc000})},
      {"bf16", "BF16", {2}, Bytes(std::vector<uint16_t>{0x3f80, 0xc000})},
      {"i8", "I8", {3}, Bytes(std::vector<int8_t>{-1, 0, 1})},
      {"u8", "U8", {1}, Bytes(std::vector<uint8_t>{255})},
      {"i32", "I32", {1}, Bytes(std::vector<int32_t>{-7})},
      {"i64", "I64", {2}, Bytes(std::vector<int64_t>{1, -1})},
      {"bool", "BOOL", {2}, Bytes(std::vector<uint8_t>{1, 0})},
      {"scalar", "F32", {}, Bytes(std::vector<float>{3.0f})},
      {"empty", "F32", {0, 4}, ""},
  };
  auto file = SafetensorsFile::FromBuffer(BuildSafetensors(tensors));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::pair<const char*, DType> expected[] = {
      {"f32", DType::kF32}, {"f16", DType::kF16}, {"bf16", DType::kBF16},
      {"i8", DType::kI8},   {"u8", DType::kU8},   {"i32", DType::kI32},
      {"i64", DType::kI64}, {"bool", DType::kU8}, {"scalar", DType::kF32},
      {"empty", DType::kF32}};
  for (const auto& [name, dtype] : expected) {
    auto view = (*file)->Get(name);
    ASSERT_TRUE(view.ok()) << name << ": " << view.status();
    EXPECT_EQ(view->dtype, dtype) << name;
  }
  auto i64 = (*file)->Get("i64");
  int64_t v[2];
  std::memcpy(v, i64->data, sizeof(v));
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ((*file)->Get("scalar")->rank, 0);
  EXPECT_EQ((*file)->Get("scalar")->numel(), 1);
  EXPECT_EQ((*file)->Get("empty")->numel(), 0);
}

TEST(SafetensorsTest, KnownButUnsupportedDTypeFailsOnlyOnGet) {
  auto file = SafetensorsFile::FromBuffer(BuildSafetensors(
      {{"d", "F64", {1}, Bytes(std::vector<double>{1.0})},
       F32("f", {1}, {2.0f})}));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->Get("f").ok());
  auto d = (*file)->Get("d");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("F64"));
}

TEST(SafetensorsTest, MissingTensorIsNotFoundNamingIt) {
  auto file = SafetensorsFile::FromBuffer(
      BuildSafetensors({F32("a", {1}, {1})}), "weights.st");
  ASSERT_TRUE(file.ok());
  auto v = (*file)->Get("nope");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(v.status().message(), HasSubstr("nope"));
  EXPECT_THAT(v.status().message(), HasSubstr("weights.st"));
  EXPECT_FALSE((*file)->Has("nope"));
}

TEST(SafetensorsTest, RejectsRankAboveTensorViewLimitOnGet) {
  auto file = SafetensorsFile::FromBuffer(BuildSafetensors(
      {F32("r5", {1, 1, 1, 1, 2}, {1, 2})}));
  ASSERT_TRUE(file.ok());
  EXPECT_THAT((*file)->Get("r5").status().message(), HasSubstr("rank 5"));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  auto file = SafetensorsFile::Open("/nonexistent/dir/x.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/dir/x"));
}

// Each malformed input must give INVALID_ARGUMENT whose message names the
// file and contains `expect` (the tensor or the problem).
struct Malformed {
  const char* label;
  std::string bytes;
  const char* expect;
};

std::vector<Malformed> MalformedCases() {
  const std::string good = BuildSafetensors(
      {F32("w", {2, 2}, {1, 2, 3, 4}), F32("b", {2}, {5, 6})});
  std::vector<Malformed> cases;
  cases.push_back({"empty file", "", "truncated"});
  cases.push_back({"shorter than length", "\x05\x00\x00", "truncated"});
  cases.push_back({"truncated data", good.substr(0, good.size() - 4), "'b'"});
  cases.push_back({"header length beyond file",
                   LengthPrefix(1000) + "{}", "exceeds the file size"});
  cases.push_back({"huge header length",
                   LengthPrefix(~0ull) + "{}", "exceeds the file size"});
  cases.push_back({"bad json", Assemble("{\"w\": [1, 2", ""), "not valid JSON"});
  cases.push_back({"not an object", Assemble("[1, 2]", ""), "not a JSON object"});
  cases.push_back({"binary garbage", Assemble(std::string("\xff\xfe\x00{", 4), ""),
                   "not valid JSON"});
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["data_offsets"] = {0, 16};
    cases.push_back({"offsets beyond data", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "'w'"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["data_offsets"] = {8, 0};
    cases.push_back({"begin after end", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "begin 8 > end 0"});
  }
  {
    nlohmann::json h = HeaderFor({F32("a", {2}, {1, 2}), F32("b", {2}, {3, 4})});
    h["b"]["data_offsets"] = {4, 12};
    cases.push_back({"overlapping tensors",
                     Assemble(h.dump(), Bytes(std::vector<float>{1, 2, 3, 4})),
                     "overlap"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["shape"] = {3};
    cases.push_back({"size mismatch", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "needs 12"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["shape"] = {1ull << 62, 1ull << 62};
    cases.push_back({"shape overflow", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "overflows"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["shape"] = {-2};
    cases.push_back({"negative dim", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "non-negative"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["dtype"] = "Q4_K";
    cases.push_back({"unknown dtype", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "unknown dtype 'Q4_K'"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"].erase("data_offsets");
    cases.push_back({"missing offsets", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "data_offsets"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"]["data_offsets"] = {0, 4, 8};
    cases.push_back({"three offsets", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "data_offsets"});
  }
  {
    nlohmann::json h = HeaderFor({F32("w", {2}, {1, 2})});
    h["w"] = "F32";
    cases.push_back({"entry not object", Assemble(h.dump(), Bytes(std::vector<float>{1, 2})),
                     "'w'"});
  }
  // The same name twice in the header text.
  cases.push_back({"duplicate names",
                   Assemble(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            Bytes(std::vector<float>{1, 2})),
                   "'w' appears more than once"});
  cases.push_back({"metadata not object",
                   Assemble(R"({"__metadata__": 3})", ""), "__metadata__"});
  return cases;
}

TEST(SafetensorsTest, RejectsMalformedBuffersWithClearErrors) {
  for (const Malformed& c : MalformedCases()) {
    auto file = SafetensorsFile::FromBuffer(c.bytes, "bad.safetensors");
    ASSERT_FALSE(file.ok()) << c.label;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument)
        << c.label << ": " << file.status();
    EXPECT_THAT(file.status().message(), HasSubstr("bad.safetensors")) << c.label;
    EXPECT_THAT(file.status().message(), HasSubstr(c.expect))
        << c.label << ": " << file.status();
  }
}

TEST(SafetensorsTest, RejectsMalformedFilesOnDisk) {
  ScratchDir dir;
  for (const Malformed& c : MalformedCases()) {
    const std::string path = dir.Write("bad.safetensors", c.bytes);
    auto file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << c.label;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << c.label;
    EXPECT_THAT(file.status().message(), HasSubstr(path)) << c.label;
  }
}

TEST(SafetensorsTest, ReportsTwoByteAlignmentOfOddlyPlacedData) {
  // A 2-byte BF16 tensor first pushes the F32 one to an address that is
  // only 2-byte aligned; the info must say so rather than pretend.
  std::vector<RawTensor> t = {
      {"bf", "BF16", {1}, Bytes(std::vector<uint16_t>{0x3f80})},
      F32("f", {1}, {1.0f})};
  nlohmann::json h = HeaderFor(t);
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  auto file = SafetensorsFile::FromBuffer(Assemble(header, t[0].bytes + t[1].bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsTensorInfo* f = (*file)->Find("f");
  const SafetensorsTensorInfo* bf = (*file)->Find("bf");
  ASSERT_NE(f, nullptr);
  // The data area starts 8-byte aligned (padded header, malloc'ed buffer).
  EXPECT_GE(bf->alignment, 8u);
  EXPECT_EQ(f->alignment, 2u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->data) % 2, 0u);
}

}  // namespace
}  // namespace inferd
