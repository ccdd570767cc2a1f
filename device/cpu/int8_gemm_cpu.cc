// LinearInt8 on the CPU (int8_gemm.h): quantizes the activation rows,
// packs the int8 weight into vpdpbusd panels with their column sums (both
// split over the thread pool), then runs tiles of (panel, row range) on the
// pool: the AVX-512 VNNI kernels when the CPU has them and the ISA cap
// allows AVX-512, else the portable loops below (same packed layout, int32
// accumulation). Scratch buffers are per calling thread.
#include <algorithm>
#include <cstring>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/cpu/int8_gemm.h"
#include "device/cpu/kernels.h"
#include "device/cpu/thread_pool.h"
#include "device/int8.h"

namespace inferd {
namespace cpu {
namespace {

// Rows of one (panel, rows) task: a multiple of the 6-row AVX-512 tile.
constexpr int64_t kRowsPerTask = 96;

bool UseVnni() {
  return ActiveCpuIsa() >= CpuIsa::kAvx512 && cpu_avx512::HasVnni();
}

struct Scratch {
  std::vector<uint8_t> xq;
  std::vector<float> xscale, wscale, bias;
  std::vector<int32_t> xzero, wsum;
  std::vector<int8_t> wpack;
};

Scratch& ThreadScratch() {
  static thread_local Scratch s;
  return s;
}

struct QuantizeTask {
  const float* x;
  int64_t ldx, k;
  Int8GemmArgs* g;
  bool vnni;
};

void RunQuantize(void* arg, int64_t begin, int64_t end) {
  const QuantizeTask& t = *static_cast<const QuantizeTask*>(arg);
  uint8_t* xq = const_cast<uint8_t*>(t.g->xq);
  float* s = const_cast<float*>(t.g->xscale);
  int32_t* z = const_cast<int32_t*>(t.g->xzero);
  if (t.vnni) {
    cpu_avx512::QuantizeRowsU8(t.x, t.ldx, t.k, begin, end, xq, t.g->ldq, s, z);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    uint8_t* row = xq + i * t.g->ldq;
    QuantizeActivationRowU8(t.x + i * t.ldx, t.k, row, &s[i], &z[i]);
    std::memset(row + t.k, 0, static_cast<size_t>(t.g->ldq - t.k));
  }
}

struct PackTask {
  const int8_t* w;  // [n, k]
  int64_t n, k;
  Int8GemmArgs* g;
};

void RunPack(void* arg, int64_t begin, int64_t end) {
  const PackTask& t = *static_cast<const PackTask*>(arg);
  const int64_t kp = t.g->kp;
  int8_t* pack = const_cast<int8_t*>(t.g->wpack);
  int32_t* wsum = const_cast<int32_t*>(t.g->wsum);
  for (int64_t p = begin; p < end; ++p) {
    int8_t* panel = pack + p * kp * kInt8PanelCols;
    std::memset(panel, 0, static_cast<size_t>(kp * kInt8PanelCols));
    for (int64_t c = 0; c < kInt8PanelCols; ++c) {
      const int64_t col = p * kInt8PanelCols + c;
      int32_t sum = 0;
      if (col < t.n) {
        const int8_t* src = t.w + col * t.k;
        for (int64_t q = 0; q < t.k; ++q) {
          panel[(q / 4) * 256 + 4 * c + (q % 4)] = src[q];
          sum += src[q];
        }
      }
      wsum[col] = sum;
    }
  }
}

// Portable tile: same packed layout, int32 sums of 4-byte groups.
void PortableTile(const Int8GemmArgs& g, int64_t p, int64_t m_begin,
                  int64_t m_end) {
  const int8_t* panel = g.wpack + p * g.kp * kInt8PanelCols;
  const int64_t n0 = p * kInt8PanelCols;
  const int64_t valid = std::min<int64_t>(kInt8PanelCols, g.n - n0);
  const int64_t groups = g.kp / 4;
  for (int64_t i = m_begin; i < m_end; ++i) {
    const uint8_t* x = g.xq + i * g.ldq;
    int32_t acc[kInt8PanelCols] = {};
    for (int64_t q = 0; q < groups; ++q) {
      const int8_t* wg = panel + q * 256;
      const uint8_t* xg = x + 4 * q;
      for (int c = 0; c < kInt8PanelCols; ++c) {
        acc[c] += xg[0] * wg[4 * c] + xg[1] * wg[4 * c + 1] +
                  xg[2] * wg[4 * c + 2] + xg[3] * wg[4 * c + 3];
      }
    }
    float* y = g.y + i * g.ldy + n0;
    for (int64_t c = 0; c < valid; ++c) {
      const int32_t v = acc[c] - g.xzero[i] * g.wsum[n0 + c];
      y[c] = static_cast<float>(v) * (g.xscale[i] * g.wscale[n0 + c]) +
             (g.bias != nullptr ? g.bias[n0 + c] : 0.0f);
    }
  }
}

struct GemmTask {
  const Int8GemmArgs* g;
  int64_t row_tasks;
  bool vnni;
};

void RunGemmTasks(void* arg, int64_t begin, int64_t end) {
  const GemmTask& t = *static_cast<const GemmTask*>(arg);
  for (int64_t task = begin; task < end; ++task) {
    const int64_t p = task / t.row_tasks;
    const int64_t m0 = (task % t.row_tasks) * kRowsPerTask;
    const int64_t m1 = std::min(t.g->m, m0 + kRowsPerTask);
    if (t.vnni) {
      cpu_avx512::Int8GemmTile(*t.g, p, p + 1, m0, m1);
    } else {
      PortableTile(*t.g, p, m0, m1);
    }
  }
}

}  // namespace

absl::Status LinearInt8(const KernelContext& ctx, const TensorView& x,
                        const TensorView& w, const TensorView& w_scale,
                        const TensorView& bias, const TensorView& y) {
  const int64_t m = x.shape[0], n = w.shape[0], k = x.shape[1];
  const int64_t ldx = m > 1 ? x.strides[0] : k;
  const int64_t kp = (k + 3) / 4 * 4;
  const int64_t panels = (n + kInt8PanelCols - 1) / kInt8PanelCols;
  const int64_t n_pad = panels * kInt8PanelCols;
  const bool vnni = UseVnni();

  Scratch& s = ThreadScratch();
  s.xq.resize(static_cast<size_t>(m * kp));
  s.xscale.resize(static_cast<size_t>(m));
  s.xzero.resize(static_cast<size_t>(m));
  s.wpack.resize(static_cast<size_t>(n_pad * kp));
  s.wsum.resize(static_cast<size_t>(n_pad));
  s.wscale.assign(static_cast<size_t>(n_pad), 0.0f);
  std::memcpy(s.wscale.data(), w_scale.data, static_cast<size_t>(n) * 4);
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    s.bias.assign(static_cast<size_t>(n_pad), 0.0f);
    std::memcpy(s.bias.data(), bias.data, static_cast<size_t>(n) * 4);
  }

  Int8GemmArgs g;
  g.xq = s.xq.data();
  g.ldq = kp;
  g.xscale = s.xscale.data();
  g.xzero = s.xzero.data();
  g.wpack = s.wpack.data();
  g.wsum = s.wsum.data();
  g.wscale = s.wscale.data();
  g.bias = has_bias ? s.bias.data() : nullptr;
  g.y = y.as<float>();
  g.ldy = m > 1 ? y.strides[0] : n;
  g.m = m;
  g.n = n;
  g.kp = kp;

  ThreadPool* pool = m * n * k < 64 * 1024 ? nullptr : ctx.pool;
  QuantizeTask qt{x.as<const float>(), ldx, k, &g, vnni};
  ParallelForRaw(pool, m, 16, &RunQuantize, &qt);
  PackTask pt{w.as<const int8_t>(), n, k, &g};
  ParallelForRaw(pool, panels, 1, &RunPack, &pt);
  GemmTask gt{&g, (m + kRowsPerTask - 1) / kRowsPerTask, vnni};
  ParallelForRaw(pool, panels * gt.row_tasks, 1, &RunGemmTasks, &gt);
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
