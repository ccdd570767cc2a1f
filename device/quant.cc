#include "device/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "device/bf16.h"

namespace inferd {
namespace {

uint16_t LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

void StoreHalf(uint8_t* p, float v) {
  const uint16_t h = FloatToF16(v);
  std::memcpy(p, &h, 2);
}

// ---- Dequantization, one block each -----------------------------------

void DequantQ8_0(const uint8_t* b, float* y) {
  const float d = F16ToFloat(LoadHalf(b));
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q[j]);
}

void DequantQ4_0(const uint8_t* b, float* y) {
  const float d = F16ToFloat(LoadHalf(b));
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((q[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
  }
}

void DequantQ4_1(const uint8_t* b, float* y) {
  const float d = F16ToFloat(LoadHalf(b));
  const float m = F16ToFloat(LoadHalf(b + 2));
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(q[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(q[j] >> 4) + m;
  }
}

// Q5: value j's bit 4 is bit j of the little-endian 32-bit qh word.
uint32_t LoadQh(const uint8_t* b) {
  uint32_t qh;
  std::memcpy(&qh, b, 4);
  return qh;
}

void DequantQ5(const uint8_t* b, float* y, bool with_min) {
  const float d = F16ToFloat(LoadHalf(b));
  const float m = with_min ? F16ToFloat(LoadHalf(b + 2)) : -16.0f * d;
  const uint32_t qh = LoadQh(b + (with_min ? 4 : 2));
  const uint8_t* q = b + (with_min ? 8 : 6);
  for (int j = 0; j < 16; ++j) {
    const int q0 = (q[j] & 0x0F) | (((qh >> j) & 1) << 4);
    const int q1 = (q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    if (with_min) {
      y[j] = d * static_cast<float>(q0) + m;
      y[j + 16] = d * static_cast<float>(q1) + m;
    } else {
      y[j] = d * static_cast<float>(q0 - 16);
      y[j + 16] = d * static_cast<float>(q1 - 16);
    }
  }
}

void ScaleMinK4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

void DequantQ4_K(const uint8_t* b, float* y) {
  const float d = F16ToFloat(LoadHalf(b));
  const float dmin = F16ToFloat(LoadHalf(b + 2));
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

// Two halves of 128 values; in a half, value l + 32 * i (l < 32) takes its
// low 4 bits from ql[l + 32 * (i % 2)] (low nibble for i < 2, else high)
// and its high 2 bits from qh[l] bits 2i..2i+1; value v uses scale v / 16.
void DequantQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = F16ToFloat(LoadHalf(b + 208));
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

// ---- Quantization, one block each ---------------------------------------

// ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d).
void QuantQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  int8_t* q = reinterpret_cast<int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

// ggml's quantize_row_q4_0_ref: the value of largest magnitude maps to -8,
// d = max / -8, q = min(15, trunc(x / d + 8.5)).
void QuantQ4_0(const float* x, uint8_t* b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
    q[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// ggml's quantize_row_q4_1_ref: d = (max - min) / 15, m = min,
// q = min(15, trunc((x - min) / d + 0.5)).
void QuantQ4_1(const float* x, uint8_t* b) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreHalf(b, d);
  StoreHalf(b + 2, min);
  uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
    const int q1 =
        std::min(15, static_cast<int>((x[j + 16] - min) * id + 0.5f));
    q[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// ggml's quantize_row_q5_0_ref / q5_1_ref: as Q4_0 / Q4_1 with 32 levels
// (Q5_0: d = max / -16, q = min(31, trunc(x / d + 16.5)); Q5_1: d = (max -
// min) / 31, q = trunc((x - min) / d + 0.5)); bit 4 of each q goes to qh.
void QuantQ5(const float* x, uint8_t* b, bool with_min) {
  float d, base = 0.0f;
  if (with_min) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    d = (max - min) / 31.0f;
    base = min;
    StoreHalf(b, d);
    StoreHalf(b + 2, min);
  } else {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    d = max / -16.0f;
    StoreHalf(b, d);
  }
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint32_t qh = 0;
  uint8_t* q = b + (with_min ? 8 : 6);
  for (int j = 0; j < 16; ++j) {
    int q0, q1;
    if (with_min) {
      q0 = std::min(31, static_cast<int>((x[j] - base) * id + 0.5f));
      q1 = std::min(31, static_cast<int>((x[j + 16] - base) * id + 0.5f));
    } else {
      q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
    }
    q[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  std::memcpy(b + (with_min ? 4 : 2), &qh, 4);
}

int ClampRound(float v, int lo, int hi) {
  const long r = std::lround(v);
  return static_cast<int>(std::min<long>(hi, std::max<long>(lo, r)));
}

// Per sub-block of 32: range [min(0, min x), max x] over 15 steps; the
// sub-block scales and mins are quantized to 6 bits against the block's
// largest ones.
void QuantQ4_K(const float* x, uint8_t* b) {
  float scale[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    float lo = 0.0f, hi = x[32 * s];
    for (int j = 0; j < 32; ++j) {
      lo = std::min(lo, x[32 * s + j]);
      hi = std::max(hi, x[32 * s + j]);
    }
    scale[s] = std::max(0.0f, hi - lo) / 15.0f;
    mins[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, mins[s]);
  }
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  StoreHalf(b, d);
  StoreHalf(b + 2, dmin);
  const float dh = F16ToFloat(LoadHalf(b)), dminh = F16ToFloat(LoadHalf(b + 2));
  uint8_t sc[8], m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = static_cast<uint8_t>(
        dh > 0.0f ? ClampRound(scale[s] / dh, 0, 63) : 0);
    m[s] = static_cast<uint8_t>(
        dminh > 0.0f ? ClampRound(mins[s] / dminh, 0, 63) : 0);
  }
  uint8_t* packed = b + 4;
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    packed[j + 8] =
        static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
  }
  uint8_t* q = b + 16;
  for (int pair = 0; pair < 4; ++pair) {
    int qv[2][32];
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * pair + h;
      const float step = dh * sc[s], off = dminh * m[s];
      for (int l = 0; l < 32; ++l) {
        qv[h][l] =
            step > 0.0f ? ClampRound((x[32 * s + l] + off) / step, 0, 15) : 0;
      }
    }
    for (int l = 0; l < 32; ++l) {
      q[32 * pair + l] = static_cast<uint8_t>(qv[0][l] | (qv[1][l] << 4));
    }
  }
}

// Per sub-block of 16: step max|x| / 31 (q - 32 in [-31, 31]); the steps
// are quantized to int8 against the block's largest one.
void QuantQ6_K(const float* x, uint8_t* b) {
  float step[16];
  float max_step = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(x[16 * s + j]));
    step[s] = amax / 31.0f;
    max_step = std::max(max_step, step[s]);
  }
  const float d = max_step / 127.0f;
  StoreHalf(b + 208, d);
  const float dh = F16ToFloat(LoadHalf(b + 208));
  int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int s = 0; s < 16; ++s) {
    sc[s] = static_cast<int8_t>(dh > 0.0f ? ClampRound(step[s] / dh, 0, 127)
                                          : 0);
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  std::memset(ql, 0, 192);
  for (int v = 0; v < 256; ++v) {
    const float st = dh * sc[v / 16];
    const int q = (st > 0.0f ? ClampRound(x[v] / st, -32, 31) : 0) + 32;
    const int half = v / 128, i = (v % 128) / 32, l = v % 32;
    uint8_t& low = ql[64 * half + l + 32 * (i % 2)];
    low = static_cast<uint8_t>(low | ((q & 0x0F) << (i < 2 ? 0 : 4)));
    qh[32 * half + l] =
        static_cast<uint8_t>(qh[32 * half + l] | ((q >> 4) << (2 * i)));
  }
}

absl::Status CheckRow(absl::string_view what, DType dtype, int64_t n) {
  const int64_t block = DTypeBlockElements(dtype);
  if (n < 0 || n % block != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", n, " values are not whole ", DTypeName(dtype),
                     " blocks of ", block));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DequantizeRow(DType dtype, const void* src, int64_t n,
                           float* dst) {
  if (!IsBlockQuantized(dtype) && dtype != DType::kF32 &&
      dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("DequantizeRow: unsupported dtype ", DTypeName(dtype)));
  }
  absl::Status st = CheckRow("DequantizeRow", dtype, n);
  if (!st.ok()) return st;
  const auto* s = static_cast<const uint8_t*>(src);
  const int64_t block = DTypeBlockElements(dtype);
  const size_t bytes = DTypeBlockBytes(dtype);
  for (int64_t i = 0; i < n / block; ++i) {
    const uint8_t* b = s + i * bytes;
    float* y = dst + i * block;
    switch (dtype) {
      case DType::kF32: std::memcpy(y, b, 4); break;
      case DType::kF16: *y = F16ToFloat(LoadHalf(b)); break;
      case DType::kBF16: *y = Bf16ToFloat(LoadHalf(b)); break;
      case DType::kQ8_0: DequantQ8_0(b, y); break;
      case DType::kQ4_0: DequantQ4_0(b, y); break;
      case DType::kQ4_1: DequantQ4_1(b, y); break;
      case DType::kQ4_K: DequantQ4_K(b, y); break;
      case DType::kQ6_K: DequantQ6_K(b, y); break;
      case DType::kQ5_0: DequantQ5(b, y, false); break;
      case DType::kQ5_1: DequantQ5(b, y, true); break;
      default: break;
    }
  }
  return absl::OkStatus();
}

absl::Status QuantizeRow(DType dtype, const float* src, int64_t n,
                         void* dst) {
  if (!IsBlockQuantized(dtype) && dtype != DType::kF32 &&
      dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("QuantizeRow: unsupported dtype ", DTypeName(dtype)));
  }
  absl::Status st = CheckRow("QuantizeRow", dtype, n);
  if (!st.ok()) return st;
  auto* d = static_cast<uint8_t*>(dst);
  const int64_t block = DTypeBlockElements(dtype);
  const size_t bytes = DTypeBlockBytes(dtype);
  for (int64_t i = 0; i < n / block; ++i) {
    const float* x = src + i * block;
    uint8_t* b = d + i * bytes;
    switch (dtype) {
      case DType::kF32: std::memcpy(b, x, 4); break;
      case DType::kF16: {
        const uint16_t h = FloatToF16(*x);
        std::memcpy(b, &h, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t h = FloatToBf16(*x);
        std::memcpy(b, &h, 2);
        break;
      }
      case DType::kQ8_0: QuantQ8_0(x, b); break;
      case DType::kQ4_0: QuantQ4_0(x, b); break;
      case DType::kQ4_1: QuantQ4_1(x, b); break;
      case DType::kQ4_K: QuantQ4_K(x, b); break;
      case DType::kQ6_K: QuantQ6_K(x, b); break;
      case DType::kQ5_0: QuantQ5(x, b, false); break;
      case DType::kQ5_1: QuantQ5(x, b, true); break;
      default: break;
    }
  }
  return absl::OkStatus();
}

}  // namespace inferd
