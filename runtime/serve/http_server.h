// HttpServer: the OpenAI-compatible HTTP API on rank 0 (cpp-httplib's parsing and routing; connections,
// limits and timeouts by ConnectionServer): POST /v1/completions and /v1/chat/completions (JSON or
// server-sent events), POST /tokenize and /detokenize, GET /v1/models, /health and /metrics. It listens
// before the model is loaded (health 503 "loading"), serves once set_ready() hands it the engine loop, and
// answers 503 again while draining. With an API key, every endpoint but /health needs `Authorization: Bearer
// <key>`. Every refusal is a JSON error naming the field (400), the route (404, 405) or the reason (401, 408,
// 413, 503).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/config/config.h"
#include "runtime/serve/openai_request.h"
#include "runtime/serve/server_metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tpserve::serve {

class ConnectionServer;
class EngineLoop;

class HttpServer {
 public:
  // config: server.* of the config (host, port 0 = any free port, threads, limits, timeouts). api_key: when
  // not empty, every endpoint but /health needs `Authorization: Bearer <api_key>` (401 otherwise).
  HttpServer(ServerConfig config, ServerMetrics& metrics, std::string api_key = "");
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds (throws tpserve::Error naming host:port when it cannot) and serves on a background thread.
  void start();
  int port() const { return port_; }
  // The model is loaded: serve generation through the loop with these limits.
  void set_ready(EngineLoop* loop, RequestLimits limits, int64_t max_model_len);
  // Refuse new generation requests (503) and report draining on /health; also while loading (a signal
  // then), for good: set_ready afterwards does not undo it.
  void begin_drain();
  // Waits until every accepted generation response has been written out (or the timeout passed).
  bool wait_responses_done(std::chrono::milliseconds timeout);
  // Closes the listener and joins the server thread.
  void stop();

 private:
  void routes();
  void generation(const httplib::Request& req, httplib::Response& res, bool chat);
  // Throws the 503 model_loading error until the engine is ready.
  void require_loaded() const;
  void response_done();

  ServerConfig config_;
  const std::string api_key_;
  ServerMetrics& metrics_;
  std::unique_ptr<ConnectionServer> server_;
  std::thread thread_;
  std::atomic<bool> listener_returned_{false};
  int port_ = 0;
  std::atomic<bool> loaded_{false};    // set_ready ran: loop_, limits_ and max_model_len_ are set
  std::atomic<bool> draining_{false};  // begin_drain ran
  EngineLoop* loop_ = nullptr;
  RequestLimits limits_;
  int64_t max_model_len_ = 0;
  int64_t created_ = 0;

  std::mutex responses_mutex_;
  std::condition_variable responses_cv_;
  int open_responses_ = 0;
};

}  // namespace tpserve::serve
