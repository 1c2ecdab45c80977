#include "runtime/serve/stop_string_matcher.h"

#include <algorithm>

namespace tpserve::serve {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopStringMatcher::push(const std::string& text, bool may_stop) {
  if (stopped_) return {};
  if (stops_.empty()) return text;
  pending_ += text;
  if (!may_stop) unarmed_ = pending_.size();
  // The earliest occurrence of any stop string (the longest one when several start at the same place)
  // that ends past the unarmed text.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    size_t at = pending_.find(stop);
    while (at != std::string::npos && at + stop.size() <= unarmed_) at = pending_.find(stop, at + 1);
    if (at == std::string::npos) continue;
    if (at < first || (at == first && stop.size() > matched_.size())) first = at, matched_ = stop;
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string. Such a suffix starts at a
  // character boundary (stop strings are valid UTF-8), so the released text stays valid UTF-8.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t released = pending_.size() - hold;
  std::string out = pending_.substr(0, released);
  pending_.erase(0, released);
  unarmed_ -= std::min(unarmed_, released);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tpserve::serve
