// The HTTP API end to end (tiny model, CPU backend, in-process server): response shapes of both endpoints,
// streaming equal to non-streaming, every prompt form, stop strings across token boundaries, stop token ids,
// context limits, seeds, /v1/models, /health through loading and draining, /metrics counts, and a server
// without a tokenizer.
#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/serve/chat_template.h"
#include "runtime/serve/utf8.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

const Json kGreedy = {{"temperature", 0}};

Json completion(const std::string& prompt, int max_tokens, Json extra = Json::object()) {
  Json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  body.update(extra);
  return body;
}

TEST(HttpApi, CompletionsWholeAndStreamed) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Reply r =
      post(server, "/v1/completions", completion("The capital of France is", 24, {{"ignore_eos", true}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "text_completion");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(r.body["model"], "synthetic-tiny");
  EXPECT_TRUE(r.body["created"].is_number_integer());
  const Json& choice = r.body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_FALSE(choice.contains("token_ids"));
  const int prompt_tokens = static_cast<int>(server.tokenizer()->encode("The capital of France is").size());
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 24);
  EXPECT_EQ(r.body["usage"]["total_tokens"], prompt_tokens + 24);
  const std::string text = completion_text(r);
  EXPECT_TRUE(is_valid_utf8(text));

  // Greedy is deterministic, with token ids on request matching the text.
  const Reply again =
      post(server, "/v1/completions",
           completion("The capital of France is", 24, {{"ignore_eos", true}, {"return_token_ids", true}}));
  EXPECT_EQ(completion_text(again), text);
  const auto ids = again.body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids.size(), 24u);
  EXPECT_EQ(server.tokenizer()->decode(ids), text);

  // Streamed: the same text, one event per token or fewer, a finish chunk, usage last, then [DONE].
  const Stream s = post_stream(
      server, "/v1/completions",
      completion("The capital of France is", 24,
                 {{"ignore_eos", true}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.status, 200) << s.raw;
  EXPECT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(stream_text(s), text);
  for (const Json& e : s.events) {
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_EQ(e["id"], s.events[0]["id"]);
    if (!e["choices"].empty()) {
      EXPECT_TRUE(is_valid_utf8(e["choices"][0]["text"].get<std::string>()));
    }
  }
  const Json& finish = s.events[s.events.size() - 2];
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  const Json& usage = s.events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 24);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], prompt_tokens);
}

TEST(HttpApi, ChatWholeAndStreamed) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json messages = Json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello! 你好"}}});
  Json body = {{"model", "synthetic-tiny"},   {"messages", messages},
               {"max_completion_tokens", 20}, {"temperature", 0},
               {"ignore_eos", true},          {"chat_template_kwargs", {{"enable_thinking", false}}}};
  const Reply r = post(server, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
  ChatTemplateOptions options;
  options.enable_thinking = false;
  const std::string prompt = render_chat_prompt(
      {{"system", "Be brief.", std::nullopt, {}}, {"user", "Hello! 你好", std::nullopt, {}}}, options);
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], server.tokenizer()->encode(prompt).size());
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 20);

  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const Stream s = post_stream(server, "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  EXPECT_TRUE(s.done);
  EXPECT_EQ(stream_text(s), completion_text(r));
  EXPECT_EQ(s.events.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  const Json& finish = s.events[s.events.size() - 2];
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(finish["choices"][0]["delta"].empty());
  EXPECT_TRUE(s.events.back()["choices"].empty());
  EXPECT_EQ(s.events.back()["usage"]["total_tokens"], r.body["usage"]["total_tokens"]);
}

TEST(HttpApi, EveryPromptFormGivesTheSameCompletion) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const std::string text = "Once upon a time";
  const auto ids = server.tokenizer()->encode(text);
  const Json forms[] = {text, Json::array({text}), ids, Json::array({ids})};
  std::string expected;
  for (const Json& prompt : forms) {
    const Reply r =
        post(server, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << prompt.dump() << " " << r.raw;
    if (expected.empty()) expected = completion_text(r);
    EXPECT_EQ(completion_text(r), expected) << prompt.dump();
    EXPECT_EQ(r.body["usage"]["prompt_tokens"], ids.size());
  }
}

TEST(HttpApi, StopStringsAcrossTokenBoundariesAndStopTokens) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json base =
      completion("Tell me a story about", 40, {{"ignore_eos", true}, {"return_token_ids", true}});
  const Reply full = post(server, "/v1/completions", base);
  ASSERT_EQ(full.status, 200);
  const auto ids = full.body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  const std::string text = completion_text(full);
  // A stop string made of the end of token 9's text and the start of token 10's: it spans a boundary.
  const std::string before = server.tokenizer()->decode({ids.begin(), ids.begin() + 10});
  const std::string upto = server.tokenizer()->decode({ids.begin(), ids.begin() + 11});
  ASSERT_GT(upto.size(), before.size());
  ASSERT_EQ(text.compare(0, upto.size(), upto), 0);
  size_t cut = before.size() - 1;
  while (cut > 0 && (static_cast<unsigned char>(before[cut]) & 0xC0) == 0x80) --cut;  // a character start
  size_t end = before.size() + 1;
  while (end < upto.size() && (static_cast<unsigned char>(upto[end]) & 0xC0) == 0x80) ++end;
  const std::string stop = upto.substr(cut, end - cut);
  const std::string expected = text.substr(0, text.find(stop));

  Json with_stop = base;
  with_stop["stop"] = Json::array({"never appears \x01", stop});
  const Reply r = post(server, "/v1/completions", with_stop);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(completion_text(r), expected) << "stop: " << stop;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");

  with_stop["stream"] = true;
  const Stream s = post_stream(server, "/v1/completions", with_stop);
  EXPECT_EQ(stream_text(s), expected);
  EXPECT_EQ(s.events.back()["choices"][0]["finish_reason"], "stop");
  for (const Json& e : s.events) {
    const std::string piece = e["choices"][0]["text"];
    EXPECT_EQ(piece.find(stop), std::string::npos);
  }

  // A stop token id: generation ends at its first occurrence and its text is not part of the output.
  Json with_stop_id = base;
  const int32_t stop_id = ids[5];
  with_stop_id["stop_token_ids"] = Json::array({stop_id});
  const Reply t = post(server, "/v1/completions", with_stop_id);
  const size_t first = std::find(ids.begin(), ids.end(), stop_id) - ids.begin();
  EXPECT_EQ(t.body["usage"]["completion_tokens"], first + 1);
  EXPECT_EQ(t.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(completion_text(t), server.tokenizer()->decode({ids.begin(), ids.begin() + first}));
}

TEST(HttpApi, ContextLimitsAndDefaultMaxTokens) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server({"runtime.max_seq_len=64"});
  const auto ids = server.tokenizer()->encode("A short prompt");
  const Reply too_long = post(server, "/v1/completions", completion("A short prompt", 64));
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(too_long.body["error"]["param"], "max_tokens");
  EXPECT_EQ(too_long.body["error"]["code"], "context_length_exceeded");
  // Without max_tokens the request may use all the room left.
  const Reply fill = post(server, "/v1/completions",
                          {{"prompt", "A short prompt"}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(fill.status, 200) << fill.raw;
  EXPECT_EQ(fill.body["usage"]["completion_tokens"], 64 - static_cast<int>(ids.size()));
  EXPECT_EQ(fill.body["choices"][0]["finish_reason"], "length");
  const Reply no_room = post(server, "/v1/completions", {{"prompt", std::vector<int>(64, 100)}});
  EXPECT_EQ(no_room.status, 400);
  EXPECT_EQ(no_room.body["error"]["param"], "prompt");
}

TEST(HttpApi, SeedsMakeSamplingReproducible) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  auto sample = [&](int64_t seed) {
    return completion_text(post(server, "/v1/completions",
                                {{"prompt", "Random words:"},
                                 {"max_tokens", 16},
                                 {"temperature", 1.0},
                                 {"seed", seed},
                                 {"ignore_eos", true}}));
  };
  EXPECT_EQ(sample(7), sample(7));
  EXPECT_NE(sample(7), sample(8));
}

TEST(HttpApi, ModelsHealthMetricsAndDraining) {
  SKIP_WITHOUT_TOKENIZER();
  auto server = std::make_unique<TestServer>();
  const Reply models = send(*server, "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body["object"], "list");
  EXPECT_EQ(models.body["data"][0]["id"], "synthetic-tiny");
  EXPECT_EQ(models.body["data"][0]["max_model_len"], 512);
  EXPECT_EQ(send(*server, "GET", "/health").status, 200);

  // Served requests and what /metrics reports.
  int prompt_tokens = 0, completion_tokens = 0, itl = 0;
  const std::vector<std::pair<std::string, Json>> requests = {
      {"/v1/completions", completion("one", 1)},  // finishes in its first step
      {"/v1/completions", completion("two two", 9, {{"stream", true}})},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "three"}}}}, {"max_tokens", 7}, {"temperature", 0}}},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "four"}}}},
        {"max_tokens", 3},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}}}}};
  for (const auto& [path, body] : requests) {
    Json usage;
    if (body.value("stream", false)) {
      Json b = body;
      b["stream_options"] = {{"include_usage", true}};
      usage = post_stream(*server, path, b).events.back()["usage"];
    } else {
      usage = post(*server, path, body).body["usage"];
    }
    prompt_tokens += usage["prompt_tokens"].get<int>();
    completion_tokens += usage["completion_tokens"].get<int>();
    itl += usage["completion_tokens"].get<int>() - 1;
  }
  const std::string page = send(*server, "GET", "/metrics").raw;
  const std::string label = "{model_name=\"synthetic-tiny\"";
  EXPECT_EQ(metric_value(page, "tpserve:prompt_tokens_total" + label), prompt_tokens) << page;
  EXPECT_EQ(metric_value(page, "tpserve:generation_tokens_total" + label), completion_tokens);
  const double successes =
      metric_value(page, "tpserve:request_success_total" + label + ",finished_reason=\"stop\"") +
      metric_value(page, "tpserve:request_success_total" + label + ",finished_reason=\"length\"");
  EXPECT_EQ(successes, 4);
  EXPECT_EQ(metric_value(page, "tpserve:time_to_first_token_seconds_count" + label), 4);
  EXPECT_EQ(metric_value(page, "tpserve:e2e_request_latency_seconds_count" + label), 4);
  EXPECT_EQ(metric_value(page, "tpserve:request_queue_time_seconds_count" + label), 4);
  EXPECT_EQ(metric_value(page, "tpserve:inter_token_latency_seconds_count" + label), itl);
  EXPECT_EQ(metric_value(page, "tpserve:inter_token_latency_seconds_bucket" + label + ",le=\"+Inf\""), itl);
  EXPECT_EQ(metric_value(page, "tpserve:num_requests_running" + label), 0);
  EXPECT_EQ(metric_value(page, "tpserve:num_requests_waiting" + label), 0);
  EXPECT_EQ(metric_value(page, "tpserve:kv_cache_usage_perc" + label), 0);
  for (const char* spec :
       {"tpserve:spec_decode_num_drafts_total", "tpserve:spec_decode_num_draft_tokens_total",
        "tpserve:spec_decode_num_accepted_tokens_total"})
    EXPECT_EQ(metric_value(page, spec + label), 0) << spec;
  EXPECT_NE(page.find("# TYPE tpserve:time_to_first_token_seconds histogram"), std::string::npos);
}

// With MTP speculation the /metrics page counts what the scheduler verified: a draft round per sequence
// and step, k draft tokens each, acceptances per draft position adding up to the accepted total.
TEST(HttpApi, SpeculativeDecodingMetricsCountDraftsAndAcceptances) {
  TestServer server(
      {"model.synthetic.mtp=true", "speculative.method=mtp", "speculative.num_speculative_tokens=2"});
  for (int i = 0; i < 2; ++i)
    post(server, "/v1/completions", completion(i ? "Two" : "One", 12, {{"ignore_eos", true}}));
  const std::string page = send(server, "GET", "/metrics").raw;
  const std::string label = "{model_name=\"synthetic-tiny\"";
  const double drafts = metric_value(page, "tpserve:spec_decode_num_drafts_total" + label);
  const double draft_tokens = metric_value(page, "tpserve:spec_decode_num_draft_tokens_total" + label);
  const double accepted = metric_value(page, "tpserve:spec_decode_num_accepted_tokens_total" + label);
  EXPECT_GT(drafts, 0) << page;
  EXPECT_EQ(draft_tokens, 2 * drafts);
  EXPECT_GE(accepted, 0);
  EXPECT_LE(accepted, draft_tokens);
  const std::string pos = "tpserve:spec_decode_num_accepted_tokens_per_pos_total" + label + ",position=";
  const double at0 = metric_value(page, pos + "\"0\""), at1 = metric_value(page, pos + "\"1\"");
  EXPECT_GE(at0, at1);  // the second draft counts only after the first was accepted
  EXPECT_EQ(at0 + at1, accepted);
  EXPECT_EQ(metric_value(page, pos + "\"2\""), -1) << "k = 2: two positions";
  EXPECT_DOUBLE_EQ(metric_value(page, "tpserve:spec_decode_mean_accepted_length" + label),
                   1 + accepted / drafts);
  // Every emitted token is a verification's accepted draft or its correction/bonus token.
  EXPECT_EQ(metric_value(page, "tpserve:generation_tokens_total" + label), 24);
  // Each request: its prefill emits the first token, each verification accepted + 1 more (the last one
  // possibly past max_tokens, cut: up to k extra per request).
  EXPECT_GE(drafts + accepted, 24 - 2);
  EXPECT_LE(drafts + accepted, 24 - 2 + 2 * 2);
}

// n choices: one engine request each, seeded seed + i (choice 0 is the n = 1 answer), the prompt counted once
// in usage; streamed, each choice's chunks carry its index and its text equals the whole answer's.
TEST(HttpApi, SeveralChoicesWholeAndStreamed) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json sampled = {{"temperature", 1.0}, {"seed", 11}, {"ignore_eos", true}};
  auto one = [&](int64_t seed) {
    Json extra = sampled;
    extra["seed"] = seed;
    return completion_text(post(server, "/v1/completions", completion("Once upon a time", 12, extra)));
  };
  Json extra = sampled;
  extra["n"] = 3;
  const Reply r = post(server, "/v1/completions", completion("Once upon a time", 12, extra));
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["choices"].size(), 3u);
  std::vector<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.body["choices"][i]["index"], i);
    EXPECT_EQ(r.body["choices"][i]["finish_reason"], "length");
    texts.push_back(r.body["choices"][i]["text"].get<std::string>());
    EXPECT_EQ(texts[i], one(11 + i)) << "choice " << i;
  }
  EXPECT_NE(texts[0], texts[1]);
  const int prompt_tokens = static_cast<int>(server.tokenizer()->encode("Once upon a time").size());
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 3 * 12);

  extra["stream"] = true;
  extra["stream_options"] = {{"include_usage", true}};
  const Stream s = post_stream(server, "/v1/completions", completion("Once upon a time", 12, extra));
  ASSERT_EQ(s.status, 200) << s.raw;
  EXPECT_TRUE(s.done);
  // Every choice's first chunk comes before any text, in index order (clients index choices as they come).
  ASSERT_GE(s.events.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.events[i]["choices"][0]["index"], i);
    EXPECT_EQ(s.events[i]["choices"][0]["text"], "");
  }
  std::vector<std::string> streamed(3);
  std::vector<int> finishes(3, 0);
  for (const Json& e : s.events) {
    if (e["choices"].empty()) {
      EXPECT_EQ(e["usage"]["completion_tokens"], 3 * 12);
      EXPECT_EQ(&e, &s.events.back()) << "usage comes last";
      continue;
    }
    const Json& c = e["choices"][0];
    const int i = c["index"];
    ASSERT_TRUE(i >= 0 && i < 3);
    streamed[i] += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finishes[i];
  }
  EXPECT_EQ(streamed, texts);
  EXPECT_EQ(finishes, (std::vector<int>{1, 1, 1}));

  // Chat: each choice a message of its own.
  const Reply chat = post(server, "/v1/chat/completions",
                          {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                           {"max_tokens", 5},
                           {"n", 2},
                           {"temperature", 1.0},
                           {"seed", 3}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  ASSERT_EQ(chat.body["choices"].size(), 2u);
  EXPECT_EQ(chat.body["choices"][1]["index"], 1);
  EXPECT_EQ(chat.body["choices"][1]["message"]["role"], "assistant");
}

// With speculation and a KV cache smaller than max_seq_len, the context a request may fill (max_model_len,
// and a request's default max_tokens) leaves the room the drafts of its last step need: such requests got a
// 500 from the scheduler before.
TEST(HttpApi, SpeculationWithASmallCacheFillsTheContextItAnnounces) {
  TestServer server({"model.synthetic.mtp=true", "speculative.method=mtp",
                     "speculative.num_speculative_tokens=1", "runtime.num_kv_blocks=8"});
  const Reply models = send(server, "GET", "/v1/models");
  const int64_t context = models.body["data"][0]["max_model_len"];
  EXPECT_EQ(context, 8 * 16 - 2);
  const Reply r = post(server, "/v1/completions", Json{{"prompt", {1, 2, 3}}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r.body["usage"]["completion_tokens"], context - 3);
  EXPECT_EQ(post(server, "/v1/completions", Json{{"prompt", {1, 2, 3}}, {"max_tokens", context - 2}}).status,
            400);
}

// A signal while the model loads: /health says draining (it stayed "loading"), /metrics answers without a
// loop (it would read a null one), generation is refused as shutting down, and the model becoming ready
// afterwards does not undo the drain.
TEST(HttpApi, DrainWhileLoadingStaysDraining) {
  ServerMetrics metrics;
  HttpServer http(local_server_config(4), metrics);
  http.start();
  httplib::Client cli("127.0.0.1", http.port());
  http.begin_drain();
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("draining"), std::string::npos) << health->body;
  EXPECT_EQ(cli.Get("/metrics")->status, 200);
  auto refused = cli.Post("/v1/completions", R"({"prompt": [1, 2]})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(Json::parse(refused->body)["error"]["code"], "server_shutting_down");

  auto comm = parallel::make_single_rank_communicator();
  Engine engine(
      load_config_file(std::string(TPSERVE_SOURCE_DIR) + "/configs/tiny.yaml", {"runtime.backend=cpu"}),
      *comm, make_cpu_backend());
  EngineLoop loop(engine, nullptr, metrics);
  http.set_ready(&loop, request_limits_for(engine, nullptr, ServerConfig{}), 512);
  health = cli.Get("/health");
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("draining"), std::string::npos) << health->body;
  EXPECT_EQ(cli.Get("/metrics")->status, 200);
  http.stop();
}

TEST(HttpApi, HealthIsUnavailableWhileLoadingAndDraining) {
  ServerMetrics metrics;
  HttpServer http(local_server_config(4), metrics);
  http.start();
  httplib::Client cli("127.0.0.1", http.port());
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("loading"), std::string::npos);
  auto early = cli.Post("/v1/completions", R"({"prompt": [1, 2]})", "application/json");
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  EXPECT_EQ(Json::parse(early->body)["error"]["code"], "model_loading");
  EXPECT_EQ(cli.Get("/v1/models")->status, 503);
  EXPECT_EQ(cli.Get("/metrics")->status, 200);

  auto comm = parallel::make_single_rank_communicator();
  Engine engine(
      load_config_file(std::string(TPSERVE_SOURCE_DIR) + "/configs/tiny.yaml", {"runtime.backend=cpu"}),
      *comm, make_cpu_backend());
  EngineLoop loop(engine, nullptr, metrics);
  http.set_ready(&loop, request_limits_for(engine, nullptr, ServerConfig{}), 512);
  std::thread runner([&loop] { loop.run(); });
  EXPECT_EQ(cli.Get("/health")->status, 200);
  http.begin_drain();
  loop.drain();
  runner.join();
  health = cli.Get("/health");
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("draining"), std::string::npos);
  auto late = cli.Post("/v1/completions", R"({"prompt": [1, 2]})", "application/json");
  EXPECT_EQ(late->status, 503);
  EXPECT_EQ(Json::parse(late->body)["error"]["code"], "server_shutting_down");
  EXPECT_EQ(late->get_header_value("Connection"), "close");  // a keep-alive client learns to go elsewhere
  EXPECT_EQ(late->get_header_value("Retry-After"), "1");
  http.stop();
}

TEST(HttpApi, APortInUseIsAClearError) {
  ServerMetrics metrics;
  HttpServer first(local_server_config(2), metrics);
  first.start();
  ServerConfig same_port = local_server_config(2);
  same_port.port = first.port();
  HttpServer second(same_port, metrics);
  try {
    second.start();
    ADD_FAILURE() << "a second server bound port " << first.port();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << e.what();
  }
}

TEST(HttpApi, WithoutTokenizerServesTokenIds) {
  TestServer server({}, /*with_tokenizer=*/false);
  const Reply ids =
      post(server, "/v1/completions", {{"prompt", {9707, 11, 1879}}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(ids.status, 200) << ids.raw;
  EXPECT_EQ(completion_text(ids), "");
  EXPECT_EQ(ids.body["choices"][0]["token_ids"].size(), 6u);
  const Reply text = post(server, "/v1/completions", {{"prompt", "hello"}});
  EXPECT_EQ(text.status, 400);
  EXPECT_EQ(text.body["error"]["param"], "prompt");
  EXPECT_EQ(text.body["error"]["code"], "tokenizer_unavailable");
  const Reply chat =
      post(server, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(chat.body["error"]["param"], "messages");
  // Stop strings match text, which this server does not make: refused rather than never matched.
  for (const Json& stop : {Json("abc"), Json::array({"abc"})}) {
    const Reply r = post(server, "/v1/completions", {{"prompt", {9707, 11}}, {"stop", stop}});
    EXPECT_EQ(r.status, 400) << r.raw;
    EXPECT_EQ(r.body["error"]["code"], "tokenizer_unavailable") << r.raw;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("stop_token_ids"), std::string::npos)
        << r.raw;
  }
  const Reply no_stops = post(server, "/v1/completions", {{"prompt", {9707, 11}}, {"stop", Json::array()}});
  EXPECT_EQ(no_stops.status, 200) << no_stops.raw;
}

}  // namespace
}  // namespace tpserve::serve::testing
