// Linear with F16 or ggml block-quantized weights (device/quant.h) on the
// CPU. Under the int8 activation policy with the weight's int8 panels
// (w.packed from PackLinearWeight under that policy, which model loading
// makes for every block-quantized GEMM weight; int8_panels_avx512.cc), every
// M runs the panel kernel: one summation order, a row's output the same in
// any batch. Without panels (a weight not packed by the loader), under the
// int8 activation policy (ActivationPrecision::kInt8) at the
// avx512_bf16 level with AVX512_VNNI, every block-quantized format runs the
// int8 GEMV for M < 8 (x quantized to int8 per block of 32, per super-block
// of 256 for the K-quants, as llama.cpp; each row computed alone, so its
// output is the same at any M up to 7) and the int8 GEMM from 8 rows (x
// quantized the same way; rows independent too). The GEMV's cost per activation row
// is its per-block epilogue, which the GEMM's register tile amortizes
// (BM_QuantLinearSmallM, 2048 x 2048, one thread: q4_0 M = 4 0.45 ms GEMV;
// M = 16 2.2 GEMV vs 2.4 GEMM, q8_0 4.5 vs 2.0, q4_k 2.6 vs 1.5). Under the
// exact policy (and the int8 one on other CPUs):
// - M = 1 (decode) with Q4_0, Q4_1, Q8_0, Q4_K or Q6_K weights at the
//   avx512_bf16 level (AVX512_VNNI checked): int8 dot products on the blocks
//   as stored, against x quantized to 16 bits per block of 32 (K-quants: per
//   super-block of 256) as two int8 levels (cpu_avx512::GemvVnniRows; error
//   1 / 65024 of the block's max |x| per value, 256 times below an int8
//   activation's);
// - other M <= kQuantSmallMMaxM: F32 activations
//   and F32 math; weights stream from memory once and are decoded in registers
//   (quant_avx2.cc; quant_avx512.cc also decodes 4-row panels once for all
//   M >= 2 activation rows), or, at the scalar level, a weight row is
//   decoded to F32 and dotted with the auto-vectorized loop below;
// - M >= kQuantVnniMinDecodeM in a decode-only step (8+ sequences, each
//   row its next token; KernelContext::decode_rows), and any M above
//   kQuantSmallMMaxM (prefill): the
//   block-quantized formats at the avx512_bf16 level (whose CPUs all have
//   AVX512_VNNI; checked) run int8 dot products against activations
//   quantized per block of 32, as ggml's q8_0 (cpu_avx512::QuantGemmVnni,
//   ~2.7x the F32 path at M = 512, 1.5x at M = 16). Each activation row is
//   quantized on its own and every output is summed in the same order
//   whatever the row's position, so a row's result does not depend on the
//   other rows of the batch (ops_test: bit for bit); it does depend on the
//   batch size's class (M = 1: 16-bit GEMV; 2..7: F32; 8+: int8), within
//   the tolerances ops_test holds each path to. Above M = 64, otherwise (F16, lower
//   levels) tiles of W are decoded to F32 (vectorized at avx512,
//   DequantizeRow below) and run through the blocked F32 GEMM (RunGemm).
//   Not the vdpbf16ps GEMM: on the 2-vCPU Xeon of 2026-11-24 (family 6
//   model 207) vdpbf16ps issues at 1/4 the rate of vfmadd (half its
//   multiply-adds), and decoded BF16 panels measured 1.3-1.5x slower than
//   F32 tiles (bench/README.md, "Prefill (M = 512)").
// Work is split over N on the thread pool.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/cpu/gemm.h"
#include "device/cpu/kernels.h"
#include "device/cpu/quant_gemm.h"
#include "device/quant.h"

namespace inferd {
namespace cpu {
namespace {

constexpr int64_t kQuantSmallMMaxM = 64;
// From this M on, in a decode-only step (KernelContext::decode_rows: 8+
// sequences), the block-quantized formats take the int8 GEMM
// (QuantGemmVnni) at the avx512_bf16 level; other rows (prompts) above
// kQuantSmallMMaxM. BM_QuantLinearSmallM, 2048 x 2048, one thread, weights
// unpacked per call (decoders keep no packed copy): M = 8 q4_0 1.12 -> 1.01
// ms, q8_0 1.19 -> 0.89, q6_k 2.11 -> 1.84 (q4_k 1.04 -> 1.20); M = 16
// 1.93 -> 1.29, 2.03 -> 1.28, 3.27 -> 1.92, 1.88 -> 1.45; M = 32 3.34 ->
// 1.41 (q4_0). At M = 2..4 unpacking the panels costs what the int8 dot
// products save (bench/README.md, "Batched decode").
constexpr int64_t kQuantVnniMinDecodeM = 8;
// Weight rows decoded per tile on the large-M path (a tile of K F32 values
// per row is packed by the GEMM next; 64 rows keep its N blocking useful).
constexpr int64_t kDecodeTileRows = 64;
// As gemm_driver_impl.h: below this many multiply-adds a chunk stays on one
// thread.
constexpr int64_t kMinParallelMacs = 64 * 1024;

using RowsFn = void (*)(const QuantGemmArgs&, int64_t, int64_t);

float* ThreadBuffer(int64_t floats) {
  static thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < floats) buf.resize(floats);
  return buf.data();
}

// Portable: decode one weight row to F32, then dot it with each x row in
// 16 independent lanes (vectorizable without reassociation flags).
void PortableRows(const QuantGemmArgs& g, int64_t n_begin, int64_t n_end) {
  constexpr int kLanes = 16;
  float* wrow = ThreadBuffer(g.k);
  for (int64_t n = n_begin; n < n_end; ++n) {
    DequantizeRow(g.dtype, g.w + n * g.row_bytes, g.k, wrow).IgnoreError();
    for (int64_t i = 0; i < g.m; ++i) {
      const float* x = g.x + i * g.ldx;
      float part[kLanes] = {};
      int64_t p = 0;
      for (; p + kLanes <= g.k; p += kLanes) {
        for (int l = 0; l < kLanes; ++l) part[l] += wrow[p + l] * x[p + l];
      }
      float sum = 0.0f;
      for (; p < g.k; ++p) sum += wrow[p] * x[p];
      for (int l = 0; l < kLanes; ++l) sum += part[l];
      g.y[i * g.ldy + n] = sum + (g.bias != nullptr ? g.bias[n] : 0.0f);
    }
  }
}

struct RowsTask {
  RowsFn fn;
  const QuantGemmArgs* args;
};

void RunRowsTask(void* arg, int64_t begin, int64_t end) {
  const RowsTask& t = *static_cast<const RowsTask*>(arg);
  t.fn(*t.args, begin, end);
}

// The F32 GEMM of g's activations against weight rows [n0, n0 + rows)
// stored at w ([n][k], row stride k: F32, or F16 when f16).
GemmArgs WeightRowsGemm(const QuantGemmArgs& g, const void* w, bool f16,
                        int64_t n0, int64_t rows) {
  GemmArgs gemm;
  gemm.x = g.x;
  gemm.ldx = g.ldx;
  gemm.w = w;
  gemm.w_f16 = f16;
  gemm.w_layout_nk = true;
  gemm.ldw = g.k;
  gemm.bias = g.bias != nullptr ? g.bias + n0 : nullptr;
  gemm.y = g.y + n0;
  gemm.ldy = g.ldy;
  gemm.m = g.m;
  gemm.n = rows;
  gemm.k = g.k;
  return gemm;
}

// Large M: tile [begin, end) of kDecodeTileRows weight rows each.
void RunDecodedTiles(void* arg, int64_t begin, int64_t end) {
  const QuantGemmArgs& g = *static_cast<const QuantGemmArgs*>(arg);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n0 = t * kDecodeTileRows;
    const int64_t rows = std::min(kDecodeTileRows, g.n - n0);
    float* tile = ThreadBuffer(rows * g.k);
    if (ActiveCpuIsa() >= CpuIsa::kAvx512) {
      cpu_avx512::DecodeRowsF32(g, n0, rows, tile);
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(g.dtype, g.w + (n0 + r) * g.row_bytes, g.k,
                      tile + r * g.k)
            .IgnoreError();
      }
    }
    RunGemm(nullptr, WeightRowsGemm(g, tile, false, n0, rows));
  }
}

// The int8 GEMV (cpu_avx512::GemvVnniRows) of all g->m rows: x quantized
// once here (int8 under g->int8_x, else 16 bits as two int8 levels), read
// by every thread.
void RunGemvVnni(ThreadPool* pool, QuantGemmArgs* g) {
  static thread_local std::vector<uint8_t> xbuf;
  // Rows of x a multiple of 4 KB apart would share L1 sets (and alias
  // with each other's loads): one odd number of lines more.
  int64_t stride = (cpu_avx512::GemvVnniXBytes(g->k) + 63) / 64 * 64;
  if (g->m > 1 && stride % 4096 == 0) stride += 3 * 64;
  const size_t bytes = static_cast<size_t>(stride * g->m) + 64;
  if (xbuf.size() < bytes) xbuf.resize(bytes);
  uint8_t* xq = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(xbuf.data()) + 63) / 64 * 64);
  for (int64_t i = 0; i < g->m; ++i) {
    cpu_avx512::GemvVnniQuantizeX(g->dtype, g->x + i * g->ldx, g->k, g->int8_x,
                                  xq + i * stride);
  }
  g->xq = xq;
  g->xq_stride = stride;
  RowsTask task{&cpu_avx512::GemvVnniRows, g};
  ParallelForRaw(pool, g->n, std::max<int64_t>(16, kMinParallelMacs / (g->m * g->k) + 1),
                 &RunRowsTask, &task);
}

}  // namespace

absl::Status QuantLinear(const KernelContext& ctx, const TensorView& x,
                         const TensorView& w, const TensorView& bias,
                         const TensorView& y) {
  QuantGemmArgs g;
  g.dtype = w.dtype;
  g.x = x.as<const float>();
  g.ldx = x.shape[0] > 1 ? x.strides[0] : x.shape[1];
  g.w = static_cast<const uint8_t*>(w.data);
  g.m = x.shape[0];
  g.n = w.shape[0];
  g.k = x.shape[1];
  g.row_bytes = DTypeRowBytes(w.dtype, g.k);
  g.bias = bias.as<const float>();
  g.y = y.as<float>();
  g.ldy = y.shape[0] > 1 ? y.strides[0] : y.shape[1];
  if (g.k == 0) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        g.y[i * g.ldy + j] = g.bias != nullptr ? g.bias[j] : 0.0f;
      }
    }
    return absl::OkStatus();
  }
  ThreadPool* pool = ctx.pool;
  if (g.m * g.n * g.k < kMinParallelMacs) pool = nullptr;

  const CpuIsa isa = ActiveCpuIsa();
  const bool gemv_vnni = isa >= CpuIsa::kAvx512Bf16 && cpu_avx512::GemvVnniSupports(g.dtype);
  const bool int8 = ctx.activations == ActivationPrecision::kInt8;
  g.int8_x = int8;
  if (int8 && isa >= CpuIsa::kAvx512Bf16) {
    // Weights repacked at load for the int8 policy: one kernel at every M.
    g.packed = static_cast<const uint8_t*>(
        PackedPanels(w, static_cast<uint32_t>(PackedFormat::kInt8Panels)));
    if (g.packed != nullptr) {
      cpu_avx512::Int8PanelsGemm(pool, g);
      return absl::OkStatus();
    }
  }
  if (int8 && gemv_vnni && g.m < kQuantVnniMinDecodeM) {
    // int8 policy, 1 to 7 rows (decode, small batches): the int8 GEMV, each
    // x row quantized once here and run against each pass of weight rows,
    // which stream from memory once for all rows.
    RunGemvVnni(pool, &g);
    return absl::OkStatus();
  }
  // The int8 GEMM: from 8 rows under the int8 policy (every step: batched
  // decode, prompts, mixed steps), in a decode-only step of 8+ rows or above
  // 64 under the exact one.
  const int64_t vnni_min_m = int8 || ctx.decode_rows ? kQuantVnniMinDecodeM
                                                     : kQuantSmallMMaxM + 1;
  if (g.m >= vnni_min_m && isa >= CpuIsa::kAvx512Bf16 &&
      cpu_avx512::QuantVnniSupports(g.dtype)) {
    g.packed = static_cast<const uint8_t*>(
        PackedPanels(w, static_cast<uint32_t>(PackedFormat::kVnniPanels)));
    cpu_avx512::QuantGemmVnni(pool, g);
    return absl::OkStatus();
  }
  if (g.m > kQuantSmallMMaxM && g.dtype == DType::kF16 &&
      isa >= CpuIsa::kAvx512) {
    // F16 widened while the GEMM packs its panels (one pass, no decoded
    // tile).
    cpu_avx512::Gemm(pool, WeightRowsGemm(g, g.w, true, 0, g.n), false);
    return absl::OkStatus();
  }
  if (g.m > kQuantSmallMMaxM) {
    const int64_t tiles = (g.n + kDecodeTileRows - 1) / kDecodeTileRows;
    ParallelForRaw(pool, tiles, 1, &RunDecodedTiles, &g);
    return absl::OkStatus();
  }

  if (g.m == 1 && gemv_vnni) {
    // x quantized to 16 bits (two int8 levels).
    RunGemvVnni(pool, &g);
    return absl::OkStatus();
  }

  std::vector<float> xsum;
  // The AVX-512 kernels fold the offsets into per-block tables.
  if (QuantNeedsXSum(g.dtype) && isa < CpuIsa::kAvx512) {
    const int64_t blocks = g.k / 32;
    xsum.resize(g.m * blocks);
    for (int64_t i = 0; i < g.m; ++i) {
      const float* xr = g.x + i * g.ldx;
      for (int64_t b = 0; b < blocks; ++b) {
        float s = 0.0f;
        for (int j = 0; j < 32; ++j) s += xr[32 * b + j];
        xsum[i * blocks + b] = s;
      }
    }
    g.xsum = xsum.data();
  }
  RowsTask task;
  task.args = &g;
  // Q5_0 / Q5_1 have no AVX2 kernels: decoded row by row there.
  const bool q5 = g.dtype == DType::kQ5_0 || g.dtype == DType::kQ5_1;
  task.fn = isa >= CpuIsa::kAvx512          ? &cpu_avx512::QuantGemmRows
            : isa >= CpuIsa::kAvx2 && !q5 ? &cpu_avx2::QuantGemmRows
                                          : &PortableRows;
  const int64_t min_rows = std::max<int64_t>(16, kMinParallelMacs / (g.m * g.k) + 1);
  ParallelForRaw(pool, g.n, min_rows, &RunRowsTask, &task);
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
