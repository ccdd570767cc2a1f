#include "device/cpu/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace inferd {
namespace {

CpuIsa Detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))) {
    return CpuIsa::kScalar;
  }
  if (!(__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))) {
    return CpuIsa::kAvx2;
  }
  // AVX512_BF16: CPUID leaf 7 sub-leaf 1, EAX bit 5 (gcc 12 has no
  // __builtin_cpu_supports name for it).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid"
                   : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx)
                   : "a"(7), "c"(1));
  if (eax & (1u << 5)) return CpuIsa::kAvx512Bf16;
  return CpuIsa::kAvx512;
#else
  return CpuIsa::kScalar;
#endif
}

CpuIsa CapFromEnv() {
  const char* env = std::getenv("INFERD_CPU_ISA");
  if (env == nullptr) return CpuIsa::kAvx512Bf16;
  if (std::strcmp(env, "scalar") == 0) return CpuIsa::kScalar;
  if (std::strcmp(env, "avx2") == 0) return CpuIsa::kAvx2;
  if (std::strcmp(env, "avx512") == 0) return CpuIsa::kAvx512;
  return CpuIsa::kAvx512Bf16;
}

std::atomic<int>& Cap() {
  static std::atomic<int> cap{static_cast<int>(CapFromEnv())};
  return cap;
}

}  // namespace

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Bf16: return "avx512_bf16";
  }
  return "unknown";
}

CpuIsa DetectedCpuIsa() {
  static const CpuIsa detected = Detect();
  return detected;
}

void SetCpuIsaCap(CpuIsa cap) {
  Cap().store(static_cast<int>(cap), std::memory_order_relaxed);
}

CpuIsa CpuIsaCap() {
  return static_cast<CpuIsa>(Cap().load(std::memory_order_relaxed));
}

CpuIsa ActiveCpuIsa() {
  return static_cast<CpuIsa>(std::min(static_cast<int>(DetectedCpuIsa()),
                                      static_cast<int>(CpuIsaCap())));
}

}  // namespace inferd
