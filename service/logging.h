// inferd's logging: a thin layer over spdlog so the rest of the code names
// one header. Thread-safe (spdlog's default logger is).
#ifndef INFERD_SERVICE_LOGGING_H_
#define INFERD_SERVICE_LOGGING_H_

#include <string>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace inferd {

enum class LogFormat { kText, kJson };

// Configures the process-wide logger (stderr). `level` is one of trace,
// debug, info, warn, error; anything else is INVALID_ARGUMENT.
absl::Status InitLogging(LogFormat format, const std::string& level);

}  // namespace inferd

#define LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)

#endif  // INFERD_SERVICE_LOGGING_H_
