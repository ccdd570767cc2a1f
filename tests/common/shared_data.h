// The one way C++ tests reach ../shared (real tokenizers and models that CI
// has and a user's fresh clone does not): $INFERD_SHARED_DIR when set, else
// the build's default (INFERD_DEFAULT_SHARED_DIR, ../shared beside the
// checkout). A test that needs a file skips with a message when it is
// absent (INFERD_REQUIRE_SHARED). Not thread-safe (reads the environment).
#ifndef INFERD_TESTS_COMMON_SHARED_DATA_H_
#define INFERD_TESTS_COMMON_SHARED_DATA_H_

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace inferd {
namespace testing_util {

inline std::string SharedDir() {
  const char* env = std::getenv("INFERD_SHARED_DIR");
  return env != nullptr && *env != '\0' ? std::string(env)
                                        : std::string(INFERD_DEFAULT_SHARED_DIR);
}

// SharedDir()/relative when that file or folder exists, else "".
inline std::string SharedPath(const std::string& relative) {
  const std::string path = SharedDir() + "/" + relative;
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? path : std::string();
}

}  // namespace testing_util
}  // namespace inferd

// Declares `var` = the path of `relative` under ../shared, or skips the test
// with a message saying what is missing.
#define INFERD_REQUIRE_SHARED(var, relative)                                \
  const std::string var = ::inferd::testing_util::SharedPath(relative);    \
  if (var.empty())                                                          \
  GTEST_SKIP() << "needs ../shared/" << (relative) << ", absent under "     \
               << ::inferd::testing_util::SharedDir()                       \
               << " (CI has it; set INFERD_SHARED_DIR to use a copy)"

#endif  // INFERD_TESTS_COMMON_SHARED_DATA_H_
