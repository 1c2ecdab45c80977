#include "runtime/serve/api_key.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "runtime/config/config_parser.h"

namespace tpserve::serve {
namespace {

constexpr std::string_view kSpace = " \t\r\n\f\v";

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// "" when the key is acceptable, else what is wrong with it (without showing it).
std::string key_problem(std::string_view key) {
  if (key.empty()) return "the key is empty";
  for (char c : key)
    if (c < 0x21 || c > 0x7e)
      return "the key holds a space, a control character or a non-ASCII byte (an HTTP header cannot carry "
             "it): use visible ASCII only";
  return "";
}

}  // namespace

ApiKey load_api_key(const ServerConfig& server) {
  if (const char* env = std::getenv("TPSERVE_API_KEY"); env != nullptr && *env != '\0') {
    const std::string key(trim(env));
    if (const std::string problem = key_problem(key); !problem.empty())
      throw ConfigError({"TPSERVE_API_KEY: " + problem});
    return {key, "TPSERVE_API_KEY"};
  }
  if (server.api_key_file.empty()) return {};
  const std::string& path = server.api_key_file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError({"server.api_key_file: cannot read '" + path + "'"});
  std::ostringstream contents;
  contents << in.rdbuf();
  const std::string key(trim(contents.str()));
  if (const std::string problem = key_problem(key); !problem.empty())
    throw ConfigError({"server.api_key_file: '" + path + "': " + problem});
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    log_warn("server.api_key_file '", path, "' can be read by other users of this machine (chmod 600 it)");
  return {key, path};
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of `a` is compared whatever the contents; volatile keeps the compiler from stopping early.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff = diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0));
  return diff == 0;
}

bool authorization_matches(std::string_view authorization, std::string_view key) {
  authorization = trim(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() ||
      (authorization[kScheme.size()] != ' ' && authorization[kScheme.size()] != '\t'))
    return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if ((authorization[i] | 0x20) != kScheme[i]) return false;
  return constant_time_equal(key, trim(authorization.substr(kScheme.size())));
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;  // another name: it may resolve to anything
}

}  // namespace tpserve::serve
