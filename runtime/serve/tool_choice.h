// tool_choice (chat requests): "auto" (the default) and "none" leave the answer free, and with "auto" the
// Hermes <tool_call> blocks the model writes are parsed out of it (runtime/serve/chat_output_parser.h).
// "required" and a named function ({"type": "function", "function": {"name": ...}}) force tool calls as vLLM
// does: the answer after the reasoning is held to JSON by structured output, and becomes tool_calls when
// it ends. Named: the function's arguments, an object of its `parameters` schema. Required: a non-empty list
// of {"name": <one of the tools>, "parameters": <that tool's arguments>}.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/serve/json_fields.h"

namespace tpserve::serve {

struct ToolChoice {
  enum class Kind { kAuto, kNone, kRequired, kNamed } kind = Kind::kAuto;
  std::string name;            // kNamed: the function
  size_t tool = 0;             // kNamed: its index in tools
  bool tools_offered = false;  // the request has a non-empty list of tools
  bool forced() const { return kind == Kind::kRequired || kind == Kind::kNamed; }
  // Whether the model may write tool calls of its own accord ("auto" with tools offered): the Hermes blocks
  // are then parsed out of its answer.
  bool free_tool_calls() const { return tools_offered && kind == Kind::kAuto; }
};

// The JSON schema a forced choice's answer follows, and where it comes from, for errors
// ("tools[2].function.parameters").
struct ForcedToolSchema {
  nlohmann::ordered_json schema;
  std::string field;
};

// tool_choice of the request body `f`, checked against its tools (validated before: each has
// function.name). ApiError naming the field: an unknown value, a forced choice without tools, a name no tool
// has.
ToolChoice parse_tool_choice(const JsonFields& f);
// The schema of a forced choice (ToolChoice::forced()) parsed from the same body.
ForcedToolSchema forced_tool_schema(const ToolChoice& choice, const JsonFields& f);

}  // namespace tpserve::serve
