#include "runtime/loader/gguf_quant.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "device/bf16.h"

namespace inferd {
namespace {

uint16_t Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Q8_0: f16 scale d, 32 x int8: x = d * q.
void Q8_0(const uint8_t* b, float* y) {
  const float d = F16ToFloat(Half(b));
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q[j]);
}

// Q4_0: f16 scale d, 16 bytes of nibbles; low nibbles are values 0..15,
// high nibbles 16..31: x = d * (q - 8).
void Q4_0(const uint8_t* b, float* y) {
  const float d = F16ToFloat(Half(b));
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((q[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
  }
}

// Q4_1: f16 scale d and minimum m, then nibbles as Q4_0: x = d * q + m.
void Q4_1(const uint8_t* b, float* y) {
  const float d = F16ToFloat(Half(b));
  const float m = F16ToFloat(Half(b + 2));
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(q[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(q[j] >> 4) + m;
  }
}

// The 6-bit scale and minimum of sub-block j (0..7) of a Q4_K block, packed
// in 12 bytes.
void ScaleMinK4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q4_K (256 values): f16 d, f16 dmin, 12 bytes of 6-bit sub-block scales
// and minimums, 128 bytes of nibbles. Eight sub-blocks of 32: x = d * sc *
// q - dmin * m; each 32 bytes of nibbles hold two sub-blocks (low, high).
void Q4_K(const uint8_t* b, float* y) {
  const float d = F16ToFloat(Half(b));
  const float dmin = F16ToFloat(Half(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int sub = 0; sub < 8; sub += 2) {
    uint8_t sc, m;
    ScaleMinK4(sub, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    ScaleMinK4(sub + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
    q += 32;
    y += 64;
  }
}

// Q6_K (256 values): 128 bytes of low nibbles, 64 bytes of 2-bit high
// parts, 16 int8 sub-block scales, f16 d. Values are 6-bit, offset by 32:
// x = d * scale * (q - 32), in two halves of 128.
void Q6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = F16ToFloat(Half(b + 208));
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is + 0] * static_cast<float>(q1);
      y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
      y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
      y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

bool CanDequantize(const GgmlTypeInfo& type) {
  switch (type.id) {
    case 0: case 1: case 30: case 8: case 2: case 3: case 12: case 14:
      return true;
    default:
      return false;
  }
}

absl::Status DequantizeRow(const GgmlTypeInfo& type, const uint8_t* src,
                           int64_t n, float* dst) {
  if (!CanDequantize(type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ggml type ", type.name, " cannot be dequantized by inferd yet"));
  }
  if (n < 0 || n % type.block_elements != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, " values are not whole ", type.name, " blocks of ",
        type.block_elements));
  }
  const int64_t blocks = n / type.block_elements;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * type.block_bytes;
    float* y = dst + i * type.block_elements;
    switch (type.id) {
      case 0: std::memcpy(y, b, 4); break;
      case 1: *y = F16ToFloat(Half(b)); break;
      case 30: *y = Bf16ToFloat(Half(b)); break;
      case 8: Q8_0(b, y); break;
      case 2: Q4_0(b, y); break;
      case 3: Q4_1(b, y); break;
      case 12: Q4_K(b, y); break;
      case 14: Q6_K(b, y); break;
    }
  }
  return absl::OkStatus();
}

}  // namespace inferd
