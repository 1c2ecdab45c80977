// Chat answers parsed for Qwen3's reasoning and Hermes tool calls (runtime/serve/chat_output_parser.h): the
// parts of whole answers, held-back text that turns out not to be a tag, nothing lost on malformed or cut-off
// calls, any split of the text streaming to the same parts, and the JSON shapes of messages and deltas.
#include <gtest/gtest.h>

#include <random>

#include "runtime/serve/api_error.h"
#include "runtime/serve/chat_output_parser.h"
#include "runtime/serve/openai_request.h"
#include "runtime/serve/structured_grammars.h"
#include "runtime/serve/utf8.h"
#include "tests/serve/qwen3_tokenizer.h"

namespace tpserve::serve {
namespace {

constexpr ChatOutputOptions kBoth{true, true};

AnswerParts parse_whole(const std::string& text, ChatOutputOptions options = kBoth) {
  ChatOutputParser parser(options);
  AnswerParts out = parser.push(text);
  out.append(parser.finish());
  return out;
}

// The text cut at random character boundaries, pushed piece by piece; the deltas summed.
AnswerParts parse_split(const std::string& text, std::mt19937& rng, ChatOutputOptions options = kBoth) {
  ChatOutputParser parser(options);
  AnswerParts out;
  size_t at = 0;
  while (at < text.size()) {
    size_t n = std::uniform_int_distribution<size_t>(1, 6)(rng);
    n = std::min(n, text.size() - at);
    while (at + n < text.size() && (static_cast<unsigned char>(text[at + n]) & 0xC0) == 0x80) ++n;
    AnswerParts piece = parser.push(text.substr(at, n));
    EXPECT_TRUE(is_valid_utf8(piece.content) && is_valid_utf8(piece.reasoning));
    out.append(std::move(piece));
    at += n;
  }
  out.append(parser.finish());
  return out;
}

void expect_same(const AnswerParts& a, const AnswerParts& b) {
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.reasoning, b.reasoning);
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size());
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].index, b.tool_calls[i].index);
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name);
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments);
  }
}

TEST(ChatOutput, WithoutOptionsTheTextIsTheContent) {
  const std::string text = "<think>x</think><tool_call>{\"name\": \"f\"}</tool_call>";
  const AnswerParts out = parse_whole(text, {});
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.reasoning.empty());
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(ChatOutput, ReasoningSplitFromTheAnswer) {
  const AnswerParts out = parse_whole("<think>\nThe user greets me.\n</think>\n\nHello! How can I help?");
  EXPECT_EQ(out.reasoning, "\nThe user greets me.\n");
  EXPECT_EQ(out.content, "Hello! How can I help?");  // the newlines after </think> dropped
  // An empty block (enable_thinking off writes one into the prompt; a model may emit one itself).
  const AnswerParts empty = parse_whole("<think>\n\n</think>\n\nHi");
  EXPECT_EQ(empty.reasoning, "\n\n");
  EXPECT_EQ(empty.content, "Hi");
}

TEST(ChatOutput, OnlyALeadingThinkBlockIsReasoning) {
  EXPECT_EQ(parse_whole("Sure. <think>not reasoning</think>").content, "Sure. <think>not reasoning</think>");
  EXPECT_EQ(parse_whole(" <think>a</think>b").content, " <think>a</think>b");
  // Held while it could still become "<think>", released as content when it does not.
  ChatOutputParser parser(kBoth);
  EXPECT_TRUE(parser.push("<thi").empty());
  EXPECT_EQ(parser.push("s is content").content, "<this is content");
  ChatOutputParser cut(kBoth);
  EXPECT_TRUE(cut.push("<th").empty());
  EXPECT_EQ(cut.finish().content, "<th");
}

TEST(ChatOutput, AnAnswerCutOffWhileReasoningKeepsItsReasoning) {
  ChatOutputParser parser(kBoth);
  AnswerParts out = parser.push("<think>step one, step two </th");
  EXPECT_EQ(out.reasoning, "step one, step two ");  // "</th" held: it may close the block
  out.append(parser.finish());
  EXPECT_EQ(out.reasoning, "step one, step two </th");
  EXPECT_TRUE(out.content.empty());
}

TEST(ChatOutput, ToolCallsParsedOutOfTheContent) {
  const AnswerParts out = parse_whole(
      "<think>I need the weather.</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"get_time\", "
      "\"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(out.reasoning, "I need the weather.");
  EXPECT_EQ(out.content, "Let me check.\n");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].index, 0);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(out.tool_calls[1].index, 1);
  EXPECT_EQ(out.tool_calls[1].name, "get_time");
  EXPECT_EQ(out.tool_calls[1].arguments, "{}");
  EXPECT_EQ(out.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(out.tool_calls[0].id.size(), 29u);
  EXPECT_NE(out.tool_calls[0].id, out.tool_calls[1].id);
}

TEST(ChatOutput, ArgumentsKeepTheModelsKeyOrder) {
  const AnswerParts out = parse_whole(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"zeta\": 1, \"alpha\": [true, null], \"mid\": "
      "{\"b\": 2, \"a\": 0.5}}}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"zeta":1,"alpha":[true,null],"mid":{"b":2,"a":0.5}})");
}

TEST(ChatOutput, ArgumentsAsAStringOrMissing) {
  const AnswerParts out = parse_whole(
      "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>"
      "<tool_call>{\"name\": \"b\"}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"x": 1})");  // already JSON text: as written
  EXPECT_EQ(out.tool_calls[1].arguments, "{}");
}

TEST(ChatOutput, WhatIsNotAToolCallStaysContent) {
  const std::string bad_json = "<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call>";
  EXPECT_EQ(parse_whole("A " + bad_json + " B").content, "A " + bad_json + " B");
  EXPECT_EQ(parse_whole("<tool_call>{\"arguments\": {}}</tool_call>").content,
            "<tool_call>{\"arguments\": {}}</tool_call>");  // no name
  EXPECT_EQ(parse_whole("<tool_call>[1, 2]</tool_call>").tool_calls.size(), 0u);
  // A call the answer never closes (cut off by max_tokens) comes back as it was written.
  const AnswerParts cut = parse_whole("Calling <tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_EQ(cut.content, "Calling <tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.tool_calls.empty());
  // Text after a call is content; the whitespace right after it is dropped.
  const AnswerParts after = parse_whole("<tool_call>{\"name\": \"f\"}</tool_call>\n Done.");
  EXPECT_EQ(after.content, "Done.");
  EXPECT_EQ(after.tool_calls.size(), 1u);
}

TEST(ChatOutput, ToolCallTagsInsideReasoningAreReasoning) {
  const AnswerParts out = parse_whole("<think>maybe <tool_call>{\"name\": \"f\"}</tool_call></think>No.");
  EXPECT_EQ(out.reasoning, "maybe <tool_call>{\"name\": \"f\"}</tool_call>");
  EXPECT_EQ(out.content, "No.");
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(ChatOutput, ToolCallsOffLeavesTheirTextInTheContent) {
  const std::string call = "<tool_call>{\"name\": \"f\"}</tool_call>";
  const AnswerParts out = parse_whole("<think>r</think>" + call, {true, false});
  EXPECT_EQ(out.reasoning, "r");
  EXPECT_EQ(out.content, call);
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(ChatOutput, AnySplitStreamsToTheWholeAnswersParts) {
  const std::vector<std::string> texts = {
      "<think>\nPlan: call f, then g.\n</think>\n\nCalling.\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
      "{\"q\": \"caf\xc3\xa9 \xe2\x82\xac\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\"}\n</tool_call>",
      "<think>unfinished </thin",
      "plain answer with < and <tool and </think> in it",
      "<tool_call>{\"name\": \"broken\", </tool_call> then <tool_call>{\"name\": \"ok\"}</tool_call> end",
      "\xe6\x97\xa5\xe6\x9c\xac<think>x</think>",
      "<think></think><tool_call>{\"name\": \"x\", \"arguments\": {\"a\": [1, 2]}}</tool_call>",
      "<tool_call>{\"name\": \"never closed\""};
  std::mt19937 rng(20261205);
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const AnswerParts whole = parse_whole(text);
    for (int trial = 0; trial < 200; ++trial) expect_same(parse_split(text, rng), whole);
    ChatOutputParser one_char(kBoth);  // a character at a time
    AnswerParts sum;
    for (size_t i = 0; i < text.size();) {
      size_t n = 1;
      while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
      sum.append(one_char.push(text.substr(i, n)));
      i += n;
    }
    sum.append(one_char.finish());
    expect_same(sum, whole);
  }
}

ResponseHeader chat_header() {
  return make_response_header(Endpoint::kChatCompletions, "m", false);
}

TEST(ChatOutput, MessageShapes) {
  AnswerParts answer;
  answer.reasoning = "think";
  answer.tool_calls.push_back({0, "call_1", "f", R"({"a":1})"});
  const auto whole = full_response(chat_header(), {{answer, {}, "tool_calls"}}, {3, 4});
  const auto& message = whole["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_TRUE(message["content"].is_null());  // no text beside the tool calls
  EXPECT_EQ(message["reasoning_content"], "think");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
  EXPECT_FALSE(message["tool_calls"][0].contains("index"));
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");

  AnswerParts text_only;
  text_only.content = "hi";
  const auto plain = full_response(chat_header(), {{text_only, {}, "stop"}}, {1, 1});
  EXPECT_EQ(plain["choices"][0]["message"]["content"], "hi");
  EXPECT_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(full_response(chat_header(), {{{}, {}, "length"}}, {1, 1})["choices"][0]["message"]["content"],
            "");
}

TEST(ChatOutput, DeltaShapes) {
  AnswerParts reasoning;
  reasoning.reasoning = "r";
  const auto first = stream_chunk(chat_header(), 0, reasoning, {}, true, std::nullopt);
  const auto& delta = first["choices"][0]["delta"];
  EXPECT_EQ(delta["role"], "assistant");
  EXPECT_EQ(delta["content"], "");  // the first delta always has content
  EXPECT_EQ(delta["reasoning_content"], "r");

  AnswerParts call;
  call.tool_calls.push_back({2, "call_x", "g", "{}"});
  const auto later = stream_chunk(chat_header(), 0, call, {}, false, std::nullopt);
  const auto& d = later["choices"][0]["delta"];
  EXPECT_FALSE(d.contains("content"));
  EXPECT_FALSE(d.contains("role"));
  ASSERT_EQ(d["tool_calls"].size(), 1u);
  EXPECT_EQ(d["tool_calls"][0]["index"], 2);
  EXPECT_EQ(d["tool_calls"][0]["id"], "call_x");
  EXPECT_EQ(d["tool_calls"][0]["function"]["arguments"], "{}");

  AnswerParts text;
  text.content = "t";
  const auto completion = stream_chunk(make_response_header(Endpoint::kCompletions, "m", false), 0, text, {},
                                       false, std::nullopt);
  EXPECT_EQ(completion["choices"][0]["text"], "t");
}

// tool_choice "required" / named: the answer after the reasoning is the calls' JSON, held whole; what does
// not parse as that (cut off, or not the expected shape) is content; any split streams to the same parts.
TEST(ChatOutput, ForcedToolCallsFromTheAnswersJson) {
  ChatOutputOptions named{
      .reasoning = true, .forced = ChatOutputOptions::Forced::kNamed, .forced_name = "get"};
  const AnswerParts one =
      parse_whole("<think>where?</think>\n\n{\"city\": \"Oslo\", \"days\": [1, 2]}", named);
  EXPECT_EQ(one.reasoning, "where?");
  EXPECT_EQ(one.content, "");
  ASSERT_EQ(one.tool_calls.size(), 1u);
  EXPECT_EQ(one.tool_calls[0].name, "get");
  EXPECT_EQ(one.tool_calls[0].arguments, R"({"city":"Oslo","days":[1,2]})");
  EXPECT_EQ(one.tool_calls[0].index, 0);
  const ChatOutputOptions list{.forced = ChatOutputOptions::Forced::kList};
  const AnswerParts two = parse_whole(
      R"([{"name": "a", "parameters": {"z": 1, "y": 2}}, {"name": "b", "parameters": {}}])", list);
  ASSERT_EQ(two.tool_calls.size(), 2u);
  EXPECT_EQ(two.tool_calls[0].name, "a");
  EXPECT_EQ(two.tool_calls[0].arguments, R"({"z":1,"y":2})");  // the model's key order
  EXPECT_EQ(two.tool_calls[1].name, "b");
  EXPECT_EQ(two.tool_calls[1].index, 1);
  EXPECT_NE(two.tool_calls[0].id, two.tool_calls[1].id);
  // Not calls: the text is the content, whole.
  for (const std::string text : {R"({"city": "Os)", R"([])", R"([{"name": "a"}])", R"("just text")"}) {
    const AnswerParts p = parse_whole(text, list);
    EXPECT_TRUE(p.tool_calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
  EXPECT_EQ(parse_whole(R"([{"name": "a", "parameters": {}}])", named).content,
            R"([{"name": "a", "parameters": {}}])");
  std::mt19937 rng(5);
  const std::string answer = "<think>x</think>\n[{\"name\": \"a\", \"parameters\": {\"q\": \"é\"}}]";
  const ChatOutputOptions list_reasoning{.reasoning = true, .forced = ChatOutputOptions::Forced::kList};
  for (int i = 0; i < 20; ++i)
    expect_same(parse_split(answer, rng, list_reasoning), parse_whole(answer, list_reasoning));
}

TEST(ChatOutput, RequestsParseToolCallsOnlyWhereTheyOfferTools) {
  QWEN3_TOKENIZER_OR_SKIP(tokenizer);
  RequestLimits limits;
  limits.tokenizer = tokenizer;
  limits.vocab_size = 151936;
  limits.max_context_tokens = 4096;
  limits.parse_reasoning = true;
  limits.parse_tool_calls = true;
  const std::string messages = R"("messages": [{"role": "user", "content": "Weather in Oslo?"}])";
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather"}}])";
  auto options = [&](const std::string& fields, const RequestLimits& l) {
    return parse_chat_request("{" + messages + fields + "}", l).chat_output;
  };
  EXPECT_TRUE(options("", limits).reasoning);
  EXPECT_FALSE(options("", limits).tool_calls);
  EXPECT_TRUE(options(", " + tools, limits).tool_calls);
  EXPECT_TRUE(options(", " + tools + R"(, "tool_choice": "auto")", limits).tool_calls);
  EXPECT_FALSE(options(", " + tools + R"(, "tool_choice": "none")", limits).tool_calls);
  EXPECT_FALSE(options(R"(, "tools": [])", limits).tool_calls);
  // Forced calls: the answer is held to the tools' schema, and parsed as JSON rather than for tags.
  limits.grammars = std::make_shared<StructuredGrammars>(*tokenizer);
  auto request = [&](const std::string& fields) {
    return parse_chat_request("{" + messages + ", " + tools + fields + "}", limits);
  };
  const ParsedRequest required = request(R"(, "tool_choice": "required")");
  EXPECT_EQ(required.chat_output.forced, ChatOutputOptions::Forced::kList);
  EXPECT_FALSE(required.chat_output.tool_calls);
  EXPECT_NE(required.job.structured, nullptr);
  EXPECT_EQ(required.job.structured_begin_after, tokenizer->token_id("</think>"));  // after the reasoning
  const ParsedRequest named =
      request(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(named.chat_output.forced, ChatOutputOptions::Forced::kNamed);
  EXPECT_EQ(named.chat_output.forced_name, "get_weather");
  EXPECT_NE(named.job.structured, nullptr);
  auto refused = [&](const std::string& fields, const std::string& param) {
    try {
      request(fields);
      ADD_FAILURE() << fields;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), param) << e.what();
    }
  };
  refused(R"(, "tool_choice": "required", "response_format": {"type": "json_object"})", "tool_choice");
  refused(R"(, "tool_choice": {"function": {"name": "get_time"}})", "tool_choice.function.name");
  RequestLimits no_grammars = limits;
  no_grammars.grammars = nullptr;
  EXPECT_THROW(
      parse_chat_request("{" + messages + ", " + tools + R"(, "tool_choice": "required"})", no_grammars),
      ApiError);
  RequestLimits off = limits;
  off.parse_reasoning = false;
  off.parse_tool_calls = false;
  EXPECT_FALSE(options(", " + tools, off).tool_calls);
  EXPECT_FALSE(options(", " + tools, off).reasoning);
}

}  // namespace
}  // namespace tpserve::serve
