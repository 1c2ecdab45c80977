// What respond_whole and respond_streaming write for the engine's updates of one request (no server: the
// response's content provider is pulled directly): chat answers parsed for reasoning and tool calls in both,
// "tool_calls" as the finish reason of an answer that made some, and completions' text untouched.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <atomic>

#include "runtime/serve/generation_response.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::json;

StreamUpdate text_update(const std::string& text) {
  StreamUpdate u;
  u.text = text;
  return u;
}

StreamUpdate end_update(const std::string& text, const std::string& reason) {
  StreamUpdate u = text_update(text);
  u.finished = true;
  u.finish_reason = reason;
  u.prompt_tokens = 5;
  u.completion_tokens = 9;
  return u;
}

GenerationResponse response_for(Endpoint endpoint, std::shared_ptr<RequestStream> stream,
                                ChatOutputOptions options) {
  GenerationResponse g;
  g.header = make_response_header(endpoint, "m", false);
  g.streams = {std::move(stream)};
  g.chat_output = options;
  return g;
}

// Pulls the chunked provider once; appends what it wrote. False once the stream is done.
bool pull(httplib::Response& res, std::string& out) {
  httplib::DataSink sink;
  bool done = false;
  sink.write = [&](const char* data, size_t n) {
    EXPECT_GT(n, 0u) << "an empty write is an empty chunk, which ends a chunked body";
    out.append(data, n);
    return true;
  };
  sink.done = [&] { done = true; };
  sink.is_writable = [] { return true; };
  EXPECT_TRUE(res.content_provider_(0, 0, sink));
  return !done;
}

// The JSON payloads of the SSE events in `text`, [DONE] left out.
std::vector<Json> events(const std::string& text) {
  std::vector<Json> out;
  size_t at = 0;
  while ((at = text.find("data: ", at)) != std::string::npos) {
    const size_t end = text.find("\n\n", at);
    const std::string payload = text.substr(at + 6, end - at - 6);
    if (payload != "[DONE]") out.push_back(Json::parse(payload));
    at = end;
  }
  return out;
}

const std::vector<std::string> kAnswer = {"<think>\nweather", " needed\n</th", "ink>\n\nChecking.",
                                          "\n<tool_call>\n{\"name\": \"get_weather\", ",
                                          "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"};

TEST(GenerationResponse, StreamedChatAnswerParsedForReasoningAndToolCalls) {
  auto stream = std::make_shared<RequestStream>();
  httplib::Response res;
  respond_streaming(res, response_for(Endpoint::kChatCompletions, stream, {true, true}));
  std::string written;
  for (size_t i = 0; i < kAnswer.size(); ++i) {  // one update a pull: the deltas as a client gets them
    const bool last = i + 1 == kAnswer.size();
    stream->publish(last ? end_update(kAnswer[i], "stop") : text_update(kAnswer[i]));
    EXPECT_EQ(pull(res, written), !last);
  }
  ASSERT_NE(written.find("data: [DONE]\n\n"), std::string::npos) << written;
  std::string reasoning, content;
  std::vector<Json> calls;
  std::string finish;
  for (const Json& e : events(written)) {
    const Json& choice = e["choices"][0];
    const Json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls"))
      for (const Json& c : delta["tool_calls"]) calls.push_back(c);
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(reasoning, "\nweather needed\n");
  EXPECT_EQ(content, "Checking.\n");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(finish, "tool_calls");
}

std::string whole_body(Endpoint endpoint, ChatOutputOptions options, const std::string& reason) {
  auto stream = std::make_shared<RequestStream>();
  std::string text;
  for (const std::string& piece : kAnswer) text += piece;
  stream->publish(end_update(text, reason));
  httplib::Response res;
  respond_whole(res, response_for(endpoint, stream, options));
  std::string body;
  httplib::DataSink sink;
  sink.write = [&](const char* data, size_t n) {
    body.append(data, n);
    return true;
  };
  EXPECT_TRUE(res.content_provider_(0, res.content_length_, sink));
  return body;
}

TEST(GenerationResponse, WholeChatAnswerParsedForReasoningAndToolCalls) {
  const Json body = Json::parse(whole_body(Endpoint::kChatCompletions, {true, true}, "stop"));
  const Json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "\nweather needed\n");
  EXPECT_EQ(message["content"], "Checking.\n");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(body["usage"]["completion_tokens"], 9);
  // Cut off by max_tokens: the calls made are returned, and the reason stays "length".
  EXPECT_EQ(Json::parse(whole_body(Endpoint::kChatCompletions, {true, true},
                                   "length"))["choices"][0]["finish_reason"],
            "length");
}

TEST(GenerationResponse, UnparsedAnswersKeepTheirText) {
  std::string text;
  for (const std::string& piece : kAnswer) text += piece;
  const Json chat = Json::parse(whole_body(Endpoint::kChatCompletions, {}, "stop"));
  EXPECT_EQ(chat["choices"][0]["message"]["content"], text);
  EXPECT_FALSE(chat["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  const Json completion = Json::parse(whole_body(Endpoint::kCompletions, {}, "stop"));
  EXPECT_EQ(completion["choices"][0]["text"], text);
}

TEST(GenerationResponse, StepsWhoseTextIsHeldBackSendNoChunk) {
  for (const bool ids : {false, true}) {
    auto stream = std::make_shared<RequestStream>();
    httplib::Response res;
    GenerationResponse g = response_for(Endpoint::kChatCompletions, stream, {true, true});
    g.header.return_token_ids = ids;
    respond_streaming(res, std::move(g));
    std::string written;
    // "" stands for a step whose text the engine loop held back (a stop string's start, an incomplete
    // character); "<tool", "<tool_c" and an unclosed call are held back by the parser.
    const std::vector<std::string> texts = {"Hi", "", " <tool", "_c", "all> x", "y"};
    for (size_t i = 0; i < texts.size(); ++i) {
      StreamUpdate u = i + 1 == texts.size() ? end_update(texts[i], "stop") : text_update(texts[i]);
      u.token_ids = {static_cast<int32_t>(i)};
      stream->publish(std::move(u));
      pull(res, written);
    }
    std::string content;
    int chunks = 0;
    for (const Json& e : events(written)) {
      if (e["choices"].empty()) continue;
      ++chunks;
      const Json& delta = e["choices"][0]["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      // Every chunk but the last (its finish reason) carries text, or the token ids asked for.
      if (e["choices"][0]["finish_reason"].is_null()) {
        EXPECT_TRUE(delta.contains("content") || ids) << e.dump();
      }
    }
    EXPECT_EQ(content, "Hi <tool_call> xy");    // the call never closed: its text, as written
    EXPECT_EQ(chunks, ids ? 7 : 4) << written;  // text in steps 0, 2 and 5, the finish chunk; ids: all
  }
}

TEST(GenerationResponse, AGoneClientIsNoticedWhileNothingIsWritten) {
  auto stream = std::make_shared<RequestStream>();
  httplib::Response res;
  GenerationResponse g = response_for(Endpoint::kChatCompletions, stream, {true, true});
  std::atomic<bool> gone{false};
  g.client_gone = [&] { return gone.load(); };
  respond_streaming(res, std::move(g));
  std::string written;
  stream->publish(text_update("Calling "));
  EXPECT_TRUE(pull(res, written));
  gone = true;
  stream->publish(text_update("<tool_call>{\"name\": \"f\""));  // held until it closes: nothing to write
  httplib::DataSink sink;
  sink.write = [](const char*, size_t) { return true; };
  sink.done = [] {};
  bool kept_going = true;
  for (int turn = 0; turn < 20 && kept_going; ++turn) kept_going = res.content_provider_(0, 0, sink);
  EXPECT_FALSE(kept_going) << "the provider never gave up on a gone client";
  EXPECT_TRUE(stream->cancelled());
}

TEST(GenerationResponse, AnEngineErrorKeepsItsMessageInAWholeAnswer) {
  auto stream = std::make_shared<RequestStream>();
  StreamUpdate failed = end_update("", "abort");
  failed.error = "needs 9 KV blocks";
  stream->publish(failed);
  httplib::Response res;
  bool written = false;
  GenerationResponse g = response_for(Endpoint::kCompletions, stream, {});
  g.on_written = [&] { written = true; };
  respond_whole(res, std::move(g));
  EXPECT_EQ(res.status, 500);
  // In the body itself, where the server's error handler (which fills empty error bodies) leaves it.
  const Json body = Json::parse(res.body);
  EXPECT_EQ(body["error"]["code"], "engine_error");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("needs 9 KV blocks"), std::string::npos);
  EXPECT_TRUE(written);
}

}  // namespace
}  // namespace tpserve::serve
