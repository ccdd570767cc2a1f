// The ggml types rewritten at load (runtime/loader/gguf_transcode.h): on
// random blocks, the rewritten blocks decode (device/quant.h, the decoders
// every kernel is checked against) to the values the source blocks decode
// to: bit for bit for Q3_K -> Q6_K and IQ4_NL -> Q8_0; within the f16
// rounding of the new scales for IQ4_XS -> Q8_0 and Q5_K -> Q5_1; within
// ggml's q8_0 rounding for Q2_K -> Q8_0. The source decoders themselves
// are checked against gguf-py (tests/gguf/gguf_reader_test.py).
#include "runtime/loader/gguf_transcode.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/bf16.h"
#include "device/quant.h"
#include "gtest/gtest.h"
#include "runtime/loader/gguf.h"
#include "runtime/loader/gguf_quant.h"

namespace inferd {
namespace {

const GgmlTypeInfo& Type(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeInfo* t = FindGgmlType(id);
    if (t != nullptr && name == t->name) return *t;
  }
  ADD_FAILURE() << "no ggml type " << name;
  static const GgmlTypeInfo none{};
  return none;
}

// `blocks` random blocks of `type` whose f16 fields at `halves` hold
// finite scales in [-0.05, 0.05] (random bytes could be inf or nan).
std::vector<uint8_t> RandomBlocks(const GgmlTypeInfo& type, int blocks,
                                  std::initializer_list<int> halves,
                                  uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  std::vector<uint8_t> out(static_cast<size_t>(blocks) * type.block_bytes);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(rng));
  for (int i = 0; i < blocks; ++i) {
    for (int h : halves) {
      const uint16_t v = FloatToF16(scale(rng));
      std::memcpy(out.data() + static_cast<size_t>(i) * type.block_bytes + h, &v, 2);
    }
  }
  return out;
}

struct Case {
  const char* type;
  std::initializer_list<int> halves;
  DType target;
  // Allowed error per value, relative to the largest |value| of its
  // block (0: bit for bit).
  double tolerance;
};

class TranscodeTest : public testing::TestWithParam<int> {};

const Case kCases[] = {
    {"Q3_K", {108}, DType::kQ6_K, 0.0},
    {"IQ4_NL", {0}, DType::kQ8_0, 0.0},
    // A scale rounded to f16 once: relative error <= 2^-11 of each value.
    {"IQ4_XS", {0}, DType::kQ8_0, 1.0 / 2048},
    // d * sc and dmin * m rounded to f16: each term within 2^-11 of itself.
    {"Q5_K", {0, 2}, DType::kQ5_1, 2.0 / 2048},
    // Requantized to int8 per 32: half a step of max / 127.
    {"Q2_K", {80, 82}, DType::kQ8_0, 0.5 / 127 + 1.0 / 2048},
};

TEST_P(TranscodeTest, RewrittenBlocksDecodeToTheSourceValues) {
  const Case& c = kCases[GetParam()];
  const GgmlTypeInfo& type = Type(c.type);
  ASSERT_EQ(TranscodeTarget(type.id), c.target);
  constexpr int kBlocks = 64;
  const std::vector<uint8_t> src = RandomBlocks(type, kBlocks, c.halves, 7 + GetParam());
  const int64_t n = int64_t{kBlocks} * type.block_elements;
  std::vector<float> want(static_cast<size_t>(n));
  ASSERT_TRUE(DequantizeRow(type, src.data(), n, want.data()).ok());
  std::vector<uint8_t> rewritten(DTypeRowBytes(c.target, n));
  ASSERT_TRUE(TranscodeRow(type, src.data(), n, rewritten.data()).ok());
  std::vector<float> got(static_cast<size_t>(n));
  ASSERT_TRUE(DequantizeRow(c.target, rewritten.data(), n, got.data()).ok());
  // Every block in its own terms: the error relative to its largest value
  // (Q5_K's and Q2_K's minima make values of either sign).
  const int64_t block = type.block_elements;
  int64_t nonzero = 0;
  for (int64_t b = 0; b < kBlocks; ++b) {
    double max_abs = 0.0;
    for (int64_t i = b * block; i < (b + 1) * block; ++i) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
    }
    for (int64_t i = b * block; i < (b + 1) * block; ++i) {
      ASSERT_TRUE(std::isfinite(want[i])) << c.type << " value " << i;
      nonzero += want[i] != 0.0f;
      if (c.tolerance == 0.0) {
        ASSERT_EQ(got[i], want[i]) << c.type << " value " << i;
      } else {
        ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]),
                  c.tolerance * max_abs + 1e-12)
            << c.type << " value " << i << " (block max " << max_abs << ")";
      }
    }
  }
  EXPECT_GT(nonzero, n / 2) << c.type;  // the blocks carry values
}

INSTANTIATE_TEST_SUITE_P(Types, TranscodeTest,
                         testing::Range(0, static_cast<int>(std::size(kCases))),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::string(kCases[i.param].type);
                         });

TEST(TranscodeTest, OtherTypesAreNotRewritten) {
  for (const char* name : {"F16", "Q4_0", "Q8_0", "Q4_K", "Q6_K"}) {
    EXPECT_FALSE(TranscodeTarget(Type(name).id).has_value()) << name;
  }
  std::vector<uint8_t> buf(1024);
  EXPECT_EQ(TranscodeRow(Type("Q4_0"), buf.data(), 32, buf.data()).code(),
            absl::StatusCode::kInvalidArgument);
  // Whole blocks only.
  EXPECT_EQ(TranscodeRow(Type("Q3_K"), buf.data(), 100, buf.data()).code(),
            absl::StatusCode::kInvalidArgument);
  // IQ2_XXS and the other IQ codebook types are refused by name.
  EXPECT_FALSE(CanDequantize(Type("IQ2_XXS")));
  EXPECT_TRUE(CanDequantize(Type("IQ4_XS")));
}

}  // namespace
}  // namespace inferd
