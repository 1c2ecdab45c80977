// The default action, `tpserve --config X.yaml`: serves the OpenAI-compatible API. Rank 0 loads the
// tokenizer, listens (health 503 while the model loads), loads its shard and runs the engine loop on the
// main thread (the only thread that talks to MPI); the other ranks load theirs and follow rank 0's steps.
// SIGTERM/SIGINT on rank 0: refuse new requests (503), finish the running ones, release the followers,
// exit 0 on every rank. Followers ignore those signals and stop when rank 0 says so.
#include <chrono>
#include <memory>

#include "common/log.h"
#include "runtime/engine/engine.h"
#include "runtime/serve/api_key.h"
#include "runtime/serve/engine_loop.h"
#include "runtime/serve/http_server.h"
#include "runtime/serve/termination_signals.h"
#include "runtime/serve/tokenizer_path.h"
#include "runtime/tools/commands.h"
#include "runtime/tools/runtime_setup.h"

namespace tpserve {
namespace {

std::unique_ptr<serve::Tokenizer> load_tokenizer(const Config& config) {
  const serve::TokenizerChoice choice = serve::resolve_tokenizer_path(config.model);
  if (choice.path.empty()) {
    log_warn("no tokenizer: ", choice.missing,
             ". Serving token ids only: prompts must be token ids, responses carry token_ids and empty text");
    return nullptr;
  }
  const auto start = std::chrono::steady_clock::now();
  auto tokenizer = serve::Tokenizer::load(choice.path);
  log_info("tokenizer ", choice.path, ": ", tokenizer->vocab_size(), " ids (",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s)");
  return tokenizer;
}

// Declared after everything the HTTP server and the signal action use (the tokenizer, engine and loop), so
// that its destructor runs before theirs: the signal action no longer reaches the loop, and the server's
// workers are joined while what they use still exists (on a failure: the loop rethrows an engine error;
// after a clean run the server is stopped already, and stop() does nothing again).
class ServingTeardown {
 public:
  ServingTeardown(serve::TerminationSignals& signals, serve::HttpServer& http)
      : signals_(signals), http_(http) {}
  ~ServingTeardown() {
    signals_.on_first_signal([] {});  // the server is stopped or about to be destroyed: nothing to drain
    http_.begin_drain();
    http_.stop();
  }
  ServingTeardown(const ServingTeardown&) = delete;
  ServingTeardown& operator=(const ServingTeardown&) = delete;

 private:
  serve::TerminationSignals& signals_;
  serve::HttpServer& http_;
};

}  // namespace

int run_serve(const Config& config) {
  RuntimeSetup rt(config);
  if (rt.world().rank() != 0) {
    serve::ignore_termination_signals();
    std::unique_ptr<Engine> engine_ptr = rt.make_engine();
    Engine& engine = *engine_ptr;
    engine.run_follower();
    log_info("released by rank 0; exiting");
    return 0;
  }

  serve::TerminationSignals signals;
  serve::ServerMetrics metrics;
  const serve::ApiKey api_key = serve::load_api_key(config.server);  // rank 0 only: it alone serves HTTP
  serve::HttpServer http(config.server, metrics, api_key.key);
  http.start();
  signals.on_first_signal([&http] { http.begin_drain(); });

  const std::unique_ptr<serve::Tokenizer> tokenizer = load_tokenizer(config);
  std::unique_ptr<Engine> engine_ptr = rt.make_engine();
  Engine& engine = *engine_ptr;
  serve::EngineLoop loop(engine, tokenizer.get(), metrics, config.server.max_queued_requests);
  metrics.set_model_name(engine.source().name);
  const serve::RequestLimits limits = serve::request_limits_for(engine, tokenizer.get(), config.server);
  http.set_ready(&loop, limits, limits.max_context_tokens);
  signals.on_first_signal([&http, &loop] {
    http.begin_drain();
    loop.drain();
  });
  const ServingTeardown teardown(signals, http);
  if (signals.received())
    log_info("a signal came while the model loaded: not serving; stopping");
  else
    log_info("serving model '", limits.model_name, "' on http://", config.server.host, ":", http.port(),
             " (context ", limits.max_context_tokens, " tokens, max_batch ", config.runtime.max_batch, "; ",
             api_key.key.empty() ? std::string("no API key") : "API key from " + api_key.source, ")");

  loop.run();  // returns after a signal, once every admitted request has finished
  if (!http.wait_responses_done(std::chrono::seconds(10)))
    log_warn("some responses were still being written after 10 s; closing their connections");
  engine.stop_followers();
  http.stop();
  log_info("stopped");
  return 0;
}

}  // namespace tpserve
