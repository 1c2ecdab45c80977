// ChatOutputParser: splits a chat answer's text, as it streams in, into the parts OpenAI-style clients read
// apart: Qwen3's reasoning (`<think> ... </think>` at the start of the answer) becomes reasoning_content, and
// tool calls in the Hermes format that Qwen3's chat template asks for (`<tool_call>{"name": ..., "arguments":
// ...}</tool_call>`) become tool_calls. Text that could still be the start of a tag is held back until it is
// decided. Nothing is lost: text that turns out not to be a tag comes out as content, and so does a tool call
// that does not parse or never closes (whole, tags included); an answer cut off inside its reasoning keeps
// that reasoning as reasoning_content. With tool_choice "required" or a named function the answer after the
// reasoning is the calls' JSON instead (ChatOutputOptions::forced).
#pragma once

#include <string>
#include <string_view>

#include "runtime/serve/openai_response.h"

namespace tpserve::serve {

// What a chat request's answer is parsed for (server.reasoning_parser, server.tool_call_parser and the
// request's tools and tool_choice).
struct ChatOutputOptions {
  bool reasoning = false;   // a leading <think> ... </think> block -> reasoning_content
  bool tool_calls = false;  // <tool_call> blocks -> tool_calls
  // tool_choice "required" (kList) or a named function (kNamed; runtime/serve/tool_choice.h): the answer
  // after the reasoning is JSON, held whole and turned into tool_calls when it ends. Text that does not parse
  // as such (an answer cut off by max_tokens) comes out as content.
  enum class Forced { kNone, kList, kNamed } forced = Forced::kNone;
  std::string forced_name;  // kNamed: the function
  bool any() const { return reasoning || tool_calls || forced != Forced::kNone; }
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputOptions options);

  // Adds answer text (valid UTF-8); returns the parts now decided. Every piece of text comes out once, in
  // order within its part, so the deltas of any split of the text sum to the parts of the whole text.
  AnswerParts push(std::string_view text);
  // The answer ended: returns what was held back.
  AnswerParts finish();
  // Tool calls returned so far.
  int tool_calls() const { return next_call_index_; }

 private:
  enum class State {
    kStart,           // reasoning on, nothing decided yet: held while it may still become "<think>"
    kReasoning,       // inside <think>: text is reasoning until "</think>"
    kAfterReasoning,  // newlines right after "</think>" are dropped
    kContent,         // answer text; with tool calls on, until "<tool_call>"
    kToolCall,        // inside <tool_call>: held until "</tool_call>"
    kAfterToolCall,   // whitespace right after a tool call is dropped
  };
  // Moves the text of buffer_ that is decided into out; false once nothing more can be decided.
  bool step(AnswerParts& out);
  // buffer_[0, n) appended to `part`, and erased from buffer_.
  void release(std::string& part, size_t n);
  // buffer_ up to `tag` appended to `part`, the tag consumed and the state set to `next`: true. No tag yet:
  // all but what may still become it appended: false.
  bool release_until(std::string& part, std::string_view tag, State next);
  // The tool call in `body` (the text between the tags), or false where it does not parse as one.
  bool parse_tool_call(std::string_view body, AnswerParts& out);
  // The forced tool calls (ChatOutputOptions::forced) of the answer's JSON, or false where it is not that.
  bool parse_forced_calls(std::string_view text, AnswerParts& out);

  ChatOutputOptions options_;
  State state_;
  std::string buffer_;  // text not yet decided
  size_t scanned_ = 0;  // kToolCall: buffer_[0, scanned_) holds no "</tool_call>"
  int next_call_index_ = 0;
};

}  // namespace tpserve::serve
