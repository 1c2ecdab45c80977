// serve_client: N concurrent streaming chat clients against a running tpserve (or any OpenAI-compatible
// server); prints TTFT, TPOT, ITL, E2E (mean, median, p99), output tok/s and per-request decode tok/s, and
// writes them with every request's raw timings as JSON. See docs/PERF.md.
//
//   build/bench/serve_client --url http://127.0.0.1:8000 --concurrency 16 --requests 64 --max-tokens 128
//       --prompts prose,code,numbers --json serve.json
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "bench/common/build_info.h"
#include "bench/common/machine_info.h"
#include "bench/serve_client/load_run.h"
#include "bench/serve_client/serve_metrics.h"
#include "common/error.h"

namespace {

using namespace tpserve::bench;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text) {
    if (c != ',')
      part += c;
    else
      parts.push_back(part), part.clear();
  }
  parts.push_back(part);
  return parts;
}

nlohmann::json request_json(const StreamTiming& t) {
  const RequestMetrics m = request_metrics(t);
  return {{"ok", t.ok},
          {"error", t.error},
          {"start_s", t.start_s},
          {"e2e_s", t.e2e_s},
          {"ttft_s", m.ttft_s},
          {"output_tokens", m.output_tokens},
          {"usage_tokens", t.usage_tokens},
          {"prompt_tokens", t.prompt_tokens},
          {"cached_tokens", t.cached_tokens},
          {"finish_reason", t.finish_reason},
          {"content_s", t.content_s}};
}

int run(int argc, char** argv) {
  LoadOptions o;
  std::string prompts = "prose,code,numbers", json_path;
  CLI::App app{"serve_client: concurrent streaming chat clients against an OpenAI-compatible server"};
  app.add_option("--url", o.url, "server root")->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "requests in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--requests", o.requests, "requests in all")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-tokens", o.max_tokens, "max_tokens of each request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--prompts", prompts, "comma-separated prompt sets: prose, code, numbers")
      ->capture_default_str();
  app.add_option("--model", o.model, "model name (default: the first of /v1/models)");
  app.add_option("--temperature", o.temperature, "sampling temperature")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 2.0));
  app.add_flag("--ignore-eos", o.ignore_eos, "ask the server to ignore end-of-sequence (vLLM's ignore_eos)");
  app.add_option("--timeout", o.timeout_s, "seconds a request may take")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--json", json_path, "write the summary and every request's timings as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.prompt_sets = split_commas(prompts);
  // The key of a server with authentication, from the environment (never a flag: `ps` would show it).
  for (const char* name : {"TPSERVE_API_KEY", "OPENAI_API_KEY"})
    if (const char* key = std::getenv(name); key != nullptr && *key != '\0' && o.api_key.empty())
      o.api_key = key;

  const LoadResult result = run_load(o, [](int done, int total) {
    if (done == total || done % 16 == 0)
      std::fprintf(stderr, "[serve_client] %d/%d requests done\n", done, total);
  });
  const LoadSummary summary = summarize_load(result.requests, result.duration_s);
  std::cout << "model " << result.model << ", concurrency " << o.concurrency << ", max_tokens "
            << o.max_tokens << "\n"
            << format_load_summary(summary) << std::flush;
  for (const StreamTiming& t : result.requests)
    if (!t.ok) {
      std::fprintf(stderr, "[serve_client] first failure: %s\n", t.error.c_str());
      break;
    }

  if (!json_path.empty()) {
    nlohmann::json j = {{"tool", "serve_client"},
                        {"date", utc_timestamp()},
                        {"build", to_json(build_info())},
                        {"machine", to_json(machine_info())},
                        {"command_line", std::vector<std::string>(argv, argv + argc)},
                        {"options",
                         {{"url", o.url},
                          {"concurrency", o.concurrency},
                          {"requests", o.requests},
                          {"max_tokens", o.max_tokens},
                          {"prompts", o.prompt_sets},
                          {"temperature", o.temperature},
                          {"ignore_eos", o.ignore_eos}}},
                        {"model", result.model},
                        {"summary", to_json(summary)}};
    j["requests"] = nlohmann::json::array();
    for (const StreamTiming& t : result.requests) j["requests"].push_back(request_json(t));
    std::ofstream out(json_path);
    TPS_CHECK(out.good(), "cannot write ", json_path);
    out << j.dump(1) << "\n";
    std::fprintf(stderr, "[serve_client] wrote %s\n", json_path.c_str());
  }
  return summary.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve_client: %s\n", e.what());
    return 2;
  }
}
