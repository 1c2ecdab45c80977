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
  std::string name;               // kNamed: the function
  nlohmann::ordered_json schema;  // kRequired, kNamed: the JSON schema the answer follows
  std::string schema_field;       // where the schema comes from, for errors ("tools[2].function.parameters")
  bool forced() const { return kind == Kind::kRequired || kind == Kind::kNamed; }
};

// tool_choice of the request body `f`, checked against its tools (validated before: each has
// function.name). ApiError naming the field: an unknown value, a forced choice without tools, a name no tool
// has.
ToolChoice parse_tool_choice(const JsonFields& f);

}  // namespace tpserve::serve
