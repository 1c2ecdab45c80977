// The chat fields of a request body (messages, tools, tool_choice, response_format, chat_template_kwargs,
// add_generation_prompt, ...) validated and rendered by Qwen3's chat template into prompt text. Shared by
// POST /v1/chat/completions and POST /tokenize; every problem is an ApiError naming the field.
#pragma once

#include <string>

#include "runtime/serve/json_fields.h"
#include "runtime/serve/tool_choice.h"

namespace tpserve::serve {

struct ChatPrompt {
  std::string text;        // the conversation rendered by the template
  ToolChoice tool_choice;  // checked against the request's tools
};

// The conversation in `f` (the request body).
ChatPrompt parse_chat_prompt(const JsonFields& f);
// Whether the answer starts with its reasoning: chat_template_kwargs.enable_thinking is not false (Qwen3's
// template then leaves the <think> block to the model).
bool chat_thinks(const JsonFields& f);

}  // namespace tpserve::serve
