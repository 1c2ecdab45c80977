#include "runtime/serve/chat_output_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "runtime/serve/json_fields.h"

namespace tpserve::serve {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

// Length of the longest suffix of `text` that is a proper prefix of `tag` (text that may still become the
// tag). Tags are ASCII, so the text before such a suffix ends at a character boundary.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(tag.size() - 1, text.size()); len > 0; --len)
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The JSON in a model's text, or a discarded value where it is none or is nested too deep for the dump below
// (which recurses once a level). ordered_json: the arguments keep the model's key order when written back.
nlohmann::ordered_json parse_model_json(std::string_view text) {
  if (json_nesting_depth(text) > kMaxJsonDepth)
    return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// A value as OpenAI's function.arguments carries it: compact JSON text.
std::string arguments_text(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

ChatOutputParser::ChatOutputParser(ChatOutputOptions options)
    : options_(options), state_(options.reasoning ? State::kStart : State::kContent) {}

void ChatOutputParser::release(std::string& part, size_t n) {
  part.append(buffer_, 0, n);
  buffer_.erase(0, n);
}

bool ChatOutputParser::release_until(std::string& part, std::string_view tag, State next) {
  const size_t at = buffer_.find(tag);
  if (at == std::string::npos) {
    release(part, buffer_.size() - partial_tag_suffix(buffer_, tag));
    return false;
  }
  release(part, at);
  buffer_.erase(0, tag.size());
  state_ = next;
  return true;
}

bool ChatOutputParser::parse_tool_call(std::string_view body, AnswerParts& out) {
  const nlohmann::ordered_json call = parse_model_json(body);
  if (!call.is_object()) return false;
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return false;
  std::string arguments = "{}";
  if (const auto args = call.find("arguments"); args != call.end()) {
    if (args->is_string())  // already JSON text, as OpenAI's field carries it
      arguments = args->get<std::string>();
    else if (!args->is_null())
      arguments = arguments_text(*args);
  }
  out.tool_calls.push_back({next_call_index_++, new_tool_call_id(), name->get<std::string>(), arguments});
  return true;
}

bool ChatOutputParser::parse_forced_calls(std::string_view text, AnswerParts& out) {
  using Forced = ChatOutputOptions::Forced;
  const nlohmann::ordered_json doc = parse_model_json(text);
  if (options_.forced == Forced::kNamed) {
    if (!doc.is_object()) return false;
    out.tool_calls.push_back(
        {next_call_index_++, new_tool_call_id(), options_.forced_name, arguments_text(doc)});
    return true;
  }
  if (!doc.is_array() || doc.empty()) return false;
  for (const auto& call : doc)
    if (!call.is_object() || !call.contains("name") || !call["name"].is_string() ||
        !call.contains("parameters"))
      return false;
  for (const auto& call : doc)
    out.tool_calls.push_back({next_call_index_++, new_tool_call_id(), call["name"].get<std::string>(),
                              arguments_text(call["parameters"])});
  return true;
}

bool ChatOutputParser::step(AnswerParts& out) {
  const std::string_view text = buffer_;
  switch (state_) {
    case State::kStart:
      if (text.size() < kThinkOpen.size() && kThinkOpen.starts_with(text)) return false;  // may become one
      if (text.starts_with(kThinkOpen)) {
        buffer_.erase(0, kThinkOpen.size());
        state_ = State::kReasoning;
      } else {
        state_ = State::kContent;
      }
      return true;
    case State::kReasoning:
      return release_until(out.reasoning, kThinkClose, State::kAfterReasoning);
    case State::kAfterReasoning:
    case State::kAfterToolCall: {
      const bool after_reasoning = state_ == State::kAfterReasoning;
      const size_t keep = std::find_if(text.begin(), text.end(),
                                       [&](char c) { return after_reasoning ? c != '\n' : !is_space(c); }) -
                          text.begin();
      buffer_.erase(0, keep);
      if (buffer_.empty()) return false;
      state_ = State::kContent;
      return true;
    }
    case State::kContent: {
      if (options_.forced != ChatOutputOptions::Forced::kNone) return false;  // held whole until the end
      if (!options_.tool_calls) {
        release(out.content, text.size());
        return false;
      }
      return release_until(out.content, kCallOpen, State::kToolCall);
    }
    case State::kToolCall: {
      const size_t at = text.find(kCallClose, scanned_);
      if (at == std::string_view::npos) {  // the whole call is held until it closes
        scanned_ = text.size() - partial_tag_suffix(text, kCallClose);  // a long call is scanned once
        return false;
      }
      scanned_ = 0;
      if (parse_tool_call(text.substr(0, at), out)) {
        buffer_.erase(0, at + kCallClose.size());
        state_ = State::kAfterToolCall;
      } else {  // not a tool call after all: its text, tags included, is content
        out.content += kCallOpen;
        release(out.content, at + kCallClose.size());
        state_ = State::kContent;
      }
      return true;
    }
  }
  return false;
}

AnswerParts ChatOutputParser::push(std::string_view text) {
  AnswerParts out;
  buffer_ += text;
  while (!buffer_.empty() && step(out)) {
  }
  return out;
}

AnswerParts ChatOutputParser::finish() {
  AnswerParts out;
  switch (state_) {
    case State::kStart:
    case State::kContent:
      if (options_.forced != ChatOutputOptions::Forced::kNone && parse_forced_calls(buffer_, out))
        buffer_.clear();
      else
        release(out.content, buffer_.size());
      break;
    case State::kReasoning:  // cut off while reasoning: what there is of it
      release(out.reasoning, buffer_.size());
      break;
    case State::kToolCall:  // a call that never closed
      out.content += kCallOpen;
      release(out.content, buffer_.size());
      break;
    case State::kAfterReasoning:
    case State::kAfterToolCall:
      buffer_.clear();  // whitespace only
      break;
  }
  state_ = State::kContent;
  scanned_ = 0;
  return out;
}

}  // namespace tpserve::serve
