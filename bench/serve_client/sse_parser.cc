// Line-based: bytes after the last newline wait for the next feed().
#include "bench/serve_client/sse_parser.h"

namespace tpserve::bench {

void SseParser::take_line(std::string_view line, std::vector<std::string>& events) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) {  // end of an event
    if (has_data_) events.push_back(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_ += value;
  has_data_ = true;
}

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  pending_.append(bytes);
  size_t begin = 0;
  for (size_t nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n', begin)) {
    take_line(std::string_view(pending_).substr(begin, nl - begin), events);
    begin = nl + 1;
  }
  pending_.erase(0, begin);
  return events;
}

std::vector<std::string> SseParser::finish() {
  std::vector<std::string> events;
  if (!pending_.empty()) take_line(pending_, events);
  pending_.clear();
  take_line("", events);
  return events;
}

}  // namespace tpserve::bench
