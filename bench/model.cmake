# Model forward-pass benchmarks: a MiniLM-L6-shaped encoder (batch 32 x 128
# tokens, F32 and BF16) and a TinyLlama-shaped decoder's batch-1 decode step
# against weight bytes / measured memory bandwidth.
#   cmake --build B --target inferd_model_bench_models   # generate shapes
#   B/inferd_model_bench
set(INFERD_BENCH_MODELS_DIR ${CMAKE_BINARY_DIR}/bench_models)
add_executable(inferd_model_bench ${CMAKE_CURRENT_LIST_DIR}/model_bench.cc)
target_link_libraries(inferd_model_bench PRIVATE inferd_model
                      benchmark::benchmark)
target_compile_definitions(inferd_model_bench PRIVATE
  INFERD_BENCH_MODELS_DIR="${INFERD_BENCH_MODELS_DIR}"
  INFERD_SHARED_MODELS_DIR="${PROJECT_SOURCE_DIR}/../shared/models")
inferd_warnings(inferd_model_bench)
add_custom_target(inferd_model_bench_models
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tools/make_test_models.py
          --out ${INFERD_BENCH_MODELS_DIR} --shape minilm-l6
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tools/make_test_models.py
          --out ${INFERD_BENCH_MODELS_DIR} --shape tinyllama
  COMMENT "Generating random-weight MiniLM-L6 and TinyLlama shapes"
  VERBATIM)
