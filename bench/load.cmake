# inferd-bench: the load generator (gRPC client; drives a running server).
#   B/bench/inferd-bench --rpc generate --model stories --concurrency 16 ...
# See bench/README.md, section "Load generator".
add_library(inferd_bench_load_lib STATIC
  ${CMAKE_CURRENT_LIST_DIR}/load/length_distribution.cc
  ${CMAKE_CURRENT_LIST_DIR}/load/latency_stats.cc)
target_include_directories(inferd_bench_load_lib PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(inferd_bench_load_lib PUBLIC absl::status absl::statusor
                      absl::strings)
inferd_warnings(inferd_bench_load_lib)

add_executable(inferd-bench ${CMAKE_CURRENT_LIST_DIR}/load/inferd_bench.cc)
target_link_libraries(inferd-bench PRIVATE inferd_bench_load_lib inferd_protos
                      gRPC::grpc++ nlohmann_json::nlohmann_json Threads::Threads)
inferd_warnings(inferd-bench)
