#include "runtime/serve/tool_choice.h"

#include <vector>

#include "runtime/serve/api_error.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

// A tool's arguments schema: its function's `parameters`, or any object where it has none.
Json parameters_of(const Json& tool) {
  const Json& function = tool.at("function");
  const auto it = function.find("parameters");
  if (it == function.end() || it->is_null()) return Json{{"type", "object"}};
  return *it;
}

}  // namespace

ToolChoice parse_tool_choice(const JsonFields& f) {
  ToolChoice out;
  const Json* tools = f.get("tools");
  const size_t num_tools = tools != nullptr && tools->is_array() ? tools->size() : 0;
  out.tools_offered = num_tools > 0;
  const Json* choice = f.get("tool_choice");
  if (choice == nullptr) return out;
  if (choice->is_string()) {
    const std::string& value = choice->get_ref<const std::string&>();
    if (value == "auto") return out;
    if (value == "none") {
      out.kind = ToolChoice::Kind::kNone;
      return out;
    }
    if (value != "required")
      bad_request("tool_choice",
                  "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": "
                  "{\"name\": ...}}, got \"" +
                      value + "\"",
                  "invalid_value");
    if (num_tools == 0) bad_request("tool_choice", "\"required\" needs a non-empty list of tools");
    out.kind = ToolChoice::Kind::kRequired;
    return out;
  }
  const JsonFields named(*choice, "tool_choice");
  if (named.string("type").value_or("function") != "function")
    bad_request(named.path("type"), "only \"function\" is supported", "unsupported_parameter");
  const Json* function = named.get("function");
  if (function == nullptr) bad_request(named.path("function"), "is required", "missing_required_parameter");
  const JsonFields fn(*function, named.path("function"));
  const std::optional<std::string> name = fn.string("name");
  if (!name) bad_request(fn.path("name"), "is required", "missing_required_parameter");
  for (size_t i = 0; i < num_tools; ++i) {
    const Json& tool = (*tools)[i];
    if (tool.at("function").at("name") != *name) continue;
    out.kind = ToolChoice::Kind::kNamed;
    out.name = *name;
    out.tool = i;
    return out;
  }
  bad_request(fn.path("name"), "no tool of the request is named \"" + *name + "\"", "invalid_value");
}

ForcedToolSchema forced_tool_schema(const ToolChoice& choice, const JsonFields& f) {
  const Json& tools = *f.get("tools");  // a forced choice has some (parse_tool_choice)
  if (choice.kind == ToolChoice::Kind::kNamed)
    return {parameters_of(tools[choice.tool]),
            "tools[" + std::to_string(choice.tool) + "].function.parameters"};
  // A list of calls, each one tool's name and its arguments.
  Json calls = Json::array();
  for (const Json& tool : tools)
    calls.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"const", tool.at("function").at("name")}}}, {"parameters", parameters_of(tool)}}},
         {"required", {"name", "parameters"}}});
  return {{{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", calls}}}}, "tools"};
}

}  // namespace tpserve::serve
