// Worker threads with one httplib::Client each; request indices from an atomic counter.
#include "bench/serve_client/load_run.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "bench/serve_client/prompt_sets.h"
#include "common/error.h"
#include "common/log.h"

namespace tpserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

void configure(httplib::Client& client, double timeout_s, const std::string& api_key) {
  if (!api_key.empty()) client.set_bearer_token_auth(api_key);
  const auto whole = static_cast<time_t>(timeout_s);
  const auto micros = static_cast<time_t>((timeout_s - static_cast<double>(whole)) * 1e6);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(whole, micros);
  client.set_write_timeout(whole, micros);
  client.set_keep_alive(true);
  // Without TCP_NODELAY a request sent as headers then body waits for the server's delayed ACK (~40 ms)
  // on a kept-alive connection, which would land in TTFT.
  client.set_tcp_nodelay(true);
}

std::string first_model(const std::string& host, const std::string& prefix, const LoadOptions& o) {
  httplib::Client client(host);
  configure(client, o.timeout_s, o.api_key);
  const auto res = client.Get(prefix + "/v1/models");
  if (res && res->status == 200) {
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (!j.is_discarded() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
  }
  log_warn("serve_client: could not read a model id from ", host, prefix,
           "/v1/models; sending model 'default'");
  return "default";
}

}  // namespace

std::pair<std::string, std::string> split_url(const std::string& url) {
  const size_t scheme = url.find("://");
  TPS_CHECK(scheme != std::string::npos && scheme > 0, "--url '", url, "': expected http://host:port");
  const size_t path = url.find('/', scheme + 3);
  std::string host = url.substr(0, path), prefix = path == std::string::npos ? "" : url.substr(path);
  TPS_CHECK(host.size() > scheme + 3, "--url '", url, "': no host");
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {host, prefix};
}

LoadResult run_load(const LoadOptions& o, const std::function<void(int, int)>& progress) {
  TPS_CHECK(o.concurrency >= 1 && o.requests >= 1 && o.max_tokens >= 1,
            "concurrency, requests and max_tokens must be >= 1");
  for (const auto& set : o.prompt_sets) prompt_set(set);  // unknown names fail before any request
  const auto [host, prefix] = split_url(o.url);
  LoadResult result;
  result.model = o.model.empty() ? first_model(host, prefix, o) : o.model;
  result.requests.resize(o.requests);

  std::atomic<int> next{0};
  std::mutex progress_mutex;
  int done = 0;
  const Clock::time_point start = Clock::now();
  auto worker = [&] {
    httplib::Client client(host);
    configure(client, o.timeout_s, o.api_key);
    for (int i = next++; i < o.requests; i = next++) {
      const ChatRequest request{.model = result.model,
                                .prompt = prompt_for_request(o.prompt_sets, i),
                                .max_tokens = o.max_tokens,
                                .temperature = o.temperature,
                                .ignore_eos = o.ignore_eos};
      result.requests[i] = stream_chat_completion(client, prefix + "/v1/chat/completions", request, start);
      std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (progress) progress(done, o.requests);
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(o.concurrency, o.requests); ++w) workers.emplace_back(worker);
  for (auto& t : workers) t.join();
  result.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace tpserve::bench
