// The main of inferd's C++ tests that look components up in the registries
// (runtime/common/registry.h): it registers the built-ins of the layer the
// test links, at start-up as inferd's own main does, then runs the tests.
// The layer is chosen by the test's CMake target (inferd_test_main in
// tests/CMakeLists.txt), which defines INFERD_TEST_STARTUP_HEADER and
// INFERD_TEST_STARTUP.
#include "gtest/gtest.h"
#include INFERD_TEST_STARTUP_HEADER

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  INFERD_TEST_STARTUP();
  return RUN_ALL_TESTS();
}
