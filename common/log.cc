#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace tpserve {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_rank{0};
std::mutex g_write_mutex;
}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return std::nullopt;
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      return "off";
  }
  return "?";
}

void set_log_level(LogLevel level) {
  g_level = static_cast<int>(level);
}
LogLevel log_level() {
  return static_cast<LogLevel>(g_level.load());
}
void set_log_rank(int rank) {
  g_rank = rank;
}

void apply_log_level_env() {
  const char* env = std::getenv("TPSERVE_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return;
  if (auto level = parse_log_level(env)) {
    set_log_level(*level);
  } else if (static std::atomic<bool> warned{false};
             !warned.exchange(true)) {  // called again after the config
    log_warn("TPSERVE_LOG_LEVEL='", env, "' is not one of debug|info|warn|error|off; ignored");
  }
}

void log_line(LogLevel level, const std::string& message) {
  using clock = std::chrono::system_clock;
  const auto now = clock::now();
  const std::time_t secs = clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_write_mutex);
  std::fprintf(stderr, "%s.%03d %-5s [r%d] %s\n", stamp, millis, log_level_name(level), g_rank.load(),
               message.c_str());
  std::fflush(stderr);
}

}  // namespace tpserve
