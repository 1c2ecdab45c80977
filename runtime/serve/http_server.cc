#include "runtime/serve/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "runtime/serve/api_error.h"
#include "runtime/serve/api_key.h"
#include "runtime/serve/connection_server.h"
#include "runtime/serve/engine_loop.h"
#include "runtime/serve/generation_response.h"
#include "runtime/serve/tokenize_request.h"

namespace tpserve::serve {
namespace {

constexpr const char* kJson = "application/json";
const char* const kRoutes[][2] = {{"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
                                  {"/v1/models", "GET"},       {"/health", "GET"},
                                  {"/metrics", "GET"},         {"/tokenize", "POST"},
                                  {"/detokenize", "POST"}};

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
}

// The methods a known path allows ("" for an unknown path).
std::string allowed_methods(const std::string& path) {
  std::string allowed;
  for (const auto& route : kRoutes)
    if (path == route[0]) allowed += std::string(allowed.empty() ? "" : ", ") + route[1];
  return allowed;
}

ConnectionLimits connection_limits(const ServerConfig& c) {
  auto ms = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  return {c.threads, c.max_connections, ms(c.idle_timeout_s), ms(c.request_timeout_s), ms(c.write_timeout_s)};
}

// Error codes that mean "a server limit refused this request" (counted in tpserve:requests_refused_total).
bool is_limit_code(const std::string& code) {
  return code == "limit_exceeded" || code == "server_overloaded";
}

std::string status_text(int status) {
  switch (status) {
    case 400:
      return "the HTTP request is malformed";
    case 413:
      return "request body too large";
    case 414:
      return "request URI too long";
    default:
      return "HTTP status " + std::to_string(status);
  }
}

// Request bodies are JSON: a Content-Type of application/json (any parameters) or none. Anything else gets a
// 415 before the body is read; a form encoding (curl -d's default) would otherwise be parsed by httplib as
// form fields, and refused with a 413 beyond 8 KiB whatever server.max_body_bytes says.
std::optional<ApiError> unsupported_media_type(const std::string& content_type) {
  std::string media = content_type.substr(0, content_type.find(';'));
  media.erase(0, media.find_first_not_of(" \t"));
  media.erase(media.find_last_not_of(" \t") + 1);
  std::transform(media.begin(), media.end(), media.begin(), [](unsigned char c) { return std::tolower(c); });
  if (media.empty() || media == "application/json") return std::nullopt;
  return ApiError(
      415, "request bodies are JSON: send `Content-Type: application/json` (got `" + content_type + "`)", "",
      "unsupported_media_type");
}

}  // namespace

HttpServer::HttpServer(ServerConfig config, ServerMetrics& metrics, std::string api_key)
    : config_(std::move(config)),
      api_key_(std::move(api_key)),
      metrics_(metrics),
      server_(std::make_unique<ConnectionServer>(
          connection_limits(config_), [this](const char* code) { metrics_.count_refusal(code); })) {
  created_ =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  server_->set_payload_max_length(static_cast<size_t>(config_.max_body_bytes));
  // What the Keep-Alive header of each answer announces (ConnectionServer enforces both).
  server_->set_keep_alive_timeout(static_cast<time_t>(std::ceil(config_.idle_timeout_s)));
  server_->set_keep_alive_max_count(ConnectionServer::kMaxRequestsPerConnection);
  server_->set_tcp_nodelay(true);
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port and silently
  // share its traffic: keep only SO_REUSEADDR (a restarted server can bind at once).
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  routes();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::routes() {
  httplib::Server& s = *server_;
  // Before the body is read: authentication (only /health is open to all), then the body's media type.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    std::optional<ApiError> refusal;
    if (!api_key_.empty() && req.path != "/health") {
      const std::string authorization = req.get_header_value("Authorization");
      if (!authorization_matches(authorization, api_key_)) {
        metrics_.count_refusal("unauthorized");
        res.set_header("WWW-Authenticate", "Bearer");
        refusal = authorization.empty()
                      ? ApiError(401,
                                 "missing API key: this server needs an `Authorization: "
                                 "Bearer <key>` header",
                                 "", "missing_api_key")
                      : ApiError(401, "invalid API key (expected `Authorization: Bearer <key>`)", "",
                                 "invalid_api_key");
      }
    }
    if (!refusal && req.method == "POST" && allowed_methods(req.path).find("POST") != std::string::npos)
      refusal = unsupported_media_type(req.get_header_value("Content-Type"));
    if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
    // The body was not read: the connection cannot carry another request.
    res.set_header("Connection", "close");
    ConnectionServer::close_after_answer();
    send_error(res, *refusal);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool draining = draining_.load(), loaded = loaded_.load();
    res.status = loaded && !draining ? 200 : 503;
    const char* status = draining ? "draining" : loaded ? "ok" : "loading";
    res.set_content(nlohmann::json{{"status", status}}.dump(), kJson);
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const SchedulerGauges gauges = loaded_.load() ? loop_->gauges() : SchedulerGauges{};
    res.set_content(metrics_.render(gauges, server_->open_connections()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    require_loaded();
    res.set_content(model_list(limits_.model_name, created_, max_model_len_).dump(), kJson);
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    require_loaded();
    res.set_content(tokenize_response(req.body, limits_).dump(), kJson);
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    require_loaded();
    res.set_content(
        detokenize_response(req.body, limits_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        kJson);
  });
  s.Post("/v1/completions",
         [this](const httplib::Request& req, httplib::Response& res) { generation(req, res, false); });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { generation(req, res, true); });

  // Anything else: 405 for a known path with another method, else 404.
  auto unrouted = [](const httplib::Request& req, httplib::Response& res) {
    const std::string allowed = allowed_methods(req.path);
    if (allowed.empty()) throw ApiError(404, "no route for " + req.method + " " + req.path, "", "not_found");
    res.set_header("Allow", allowed);
    throw ApiError(405, req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")", "",
                   "method_not_allowed");
  };
  s.Get(".*", unrouted);
  s.Post(".*", unrouted);
  s.Put(".*", unrouted);
  s.Patch(".*", unrouted);
  s.Delete(".*", unrouted);
  s.Options(".*", unrouted);

  s.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      if (is_limit_code(e.code())) metrics_.count_refusal(e.code());
      send_error(res, e);
    } catch (const std::exception& e) {
      log_error("HTTP ", req.method, " ", req.path, ": internal error: ", e.what());
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "internal_error"));
    }
  });
  // Errors httplib produces itself (unparsable HTTP, body over the limit, unknown method) get a JSON body.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.status < 400) return httplib::Server::HandlerResponse::Unhandled;
        if (ConnectionServer::request_timed_out()) {  // counted by ConnectionServer, which then closes
          res.set_header("Connection", "close");
          send_error(res, ApiError(408, server_->request_timeout_message(), "", "request_timeout"));
          return httplib::Server::HandlerResponse::Handled;
        }
        std::string message = status_text(res.status);
        if (res.status == 413) {
          message += " (the limit is " + std::to_string(config_.max_body_bytes) + " bytes)";
          metrics_.count_refusal("request_too_large");
        }
        send_error(res, ApiError(res.status, message, "", res.status == 413 ? "request_too_large" : ""));
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    log_debug("HTTP ", req.method, " ", req.path, " -> ", res.status);
  });
}

void HttpServer::require_loaded() const {
  if (!loaded_.load()) throw ApiError(503, "the model is still loading", "", "model_loading");
}

// 503 while draining: the connection closes after it (a keep-alive client would otherwise send its next
// request to a server about to stop), and the client may retry elsewhere or after a restart.
[[noreturn]] static void refuse_shutting_down(httplib::Response& res) {
  res.set_header("Connection", "close");
  res.set_header("Retry-After", "1");
  ConnectionServer::close_after_answer();
  throw ApiError(503, "the server is shutting down", "", "server_shutting_down");
}

void HttpServer::generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (draining_.load()) refuse_shutting_down(res);
  require_loaded();
  ParsedRequest parsed =
      chat ? parse_chat_request(req.body, limits_) : parse_completion_request(req.body, limits_);
  GenerationResponse g;
  g.header = make_response_header(chat ? Endpoint::kChatCompletions : Endpoint::kCompletions,
                                  limits_.model_name, parsed.return_token_ids);
  g.header.logprobs = parsed.job.logprobs >= 0;
  g.include_usage = parsed.include_usage;
  g.continuous_usage = parsed.continuous_usage;
  g.chat_output = parsed.chat_output;
  {
    std::lock_guard<std::mutex> lock(responses_mutex_);
    ++open_responses_;
  }
  g.on_written = [this] { response_done(); };
  g.client_gone = [] { return ConnectionServer::client_gone(); };
  g.choices_per_prompt = parsed.choices_per_prompt;
  // One engine request per choice of each prompt, prompt-major; refused as a whole when any is (those
  // already queued are cancelled).
  Submission submitted;
  const size_t choices = parsed.seeds.size();
  for (size_t c = 0; c < choices; ++c) {
    const size_t p = c / static_cast<size_t>(parsed.choices_per_prompt);
    GenerationJob job = parsed.jobs[p];
    job.sampling.seed = parsed.seeds[c];
    submitted = loop_->submit(std::move(job));
    if (submitted.stream == nullptr) break;
    g.streams.push_back(std::move(submitted.stream));
    g.prompt_tokens.push_back(static_cast<int>(parsed.jobs[p].prompt.size()));
    if (!parsed.echo.empty()) g.echo.push_back(parsed.echo[p]);
  }
  if (g.streams.size() < choices) {
    for (const auto& stream : g.streams) stream->cancel();
    response_done();
    if (submitted.refusal == Submission::Refusal::kQueueFull) {
      res.set_header("Retry-After", "1");
      throw ApiError(503,
                     "the server is overloaded: the request's " + std::to_string(choices) +
                         " sequences do not all fit in the queue of " +
                         std::to_string(config_.max_queued_requests) +
                         " waiting requests (server.max_queued_requests); retry later",
                     "", "server_overloaded");
    }
    refuse_shutting_down(res);
  }
  if (parsed.stream)
    respond_streaming(res, std::move(g));
  else
    respond_whole(res, std::move(g));
}

void HttpServer::response_done() {
  {
    std::lock_guard<std::mutex> lock(responses_mutex_);
    --open_responses_;
  }
  responses_cv_.notify_all();
}

bool HttpServer::wait_responses_done(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(responses_mutex_);
  return responses_cv_.wait_for(lock, timeout, [this] { return open_responses_ == 0; });
}

void HttpServer::start() {
  std::signal(SIGPIPE, SIG_IGN);  // a client that goes away mid-write must not end the process
  port_ = config_.port == 0 ? server_->bind_to_any_port(config_.host) : config_.port;
  const bool bound = config_.port == 0 ? port_ > 0 : server_->bind_to_port(config_.host, config_.port);
  TPS_CHECK(bound, "server: cannot listen on ", config_.host, ":", config_.port,
            " (address in use or not available? set server.host / server.port)");
  server_->raise_listen_backlog();
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listener_returned_ = true;
  });
  // stop() only closes a server that is already running: wait for the accept loop, so that an early stop()
  // (a signal during start-up, a test) cannot be lost and leave join() waiting forever.
  while (!server_->is_running() && !listener_returned_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  TPS_CHECK(server_->is_running(), "server: the HTTP listener on ", config_.host, ":", port_,
            " stopped at once");
  if (api_key_.empty() && !is_loopback_host(config_.host))
    log_warn("listening on ", config_.host, " without an API key: anyone who can reach port ", port_,
             " can use the model (set TPSERVE_API_KEY or server.api_key_file; docs/serving.md)");
  log_info("listening on http://", config_.host, ":", port_, " (", config_.threads,
           " request threads, at most ", config_.max_connections, " connections)");
}

void HttpServer::set_ready(EngineLoop* loop, RequestLimits limits, int64_t max_model_len) {
  loop_ = loop;
  limits_ = std::move(limits);
  max_model_len_ = max_model_len;
  loaded_.store(true);  // after the fields above: a thread that sees it loaded sees them
}

void HttpServer::begin_drain() {
  draining_.store(true);
}

void HttpServer::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace tpserve::serve
