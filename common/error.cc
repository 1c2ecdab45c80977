#include "common/error.h"

#include <cstring>

namespace tpserve {

void fail_check(const char* what, const std::string& detail, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  std::ostringstream os;
  if (what != nullptr) os << "check failed: " << what;
  if (!detail.empty()) os << (what != nullptr ? ": " : "") << detail;
  os << " (at " << (base != nullptr ? base + 1 : file) << ":" << line << ")";
  throw Error(os.str());
}

}  // namespace tpserve
