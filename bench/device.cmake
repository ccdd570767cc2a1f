# Kernel micro-benchmarks: GEMM/GEMV vs the machine's measured FMA / BF16-dot
# peaks and memory bandwidth. Run: inferd_kernels_bench
add_executable(inferd_kernels_bench
  ${CMAKE_CURRENT_LIST_DIR}/device/kernels_bench.cc
  ${CMAKE_CURRENT_LIST_DIR}/device/peak_avx512.cc
  ${CMAKE_CURRENT_LIST_DIR}/device/peak_amx.cc)
target_link_libraries(inferd_kernels_bench PRIVATE inferd_device
                      benchmark::benchmark Eigen3::Eigen)
# peak_avx512.cc holds register-only FMA/vdpbf16ps loops and the Eigen
# comparison GEMM built for AVX-512; called only when the CPU supports it.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/device/peak_avx512.cc
  PROPERTIES COMPILE_OPTIONS
  "-mavx2;-mfma;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-Wno-uninitialized;-Wno-maybe-uninitialized")
# peak_amx.cc: register-only AMX tile loops, called only when AmxUsable().
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/device/peak_amx.cc
  PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-bf16;-mamx-int8")
inferd_warnings(inferd_kernels_bench)
