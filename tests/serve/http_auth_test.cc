// API keys: with a key, every endpoint but /health answers 401 without `Authorization: Bearer <key>` (a
// missing, wrong, truncated or extended key, another scheme) and serves with it; without a key every
// endpoint is open. The key comes from TPSERVE_API_KEY or server.api_key_file, is compared in constant
// time, never appears in a log line or an error, and an unauthorized body is not read.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/log.h"
#include "runtime/config/config_parser.h"
#include "runtime/serve/api_key.h"
#include "tests/serve/raw_socket.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

const std::string kKey = "sk-tpserve-test-7f3a9c0e1b2d";

struct Endpoint {
  std::string method, path, body;
  int served_status;  // the status once past authentication
};

// Every route the server has, and one it has not.
std::vector<Endpoint> endpoints(bool has_tokenizer) {
  const std::string completion = R"({"prompt": [9707, 11], "max_tokens": 2, "temperature": 0})";
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})";
  return {{"GET", "/health", "", 200},
          {"GET", "/metrics", "", 200},
          {"GET", "/v1/models", "", 200},
          {"POST", "/v1/completions", completion, 200},
          {"POST", "/v1/chat/completions", chat, has_tokenizer ? 200 : 400},
          {"POST", "/tokenize", R"({"prompt": "hi"})", has_tokenizer ? 200 : 400},
          {"POST", "/detokenize", R"({"tokens": [9707, 11]})", has_tokenizer ? 200 : 400},
          {"GET", "/no/such/route", "", 404}};
}

Reply call(const TestServer& server, const Endpoint& e, const std::string& authorization) {
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  return send(server, e.method, e.path, e.body, "application/json", headers);
}

TEST(HttpAuth, EveryEndpointButHealthNeedsTheKey) {
  TestServer server({}, /*with_tokenizer=*/true, kKey);
  const bool has_tokenizer = server.tokenizer() != nullptr;
  const std::vector<std::string> refused = {"",
                                            "Bearer sk-wrong",
                                            "Bearer " + kKey.substr(0, kKey.size() - 1),
                                            "Bearer " + kKey + "x",
                                            "Bearer",
                                            "Basic " + kKey,
                                            kKey,
                                            "Bearer " + kKey + " extra"};
  for (const Endpoint& e : endpoints(has_tokenizer)) {
    SCOPED_TRACE(e.method + " " + e.path);
    for (const std::string& authorization : refused) {
      SCOPED_TRACE("Authorization: " + authorization);
      const Reply r = call(server, e, authorization);
      if (e.path == "/health") {
        EXPECT_EQ(r.status, 200) << r.raw;
        continue;
      }
      EXPECT_EQ(r.status, 401) << r.raw;
      ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw;
      EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
      EXPECT_EQ(r.body["error"]["code"], authorization.empty() ? "missing_api_key" : "invalid_api_key");
      EXPECT_EQ(r.raw.find(kKey.substr(8)), std::string::npos) << "the key is echoed: " << r.raw;
      EXPECT_EQ(r.raw.find("sk-wrong"), std::string::npos) << "the given key is echoed: " << r.raw;
    }
    for (const std::string& authorization : {"Bearer " + kKey, "bearer " + kKey, "BEARER  " + kKey + " "}) {
      const Reply r = call(server, e, authorization);
      EXPECT_EQ(r.status, e.served_status) << authorization << ": " << r.raw;
    }
  }
  // The 401 carries the scheme to use; the refusals are counted.
  auto cli = server.client();
  const auto r = cli->Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
  const Reply page = send(server, "GET", "/metrics", "", "", {{"Authorization", "Bearer " + kKey}});
  EXPECT_GE(metric_value(page.raw,
                         "tpserve:requests_refused_total{model_name=\"synthetic-tiny\",reason="
                         "\"unauthorized\"}"),
            7.0 * 8);
}

TEST(HttpAuth, WithoutAKeyEveryEndpointIsOpen) {
  TestServer server;
  for (const Endpoint& e : endpoints(server.tokenizer() != nullptr)) {
    EXPECT_EQ(call(server, e, "").status, e.served_status) << e.method << " " << e.path;
    EXPECT_EQ(call(server, e, "Bearer anything").status, e.served_status) << e.method << " " << e.path;
  }
}

TEST(HttpAuth, AnUnauthorizedBodyIsNotReadAndTheConnectionCloses) {
  TestServer server({"server.request_timeout_s=30"}, /*with_tokenizer=*/false, kKey);
  RawSocket client(server.port());
  // Announces a 1 MB body and sends none of it: the 401 comes at once, not after the body or a timeout.
  ASSERT_TRUE(
      client.send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  "Authorization: Bearer nope\r\nContent-Length: 1000000\r\n\r\n"));
  const auto start = std::chrono::steady_clock::now();
  const std::string answer = client.read_until_closed(std::chrono::seconds(20));
  EXPECT_EQ(status_of(answer), 401) << answer;
  EXPECT_TRUE(client.closed()) << "the connection stays open with an unread body";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(HttpAuth, TheKeyIsNeverLogged) {
  const LogLevel level = log_level();
  set_log_level(LogLevel::kDebug);  // every request is logged
  ::testing::internal::CaptureStderr();
  {
    TestServer server({}, /*with_tokenizer=*/false, kKey);
    for (const std::string& authorization :
         std::vector<std::string>{"Bearer " + kKey, "Bearer sk-wrong-guess", ""})
      for (const Endpoint& e : endpoints(false)) call(server, e, authorization);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_log_level(level);
  EXPECT_NE(log.find("/v1/models"), std::string::npos) << "requests were not logged: the test proves nothing";
  EXPECT_EQ(log.find(kKey), std::string::npos) << log;
  EXPECT_EQ(log.find("sk-wrong-guess"), std::string::npos) << log;
}

TEST(HttpAuth, BindingBeyondLoopbackWithoutAKeyIsWarnedAbout) {
  auto start_log = [](const std::string& host, const std::string& key) {
    ServerMetrics metrics;
    ServerConfig config = local_server_config(2);
    config.host = host;
    ::testing::internal::CaptureStderr();
    HttpServer http(config, metrics, key);
    http.start();
    http.stop();
    return ::testing::internal::GetCapturedStderr();
  };
  const std::string warning = "without an API key";
  EXPECT_NE(start_log("0.0.0.0", "").find(warning), std::string::npos);
  EXPECT_EQ(start_log("0.0.0.0", kKey).find(warning), std::string::npos);
  EXPECT_EQ(start_log("127.0.0.1", "").find(warning), std::string::npos);
}

// A temporary file that goes away with the test.
struct TempFile {
  explicit TempFile(const std::string& contents, mode_t mode = 0600)
      : path(std::filesystem::temp_directory_path() /
             ("tpserve-key-" + std::to_string(::getpid()) + "-" + std::to_string(counter++))) {
    std::ofstream(path) << contents;
    ::chmod(path.c_str(), mode);
  }
  ~TempFile() { std::filesystem::remove(path); }
  std::string path;
  static inline int counter = 0;
};

std::string load_error(const ServerConfig& server) {
  try {
    load_api_key(server);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(ApiKey, FromTheFileTrimmedOrFromTheEnvironment) {
  ::unsetenv("TPSERVE_API_KEY");
  ServerConfig server;
  EXPECT_EQ(load_api_key(server).key, "");  // neither: authentication off
  const TempFile file("  " + kKey + "\n\n");
  server.api_key_file = file.path;
  ApiKey key = load_api_key(server);
  EXPECT_EQ(key.key, kKey);
  EXPECT_EQ(key.source, file.path);
  ::setenv("TPSERVE_API_KEY", "sk-from-env", 1);  // the environment wins
  key = load_api_key(server);
  EXPECT_EQ(key.key, "sk-from-env");
  EXPECT_EQ(key.source, "TPSERVE_API_KEY");
  ::setenv("TPSERVE_API_KEY", "two words", 1);
  EXPECT_NE(load_error(server).find("TPSERVE_API_KEY: the key holds a space"), std::string::npos);
  ::unsetenv("TPSERVE_API_KEY");

  const TempFile empty(" \n");
  server.api_key_file = empty.path;
  EXPECT_NE(load_error(server).find("server.api_key_file: '" + empty.path + "': the key is empty"),
            std::string::npos);
  const TempFile spaced("sk-a b\n");
  server.api_key_file = spaced.path;
  EXPECT_NE(load_error(server).find("a space"), std::string::npos);
  EXPECT_EQ(load_error(server).find("sk-a"), std::string::npos) << "the error shows the key";
  server.api_key_file = "/nonexistent/tpserve-key";
  EXPECT_NE(load_error(server).find("server.api_key_file: cannot read '/nonexistent/tpserve-key'"),
            std::string::npos);
}

TEST(ApiKey, ComparisonAndHeaderParsing) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("abc", ""));
  EXPECT_TRUE(authorization_matches("Bearer k1", "k1"));
  EXPECT_TRUE(authorization_matches("bEaReR \tk1  ", "k1"));
  EXPECT_FALSE(authorization_matches("Bearerk1", "k1"));
  EXPECT_FALSE(authorization_matches("Token k1", "k1"));
  EXPECT_FALSE(authorization_matches("Bearer ", "k1"));
  EXPECT_FALSE(authorization_matches("", "k1"));
  EXPECT_FALSE(authorization_matches("Bearer k1 k1", "k1"));
}

TEST(ApiKey, LoopbackHosts) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host : {"0.0.0.0", "::", "10.0.0.5", "192.168.1.1", "example.com", "::ffff:10.0.0.1"})
    EXPECT_FALSE(is_loopback_host(host)) << host;
}

}  // namespace
}  // namespace tpserve::serve::testing
