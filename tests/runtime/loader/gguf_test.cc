// GgufFile on GGUF files built byte by byte here: every value type, tensor
// layout and alignment, and the errors for malformed files (every
// truncation point, bad magic and version, impossible shapes, offsets
// outside the file, unknown types). Real GGUF files are checked against the
// PyPI gguf reader in tests/tools (gguf_reader_test.py).
#include "runtime/loader/gguf.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace inferd {
namespace {

// Writes GGUF bytes.
class Builder {
 public:
  template <typename T>
  Builder& Raw(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.append(b, sizeof(T));
    return *this;
  }
  Builder& Str(const std::string& s) {
    Raw<uint64_t>(s.size());
    bytes_ += s;
    return *this;
  }
  Builder& Header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    Raw<uint32_t>(0x46554747u).Raw<uint32_t>(version);
    return Raw<uint64_t>(tensors).Raw<uint64_t>(kvs);
  }
  Builder& Kv(const std::string& key, GgufValueType t) {
    Str(key);
    return Raw<uint32_t>(static_cast<uint32_t>(t));
  }
  Builder& Tensor(const std::string& name, std::vector<uint64_t> dims,
                  uint32_t type, uint64_t offset) {
    Str(name).Raw<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) Raw<uint64_t>(d);
    return Raw<uint32_t>(type).Raw<uint64_t>(offset);
  }
  Builder& Align(size_t a) {
    while (bytes_.size() % a != 0) bytes_.push_back('\0');
    return *this;
  }
  Builder& Data(size_t n, char fill) {
    bytes_.append(n, fill);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A small valid file: every scalar type, a string array, a nested array,
// an F32 tensor and a Q8_0 tensor, alignment 64.
std::string ValidFile() {
  Builder b;
  b.Header(2, 15);
  b.Kv("general.architecture", GgufValueType::kString).Str("llama");
  b.Kv("general.alignment", GgufValueType::kUint32).Raw<uint32_t>(64);
  b.Kv("u8", GgufValueType::kUint8).Raw<uint8_t>(200);
  b.Kv("i8", GgufValueType::kInt8).Raw<int8_t>(-100);
  b.Kv("u16", GgufValueType::kUint16).Raw<uint16_t>(60000);
  b.Kv("i16", GgufValueType::kInt16).Raw<int16_t>(-30000);
  b.Kv("u32", GgufValueType::kUint32).Raw<uint32_t>(4000000000u);
  b.Kv("i32", GgufValueType::kInt32).Raw<int32_t>(-2000000000);
  b.Kv("f32", GgufValueType::kFloat32).Raw<float>(0.5f);
  b.Kv("bool", GgufValueType::kBool).Raw<uint8_t>(1);
  b.Kv("u64", GgufValueType::kUint64).Raw<uint64_t>(1ull << 40);
  b.Kv("i64", GgufValueType::kInt64).Raw<int64_t>(-(1ll << 40));
  b.Kv("f64", GgufValueType::kFloat64).Raw<double>(1e-6);
  b.Kv("tokens", GgufValueType::kArray)
      .Raw<uint32_t>(static_cast<uint32_t>(GgufValueType::kString))
      .Raw<uint64_t>(3)
      .Str("<s>")
      .Str("")
      .Str("hello");
  b.Kv("nested", GgufValueType::kArray)
      .Raw<uint32_t>(static_cast<uint32_t>(GgufValueType::kArray))
      .Raw<uint64_t>(1)
      .Raw<uint32_t>(static_cast<uint32_t>(GgufValueType::kInt32))
      .Raw<uint64_t>(2)
      .Raw<int32_t>(7)
      .Raw<int32_t>(-7);
  // weight: 4 x 2 F32 = 32 bytes at 0; q: one Q8_0 row of 64 = 2 blocks of
  // 34 bytes at 64.
  b.Tensor("weight", {4, 2}, 0, 0);
  b.Tensor("q", {64}, 8, 64);
  b.Align(64);
  b.Data(32, '\x01').Data(32, '\0').Data(68, '\x02');
  return b.bytes();
}

TEST(GgufTest, ReadsEveryValueTypeAndTensor) {
  auto f = GgufFile::FromBuffer(ValidFile(), "valid.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetInt("u8"), 200);
  EXPECT_EQ(*g.GetInt("i8"), -100);
  EXPECT_EQ(*g.GetInt("u16"), 60000);
  EXPECT_EQ(*g.GetInt("i16"), -30000);
  EXPECT_EQ(*g.GetInt("u32"), 4000000000ll);
  EXPECT_EQ(*g.GetInt("i32"), -2000000000);
  EXPECT_EQ(*g.GetInt("u64"), 1ll << 40);
  EXPECT_EQ(*g.GetInt("i64"), -(1ll << 40));
  EXPECT_DOUBLE_EQ(*g.GetDouble("f32"), 0.5);
  EXPECT_DOUBLE_EQ(*g.GetDouble("f64"), 1e-6);
  EXPECT_EQ(g.Find("bool")->u, 1u);
  const GgufValue* tokens = g.Find("tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->elements.size(), 3u);
  EXPECT_EQ(tokens->elements[2].s, "hello");
  EXPECT_EQ(tokens->elements[1].s, "");
  const GgufValue* nested = g.Find("nested");
  ASSERT_EQ(nested->elements.size(), 1u);
  EXPECT_EQ(nested->elements[0].elements[1].i, -7);
  // Typed lookups name the key.
  EXPECT_EQ(g.GetString("u8").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetInt("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(g.GetInt("tokens").status().code(),
            absl::StatusCode::kInvalidArgument);

  ASSERT_EQ(g.tensors().size(), 2u);
  const GgufTensorInfo* w = g.FindTensor("weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{4, 2}));
  EXPECT_STREQ(w->type->name, "F32");
  EXPECT_EQ(w->nbytes, 32u);
  EXPECT_EQ(w->data[0], 1);
  const GgufTensorInfo* q = g.FindTensor("q");
  EXPECT_STREQ(q->type->name, "Q8_0");
  EXPECT_EQ(q->nbytes, 68u);
  EXPECT_EQ(q->data[0], 2);
  EXPECT_EQ(q->data - w->data, 64);
  EXPECT_EQ(g.data_bytes(), 100u);
}

TEST(GgufTest, EveryTruncationIsAnErrorNeverACrash) {
  const std::string full = ValidFile();
  // Up to the end of the last tensor's data, every shorter prefix fails.
  for (size_t n = 0; n < full.size(); ++n) {
    auto f = GgufFile::FromBuffer(full.substr(0, n), "cut.gguf");
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(f.status().message().find("cut.gguf"), std::string::npos);
  }
}

TEST(GgufTest, MalformedHeadersSayWhatIsWrong) {
  auto expect_error = [](const std::string& bytes, const std::string& text) {
    auto f = GgufFile::FromBuffer(bytes, "bad.gguf");
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_NE(f.status().message().find(text), std::string::npos)
        << f.status().message();
  };
  expect_error("GGML\3\0\0\0", "not a GGUF file");
  {
    Builder b;
    b.Header(0, 0, 1);
    expect_error(b.bytes(), "version 1 is not supported");
  }
  {
    Builder b;
    b.Header(1u << 30, 1u << 30);
    expect_error(b.bytes(), "cannot fit");
  }
  {
    Builder b;
    b.Header(0, 1).Kv("k", static_cast<GgufValueType>(99));
    expect_error(b.bytes(), "unknown value type 99");
  }
  {
    Builder b;
    b.Header(0, 1).Kv("k", GgufValueType::kArray)
        .Raw<uint32_t>(4).Raw<uint64_t>(1ull << 60);
    expect_error(b.bytes(), "elements, more than the file holds");
  }
  {
    Builder b;
    b.Header(0, 1).Kv("k", GgufValueType::kBool).Raw<uint8_t>(2);
    expect_error(b.bytes(), "bool is not 0 or 1");
  }
  {
    Builder b;
    b.Header(0, 2).Kv("k", GgufValueType::kUint8).Raw<uint8_t>(1)
        .Kv("k", GgufValueType::kUint8).Raw<uint8_t>(1);
    expect_error(b.bytes(), "appears twice");
  }
  {
    Builder b;
    b.Header(0, 1).Kv("general.alignment", GgufValueType::kUint32)
        .Raw<uint32_t>(48);
    expect_error(b.bytes(), "power-of-two");
  }
  {
    Builder b;
    b.Header(1, 0).Tensor("t", {4, 0}, 0, 0).Align(32).Data(64, 0);
    expect_error(b.bytes(), "impossible shape");
  }
  {
    Builder b;
    b.Header(1, 0).Tensor("t", {1, 1, 1, 1, 1}, 0, 0).Align(32).Data(64, 0);
    expect_error(b.bytes(), "5 dimensions");
  }
  {
    Builder b;
    b.Header(1, 0).Tensor("t", {1ull << 39, 1ull << 39}, 0, 0).Align(32);
    expect_error(b.bytes(), "impossible shape");
  }
  {
    Builder b;
    // 99: no ggml type (17, IQ2_XS, has a name since the IQ types were
    // listed).
    b.Header(1, 0).Tensor("t", {32}, 99, 0).Align(32).Data(64, 0);
    expect_error(b.bytes(), "ggml type 99");
  }
  {
    Builder b;  // a Q4_0 row of 40 values is not whole blocks of 32
    b.Header(1, 0).Tensor("t", {40}, 2, 0).Align(32).Data(64, 0);
    expect_error(b.bytes(), "not whole Q4_0 blocks");
  }
  {
    Builder b;
    b.Header(1, 0).Tensor("t", {4}, 0, 8).Align(32).Data(64, 0);
    expect_error(b.bytes(), "not a multiple of the alignment");
  }
  {
    Builder b;
    b.Header(1, 0).Tensor("t", {64}, 0, 0).Align(32).Data(100, 0);
    expect_error(b.bytes(), "runs past the end of the file");
  }
  {
    Builder b;
    b.Header(2, 0).Tensor("t", {4}, 0, 0).Tensor("t", {4}, 0, 32).Align(32)
        .Data(64, 0);
    expect_error(b.bytes(), "appears twice");
  }
}

TEST(GgufTest, OpenReportsMissingFiles) {
  auto f = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
}

TEST(GgufTest, GgmlTypeTableHasTheQuantizedLayouts) {
  struct Want {
    uint32_t id;
    const char* name;
    int64_t elements, bytes;
  } wants[] = {{2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
               {8, "Q8_0", 32, 34},   {12, "Q4_K", 256, 144},
               {14, "Q6_K", 256, 210}, {30, "BF16", 1, 2},
               {1, "F16", 1, 2}};
  for (const Want& w : wants) {
    const GgmlTypeInfo* t = FindGgmlType(w.id);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_STREQ(t->name, w.name);
    EXPECT_EQ(t->block_elements, w.elements) << w.name;
    EXPECT_EQ(t->block_bytes, w.bytes) << w.name;
  }
  EXPECT_EQ(FindGgmlType(4), nullptr);  // removed Q4_2
}

}  // namespace
}  // namespace inferd
