// A serve_client run: `concurrency` workers, each with its own keep-alive HTTP connection, take request
// indices from a shared counter until `requests` streaming chat completions have been sent; each records
// its StreamTiming. The model name is asked of GET /v1/models when not given.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/serve_client/chat_stream.h"

namespace tpserve::bench {

struct LoadOptions {
  std::string url = "http://127.0.0.1:8000";  // server root; a path prefix is kept (http://host:port/prefix)
  int concurrency = 16;
  int requests = 64;
  int max_tokens = 128;
  std::vector<std::string> prompt_sets = {"prose", "code", "numbers"};
  std::string model;  // empty: the first model /v1/models lists
  double temperature = 0.0;
  bool ignore_eos = false;
  double timeout_s = 600;
  std::string api_key;  // sent as `Authorization: Bearer <key>` when not empty
};

struct LoadResult {
  std::string model;
  double duration_s = 0;               // first request sent -> last stream ended
  std::vector<StreamTiming> requests;  // by request index
};

// "http://host:port/prefix" -> {"http://host:port", "/prefix"}; throws tpserve::Error when malformed.
std::pair<std::string, std::string> split_url(const std::string& url);

// progress(done, total) is called after each request (from worker threads, serialised).
LoadResult run_load(const LoadOptions& options, const std::function<void(int, int)>& progress = nullptr);

}  // namespace tpserve::bench
