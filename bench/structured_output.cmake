# Structured output: token-mask cost per generated token (bench/README.md).
add_executable(inferd_structured_output_bench
               ${CMAKE_CURRENT_LIST_DIR}/structured_output_bench.cc)
target_link_libraries(inferd_structured_output_bench PRIVATE inferd_gen
                      inferd_tokenizer inferd_loader benchmark::benchmark)
target_compile_definitions(inferd_structured_output_bench PRIVATE
  INFERD_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared"
  INFERD_REAL_MODELS_DIR="${CMAKE_BINARY_DIR}/models")
inferd_warnings(inferd_structured_output_bench)

# The engine on a corpus of schemas with test instances, token by token
# (bench/structured/maskbench.py; tests/runtime/gen/schema_corpus_test.py).
add_executable(inferd_schema_check ${CMAKE_CURRENT_LIST_DIR}/schema_check.cc)
target_link_libraries(inferd_schema_check PRIVATE inferd_gen inferd_tokenizer
                      inferd_loader nlohmann_json::nlohmann_json)
inferd_warnings(inferd_schema_check)
