# Tokenizer throughput (MB/s, tokens/s) on real tokenizers from shared/.
add_executable(inferd_tokenizer_bench ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bench.cc)
target_link_libraries(inferd_tokenizer_bench PRIVATE inferd_tokenizer
                      benchmark::benchmark)
target_compile_definitions(inferd_tokenizer_bench PRIVATE
  INFERD_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
inferd_warnings(inferd_tokenizer_bench)
