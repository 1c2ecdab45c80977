// Test helpers for the HTTP server: TestServer runs the whole serving stack in-process (tiny synthetic
// model on the CPU backend, engine loop on its own thread, HTTP on an ephemeral 127.0.0.1 port), and
// small httplib::Client helpers post JSON and read server-sent event streams.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "parallel/communicator.h"
#include "runtime/config/config_parser.h"
#include "runtime/engine/engine.h"
#include "runtime/serve/engine_loop.h"
#include "runtime/serve/http_server.h"
#include "tests/serve/qwen3_tokenizer.h"

namespace tpserve::serve::testing {

using Json = nlohmann::json;

class TestServer {
 public:
  // overrides: config keys over configs/tiny.yaml (backend cpu; server on 127.0.0.1, any free port, 96
  // threads, 1 MiB bodies unless overridden). Without a tokenizer: token ids only. api_key: see HttpServer.
  explicit TestServer(const std::vector<std::string>& overrides = {}, bool with_tokenizer = true,
                      const std::string& api_key = "")
      : comm_(parallel::make_single_rank_communicator()) {
    std::vector<std::string> all = {"server.host=127.0.0.1", "server.port=0", "server.threads=96",
                                    "server.max_body_bytes=1048576"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    all.push_back("runtime.backend=cpu");
    config_ = load_config_file(std::string(TPSERVE_SOURCE_DIR) + "/configs/tiny.yaml", all);
    tokenizer_ = with_tokenizer ? qwen3_tokenizer() : nullptr;
    http_ = std::make_unique<HttpServer>(config_.server, metrics_, api_key);
    http_->start();
    engine_ = std::make_unique<Engine>(config_, *comm_, make_cpu_backend());
    loop_ = std::make_unique<EngineLoop>(*engine_, tokenizer_, metrics_, config_.server.max_queued_requests);
    metrics_.set_model_name(engine_->source().name);
    const RequestLimits limits = request_limits_for(*engine_, tokenizer_, config_.server);
    http_->set_ready(loop_.get(), limits, limits.max_context_tokens);
    loop_thread_ = std::thread([this] { loop_->run(); });
  }
  ~TestServer() {
    http_->begin_drain();
    loop_->drain();
    loop_thread_.join();
    http_->wait_responses_done(std::chrono::seconds(10));
    http_->stop();
  }

  int port() const { return http_->port(); }
  const Config& config() const { return config_; }
  const Tokenizer* tokenizer() const { return tokenizer_; }
  Engine& engine() { return *engine_; }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port());
    c->set_read_timeout(120, 0);
    return c;
  }

 private:
  Config config_;
  std::unique_ptr<parallel::Communicator> comm_;
  const Tokenizer* tokenizer_ = nullptr;
  ServerMetrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::thread loop_thread_;
};

// server.* for an HttpServer made by hand: 127.0.0.1, any free port.
inline ServerConfig local_server_config(int threads) {
  ServerConfig c;
  c.port = 0;
  c.threads = threads;
  c.max_connections = threads + kAutoIdleConnections;
  return c;
}

struct Reply {
  int status = 0;  // 0: no HTTP response at all
  Json body;       // parsed JSON (null when the body was not JSON)
  std::string raw;
};

inline Reply send(const TestServer& server, const std::string& method, const std::string& path,
                  const std::string& body = "", const std::string& content_type = "application/json",
                  const httplib::Headers& headers = {}) {
  auto cli = server.client();
  const char* type = content_type.c_str();
  httplib::Result r = method == "GET"      ? cli->Get(path.c_str(), headers)
                      : method == "POST"   ? cli->Post(path.c_str(), headers, body, type)
                      : method == "PUT"    ? cli->Put(path.c_str(), headers, body, type)
                      : method == "DELETE" ? cli->Delete(path.c_str(), headers)
                      : method == "PATCH"  ? cli->Patch(path.c_str(), headers, body, type)
                                           : cli->Options(path.c_str(), headers);
  Reply reply;
  if (!r) return reply;
  reply.status = r->status;
  reply.raw = r->body;
  reply.body = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return reply;
}

inline Reply post(const TestServer& server, const std::string& path, const Json& body) {
  return send(server, "POST", path, body.dump());
}

// A streamed response: the JSON of every `data:` event, and whether it ended with `data: [DONE]`.
struct Stream {
  int status = 0;
  std::vector<Json> events;
  bool done = false;
  std::string raw;
};

// A greedy completion of a fixed five-token prompt (token ids: no tokenizer needed), `extra` fields merged
// in.
inline Json ids_completion(int max_tokens, Json extra = Json::object()) {
  Json body = {{"prompt", {1000, 1007, 1014, 1021, 1028}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true}};
  body.update(extra);
  return body;
}

inline Stream post_stream(const TestServer& server, const std::string& path, const Json& body) {
  auto cli = server.client();
  Stream s;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&s](const char* data, size_t n, uint64_t, uint64_t) {
    s.raw.append(data, n);
    return true;
  };
  auto r = cli->send(req);
  if (!r) return s;
  s.status = r->status;
  if (s.status != 200) s.raw += r->body;
  for (size_t pos = 0; pos < s.raw.size();) {
    const size_t end = s.raw.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string event = s.raw.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    const std::string payload = event.substr(6);
    if (payload == "[DONE]")
      s.done = true;
    else
      s.events.push_back(Json::parse(payload));
  }
  return s;
}

// The text of a completions or chat stream, concatenated.
inline std::string stream_text(const Stream& s) {
  std::string text;
  for (const Json& e : s.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const Json& c = e["choices"][0];
    if (c.contains("text")) text += c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].contains("content"))
      text += c["delta"]["content"].get<std::string>();
  }
  return text;
}

inline std::string completion_text(const Reply& r) {
  const Json& c = r.body["choices"][0];
  return c.contains("text") ? c["text"].get<std::string>() : c["message"]["content"].get<std::string>();
}

// The value of one Prometheus sample line ("name{labels} value"), matched by its start; -1 when absent.
inline double metric_value(const std::string& page, const std::string& line_start) {
  for (size_t pos = 0; pos < page.size();) {
    size_t end = page.find('\n', pos);
    if (end == std::string::npos) end = page.size();
    const std::string line = page.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind(line_start, 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

}  // namespace tpserve::serve::testing
