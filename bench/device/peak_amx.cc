// Register-only AMX loops measuring the tile dot-product peaks (tdpbf16ps,
// tdpbusd). Compiled with the AMX flags; called only after AmxUsable()
// (device/cpu/cpu_features.h) has checked the CPU, the OS and the Linux
// tile-data permission.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace inferd {
namespace bench {
namespace {

// Palette 1: tiles 0-3 accumulators (16 rows x 16 F32 / int32), 4-5 the A
// operands, 6-7 the B operands, each 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Configures the tiles, zeroes the accumulators and loads a (tiles 4, 5)
// and b (6, 7), 16 rows of 64 bytes each.
void SetUpTiles(const void* a, const void* b) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
}

// Stores accumulator 0 to out (16 rows of 64 bytes) and releases the tiles.
void TearDownTiles(void* out) {
  _tile_stored(0, out, 64);
  _tile_release();
}

}  // namespace

// Operations executed (2 per multiply-add): each tdpbf16ps is a 16 x 16
// output tile over 32 BF16 products per element.
double AmxBf16Loop(int64_t iters) {
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) a[i] = b[i] = 0x3c00;  // bf16 2^-7
  alignas(64) float out[16 * 16];
  SetUpTiles(a, b);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  TearDownTiles(out);
  volatile float sink = out[0];
  (void)sink;
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}

// As AmxBf16Loop for tdpbusd: 64 u8 x s8 products per output element.
double AmxInt8Loop(int64_t iters) {
  alignas(64) uint8_t a[16 * 64], b[16 * 64];
  std::memset(a, 1, sizeof(a));
  std::memset(b, 1, sizeof(b));
  alignas(64) int32_t out[16 * 16];
  SetUpTiles(a, b);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  TearDownTiles(out);
  volatile int32_t sink = out[0];
  (void)sink;
  return static_cast<double>(iters) * 4 * 16 * 16 * 64 * 2;
}

}  // namespace bench
}  // namespace inferd
