// One request over httplib: the response handler records the status, the content receiver feeds the SSE
// parser.
#include "bench/serve_client/chat_stream.h"

#include <nlohmann/json.hpp>

#include "bench/serve_client/sse_parser.h"

namespace tpserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

ChunkInfo parse_chunk(const std::string& data) {
  ChunkInfo c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    c.error = "chunk is not a JSON object: " + data.substr(0, 200);
    return c;
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    c.error = e.is_object() && e.contains("message") && e["message"].is_string()
                  ? e["message"].get<std::string>()
                  : e.dump();
    return c;
  }
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const auto& choice = j["choices"][0];
    if (choice.contains("delta") && choice["delta"].is_object()) {
      const auto& delta = choice["delta"];
      if (delta.contains("content") && delta["content"].is_string())
        c.content = delta["content"].get<std::string>();
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      c.finish_reason = choice["finish_reason"].get<std::string>();
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    auto integer = [](const nlohmann::json& o, const char* key) -> std::optional<int> {
      if (o.is_object() && o.contains(key) && o[key].is_number_integer()) return o[key].get<int>();
      return std::nullopt;
    };
    c.completion_tokens = integer(u, "completion_tokens");
    c.prompt_tokens = integer(u, "prompt_tokens");
    if (u.contains("prompt_tokens_details"))
      c.cached_tokens = integer(u["prompt_tokens_details"], "cached_tokens");
  }
  return c;
}

std::string chat_request_body(const ChatRequest& r) {
  nlohmann::json body = {{"model", r.model},
                         {"messages", {{{"role", "user"}, {"content", r.prompt}}}},
                         {"max_tokens", r.max_tokens},
                         {"temperature", r.temperature},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (r.ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

StreamTiming stream_chat_completion(httplib::Client& client, const std::string& path,
                                    const ChatRequest& request, Clock::time_point run_start) {
  StreamTiming t;
  SseParser parser;
  bool done = false;
  int status = 0;
  std::string error_body;
  auto handle = [&](const std::vector<std::string>& payloads, Clock::time_point sent) {
    for (const std::string& data : payloads) {
      if (done) return;
      const ChunkInfo c = parse_chunk(data);
      if (!c.error.empty()) {
        t.error = c.error;
        continue;
      }
      if (c.done) {
        done = true;
        t.e2e_s = seconds_since(sent);
        return;
      }
      if (!c.content.empty()) {
        t.content_s.push_back(seconds_since(sent));
        t.text += c.content;
      }
      if (!c.finish_reason.empty()) t.finish_reason = c.finish_reason;
      if (c.completion_tokens) t.usage_tokens = *c.completion_tokens;
      if (c.prompt_tokens) t.prompt_tokens = *c.prompt_tokens;
      if (c.cached_tokens) t.cached_tokens = *c.cached_tokens;
    }
  };

  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = chat_request_body(request);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  const Clock::time_point sent = Clock::now();
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, std::min<size_t>(n, 4096 - std::min<size_t>(error_body.size(), 4096)));
      return true;
    }
    handle(parser.feed(std::string_view(data, n)), sent);
    return true;
  };
  t.start_s = std::chrono::duration<double>(sent - run_start).count();
  const httplib::Result res = client.send(req);
  if (!done && status == 200) handle(parser.finish(), sent);
  if (!res) {
    t.error = "transport error: " + httplib::to_string(res.error());
  } else if (status != 200) {
    t.error = "HTTP " + std::to_string(status) + ": " + error_body;
  } else if (!done) {
    t.e2e_s = seconds_since(sent);
    if (t.error.empty()) t.error = "stream ended without data: [DONE]";
  }
  if (t.error.empty() && t.content_s.empty()) t.error = "no content in the stream";
  t.ok = t.error.empty();
  return t;
}

}  // namespace tpserve::bench
