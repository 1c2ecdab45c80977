// Logging: every line carries the time, the level and the MPI rank ("[r0]"), so that mpirun's merged
// output stays readable. The level comes from config (logging.level) or TPSERVE_LOG_LEVEL, which wins.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace tpserve {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

std::optional<LogLevel> parse_log_level(std::string_view name);
const char* log_level_name(LogLevel level);

void set_log_level(LogLevel level);
LogLevel log_level();
void set_log_rank(int rank);
// Applies TPSERVE_LOG_LEVEL when set (an unknown value is reported once and ignored).
void apply_log_level_env();

void log_line(LogLevel level, const std::string& message);

namespace detail {
template <typename... Args>
void log_parts(LogLevel level, const Args&... args) {
  if (level < log_level()) return;
  std::ostringstream os;
  (os << ... << args);
  log_line(level, os.str());
}
}  // namespace detail

template <typename... Args>
void log_debug(const Args&... args) {
  detail::log_parts(LogLevel::kDebug, args...);
}
template <typename... Args>
void log_info(const Args&... args) {
  detail::log_parts(LogLevel::kInfo, args...);
}
template <typename... Args>
void log_warn(const Args&... args) {
  detail::log_parts(LogLevel::kWarn, args...);
}
template <typename... Args>
void log_error(const Args&... args) {
  detail::log_parts(LogLevel::kError, args...);
}

}  // namespace tpserve
