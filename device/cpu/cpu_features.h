// Runtime CPU feature detection and an ISA cap that selects which kernel
// variants the cpu device may use. Thread-safe (the cap is an atomic).
#ifndef INFERD_DEVICE_CPU_CPU_FEATURES_H_
#define INFERD_DEVICE_CPU_CPU_FEATURES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace inferd {

// Ordered: each level implies the ones below it.
enum class CpuIsa : int {
  kScalar = 0,      // portable C++ only
  kAvx2 = 1,        // AVX2 + FMA + F16C
  kAvx512 = 2,      // AVX-512 F/BW/VL/DQ
  kAvx512Bf16 = 3,  // + AVX512_BF16 (vdpbf16ps)
};

absl::string_view CpuIsaName(CpuIsa isa);

// What this CPU supports.
CpuIsa DetectedCpuIsa();

// Limits kernel selection to at most `cap` (tests use it to cover the AVX2
// and scalar fallbacks). The initial cap comes from the environment variable
// INFERD_CPU_ISA = scalar | avx2 | avx512 | avx512_bf16, else no cap.
void SetCpuIsaCap(CpuIsa cap);
CpuIsa CpuIsaCap();

// min(DetectedCpuIsa(), CpuIsaCap()): what kernels use right now.
CpuIsa ActiveCpuIsa();

// Whether this process can run AMX tile instructions (Intel Advanced Matrix
// Extensions, BF16 and INT8 tile dot products): the CPU reports AMX-TILE,
// AMX-BF16 and AMX-INT8 (CPUID leaf 7, EDX bits 24, 22, 25), the OS enables
// the tile state (XCR0 bits 17 and 18) and Linux grants the process the
// tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, asked
// once). When not, *why (if not null) says which of these is missing. No
// inferd kernel uses AMX yet; the kernels bench measures its peaks.
bool AmxUsable(std::string* why = nullptr);

// How GEMMs with BF16 weights run at the avx512_bf16 level: kDot uses
// vdpbf16ps on activations rounded to BF16 pairs; kWiden widens the weights
// to F32 for FMA (F32 activations, more exact). Which is faster depends on
// the CPU: vdpbf16ps does twice the FMA's work per cycle on some cores and
// half of it on others (2-core Xeon of bench/README: 97 vs 204 GFLOP/s per
// thread). kAuto (the default) picks the faster, measured once per process
// with register-only loops of both instructions (~2 ms, best of several
// runs). The initial policy comes from INFERD_BF16_GEMM = auto | dot | widen.
enum class Bf16GemmPolicy { kAuto, kDot, kWiden };
void SetBf16GemmPolicy(Bf16GemmPolicy policy);
Bf16GemmPolicy GetBf16GemmPolicy();
// Whether BF16-weight GEMMs use vdpbf16ps now: the active ISA has it and the
// policy (for kAuto: the measurement) picks it.
bool Bf16DotInUse();
// vdpbf16ps FLOP rate / FMA FLOP rate on this CPU as measured for kAuto (0
// without AVX512_BF16).
double Bf16DotToFmaRate();

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_CPU_FEATURES_H_
