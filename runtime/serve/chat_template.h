// ChatTemplate: renders a conversation into the prompt text Qwen3 was trained on (ChatML), reproducing the
// Jinja chat_template of Qwen3's tokenizer_config.json exactly: optional tools block in the system turn,
// `<|im_start|>{role}\n{content}<|im_end|>\n` per message, tool results folded into user turns, reasoning
// (<think>) kept only for assistant turns after the last user query, and the generation prompt
// `<|im_start|>assistant\n` (+ an empty think block when enable_thinking is false).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tpserve::serve {

struct ChatToolCall {
  std::string name;
  std::string arguments;  // inserted as is: the JSON text of the arguments (or the string the client sent)
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
  std::optional<std::string> reasoning_content;  // assistant only
  std::vector<ChatToolCall> tool_calls;          // assistant only
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking; unset = thinking on
  std::vector<std::string> tools;       // each tool already as template_json()
};

// Renders the messages (at least one) into prompt text.
std::string render_chat_prompt(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options);

// The template's `tojson` filter: JSON with ", " and ": " separators, keys in the order given, non-ASCII
// kept as is (Python's json.dumps(ensure_ascii=False) and @huggingface/jinja agree on this).
std::string template_json(const nlohmann::ordered_json& value);

}  // namespace tpserve::serve
