// The server's API key (docs/serving.md, "Running in production"): TPSERVE_API_KEY when set, else the
// contents of the file server.api_key_file names (surrounding whitespace trimmed); none: no authentication.
// Requests carry it as `Authorization: Bearer <key>`; it is compared in constant time and never logged nor
// echoed in an error. Only rank 0, which serves HTTP, reads it.
#pragma once

#include <string>
#include <string_view>

#include "runtime/config/config.h"

namespace tpserve::serve {

struct ApiKey {
  std::string key;     // empty: authentication is off
  std::string source;  // where it came from, for the log: "TPSERVE_API_KEY" or the file's path
};

// Throws ConfigError naming the variable or server.api_key_file when the file cannot be read, the key is
// empty, or it holds characters other than visible ASCII (an HTTP header could not carry them).
ApiKey load_api_key(const ServerConfig& server);

// Whether an Authorization header value is "Bearer <key>" (the scheme in any case).
bool authorization_matches(std::string_view authorization, std::string_view key);

// a == b in a time that depends on the lengths only, not on where the bytes differ.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether a bind address only accepts connections from this machine (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

}  // namespace tpserve::serve
