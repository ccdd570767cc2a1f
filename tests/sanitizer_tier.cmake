# What the sanitizer tiers (tests/sanitize: ASan+UBSan, tests/tsan: TSan)
# share: instrumented builds of the code where threads meet (runtime/gen,
# runtime/engine, service/ and the server), linked against the regular
# uninstrumented model, loader, tokenizer and device libraries, and one
# gtest binary per tier part. Each tier sets, before calling these:
#   INFERD_TIER_CFLAGS   compile flags (the sanitizer's)
#   INFERD_TIER_LDFLAGS  link flags
#   INFERD_TIER_OBJECTS  objects linked into every executable (may be empty)
#   INFERD_TIER_LABELS   ctest labels of its gtest binaries
#   INFERD_TIER_ENV      their ctest environment
#   INFERD_TIER_LIBS     libraries every executable links (may be empty)
#   INFERD_TIER_PROTOS   the generated-protobuf library the service links

# Compile and link flags of one instrumented target.
function(inferd_tier_target target)
  inferd_warnings(${target})
  # GCC 12's -Wmaybe-uninitialized misfires under sanitizer instrumentation
  # (std::function in libstdc++'s <regex>, StatusOr members) where the same
  # code builds clean without it.
  # -O1 (after the build type's -O3): what the sanitizers' manuals advise,
  # and it halves the tiers' compile time, the largest part of CI's build.
  target_compile_options(${target} PRIVATE ${INFERD_TIER_CFLAGS} -O1
                         -Wno-maybe-uninitialized)
  target_link_options(${target} PUBLIC ${INFERD_TIER_LDFLAGS})
endfunction()

# inferd_gen_SUFFIX, inferd_engine_SUFFIX, inferd_service_SUFFIX and the
# server inferd_SUFFIX.
function(inferd_tier_libraries suffix)
  file(GLOB gen_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/runtime/gen/*.cc)
  add_library(inferd_gen_${suffix} STATIC ${gen_srcs})
  target_link_libraries(inferd_gen_${suffix} PUBLIC inferd_runtime_common
                        inferd_llg)
  inferd_tier_target(inferd_gen_${suffix})

  file(GLOB engine_srcs CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/runtime/engine/*.cc)
  add_library(inferd_engine_${suffix} STATIC ${engine_srcs})
  target_link_libraries(inferd_engine_${suffix} PUBLIC inferd_runtime_common
    inferd_loader inferd_tokenizer inferd_chat inferd_model
    inferd_gen_${suffix} inferd_device ${CMAKE_DL_LIBS})
  inferd_tier_target(inferd_engine_${suffix})

  # The service's layers (request, grpc, http, the server) in one library.
  file(GLOB service_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/service/*.cc
       ${PROJECT_SOURCE_DIR}/service/request/*.cc
       ${PROJECT_SOURCE_DIR}/service/grpc/*.cc
       ${PROJECT_SOURCE_DIR}/service/http/*.cc)
  list(REMOVE_ITEM service_srcs ${PROJECT_SOURCE_DIR}/service/main.cc)
  add_library(inferd_service_${suffix} STATIC ${service_srcs})
  target_link_libraries(inferd_service_${suffix}
    PUBLIC ${INFERD_TIER_PROTOS} inferd_engine_${suffix} gRPC::grpc++
           gRPC::grpc++_reflection spdlog::spdlog prometheus-cpp::core
           prometheus-cpp::pull yaml-cpp PkgConfig::CPP_HTTPLIB)
  target_compile_definitions(inferd_service_${suffix} PUBLIC
    SPDLOG_ACTIVE_LEVEL=SPDLOG_LEVEL_TRACE)
  inferd_tier_target(inferd_service_${suffix})

  add_executable(inferd_${suffix} ${PROJECT_SOURCE_DIR}/service/main.cc
                 ${INFERD_TIER_OBJECTS})
  target_link_libraries(inferd_${suffix} PRIVATE inferd_service_${suffix}
                        ${INFERD_TIER_LIBS})
  inferd_tier_target(inferd_${suffix})
endfunction()

# inferd_tier_test(NAME SRCS a.cc ... LIBS x ... [STARTUP layer]): one gtest
# binary, run whole by ctest (STARTUP: inferd_test_main in tests/).
function(inferd_tier_test name)
  cmake_parse_arguments(T "" "STARTUP" "SRCS;LIBS" ${ARGN})
  add_executable(${name} ${T_SRCS} ${INFERD_TIER_OBJECTS})
  target_link_libraries(${name} PRIVATE ${T_LIBS} ${INFERD_TIER_LIBS}
                        GTest::gtest GTest::gmock)
  inferd_test_main(${name} "${T_STARTUP}")
  inferd_test_paths(${name})
  inferd_tier_target(${name})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${INFERD_TIER_LABELS}"
                       ENVIRONMENT "${INFERD_TIER_ENV}")
endfunction()
