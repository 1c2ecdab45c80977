// SseParser: splits a text/event-stream body, fed in arbitrary pieces as they arrive, into events (separated
// by a blank line) and returns each event's data (several `data:` lines joined with '\n'). Comments (lines
// starting with ':') and other fields (event, id, retry) are skipped; CRLF and LF line ends both work.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpserve::bench {

class SseParser {
 public:
  // The data of every event completed by these bytes, in order.
  std::vector<std::string> feed(std::string_view bytes);
  // Data of an event still open at the end of the stream (a server that closed without the blank line).
  std::vector<std::string> finish();

 private:
  void take_line(std::string_view line, std::vector<std::string>& events);

  std::string pending_;  // bytes after the last complete line
  std::string data_;     // data lines of the current event
  bool has_data_ = false;
};

}  // namespace tpserve::bench
