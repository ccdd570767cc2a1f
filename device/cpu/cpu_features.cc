#include "device/cpu/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "device/cpu/gemm.h"

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

Bf16GemmPolicy PolicyFromEnv() {
  const char* env = std::getenv("INFERD_BF16_GEMM");
  if (env == nullptr) return Bf16GemmPolicy::kAuto;
  if (std::strcmp(env, "dot") == 0) return Bf16GemmPolicy::kDot;
  if (std::strcmp(env, "widen") == 0) return Bf16GemmPolicy::kWiden;
  return Bf16GemmPolicy::kAuto;
}

// Empty when AMX is usable, else what is missing.
std::string AmxProbe() {
#if defined(__linux__) && defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(0), "c"(0));
  if (eax < 0xD) return "CPUID has no leaf 0xD";
  __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(0));
  const bool tile = edx & (1u << 24), bf16 = edx & (1u << 22), int8 = edx & (1u << 25);
  if (!(tile && bf16 && int8)) {
    return std::string("the CPU reports no AMX (AMX-TILE ") + (tile ? "yes" : "no") +
           ", AMX-BF16 " + (bf16 ? "yes" : "no") + ", AMX-INT8 " + (int8 ? "yes" : "no") + ")";
  }
  // OSXSAVE (leaf 1 ECX bit 27), then XCR0's tile config / data bits.
  __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(1), "c"(0));
  if (!(ecx & (1u << 27))) return "the OS has not enabled XSAVE";
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return "the OS has not enabled the AMX tile state (XCR0)";
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return "Linux refused the AMX tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
  }
  return "";
#else
  return "not an x86-64 Linux build";
#endif
}

std::atomic<int>& Policy() {
  static std::atomic<int> policy{static_cast<int>(PolicyFromEnv())};
  return policy;
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

bool AmxUsable(std::string* why) {
  static const std::string* missing = new std::string(AmxProbe());
  if (why != nullptr) *why = *missing;
  return missing->empty();
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

void SetBf16GemmPolicy(Bf16GemmPolicy policy) {
  Policy().store(static_cast<int>(policy), std::memory_order_relaxed);
}

Bf16GemmPolicy GetBf16GemmPolicy() {
  return static_cast<Bf16GemmPolicy>(Policy().load(std::memory_order_relaxed));
}

double Bf16DotToFmaRate() {
  static const double rate = DetectedCpuIsa() >= CpuIsa::kAvx512Bf16
                                 ? cpu_avx512::MeasureBf16DotToFmaRate()
                                 : 0.0;
  return rate;
}

bool Bf16DotInUse() {
  if (ActiveCpuIsa() < CpuIsa::kAvx512Bf16) return false;
  switch (GetBf16GemmPolicy()) {
    case Bf16GemmPolicy::kDot: return true;
    case Bf16GemmPolicy::kWiden: return false;
    case Bf16GemmPolicy::kAuto: break;
  }
  return Bf16DotToFmaRate() > 1.0;
}

}  // namespace inferd
