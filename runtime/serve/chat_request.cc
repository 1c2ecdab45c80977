#include "runtime/serve/chat_request.h"

#include <vector>

#include "runtime/serve/api_error.h"
#include "runtime/serve/chat_template.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

std::string message_content(const Json* content, const std::string& path) {
  if (content == nullptr) return {};
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array())
    bad_request(path, "expected a string or a list of content parts, got " + describe_json(*content),
                "invalid_type");
  std::string text;  // text parts joined by newlines, as vLLM does
  for (size_t i = 0; i < content->size(); ++i) {
    JsonFields part((*content)[i], path + "[" + std::to_string(i) + "]");
    const auto type = part.string("type");
    if (!type) bad_request(part.path("type"), "is required", "missing_required_parameter");
    if (*type != "text")
      bad_request(part.path("type"), "'" + *type + "' is not supported (text parts only)",
                  "unsupported_parameter");
    const auto t = part.string("text");
    if (!t) bad_request(part.path("text"), "is required", "missing_required_parameter");
    text += (i ? "\n" : "") + *t;
  }
  return text;
}

std::vector<ChatToolCall> tool_calls(const Json& calls, const std::string& path) {
  if (!calls.is_array()) bad_request(path, "expected a list, got " + describe_json(calls), "invalid_type");
  std::vector<ChatToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    JsonFields call(calls[i], path + "[" + std::to_string(i) + "]");
    const Json* function = call.get("function");
    if (function == nullptr) bad_request(call.path("function"), "is required", "missing_required_parameter");
    JsonFields f(*function, call.path("function"));
    const auto name = f.string("name");
    if (!name) bad_request(f.path("name"), "is required", "missing_required_parameter");
    const Json* args = f.get("arguments");
    if (args != nullptr && !args->is_string() && !args->is_object())
      bad_request(f.path("arguments"), "expected a JSON string or an object, got " + describe_json(*args),
                  "invalid_type");
    out.push_back({*name, args == nullptr     ? "{}"
                          : args->is_string() ? args->get<std::string>()
                                              : template_json(*args)});
  }
  return out;
}

std::vector<ChatMessage> parse_messages(const JsonFields& f) {
  const Json* messages = f.get("messages");
  if (messages == nullptr) bad_request("messages", "is required", "missing_required_parameter");
  if (!messages->is_array())
    bad_request("messages", "expected a list of messages, got " + describe_json(*messages), "invalid_type");
  if (messages->empty()) bad_request("messages", "must contain at least one message");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    JsonFields m((*messages)[i], "messages[" + std::to_string(i) + "]");
    ChatMessage msg;
    const auto role = m.string("role");
    if (!role) bad_request(m.path("role"), "is required", "missing_required_parameter");
    msg.role = *role == "developer" ? "system" : *role;
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      bad_request(m.path("role"), "'" + *role + "' is not one of system, developer, user, assistant, tool");
    if (msg.role != "assistant" && m.get("content") == nullptr)
      bad_request(m.path("content"), "is required for a " + *role + " message", "missing_required_parameter");
    msg.content = message_content(m.get("content"), m.path("content"));
    if (msg.role == "assistant") {
      msg.reasoning_content = m.string("reasoning_content");
      if (const Json* calls = m.get("tool_calls")) msg.tool_calls = tool_calls(*calls, m.path("tool_calls"));
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// chat_template_kwargs.enable_thinking, when given.
std::optional<bool> enable_thinking(const JsonFields& f) {
  const Json* kwargs = f.get("chat_template_kwargs");
  return kwargs ? JsonFields(*kwargs, "chat_template_kwargs").boolean("enable_thinking") : std::nullopt;
}

ChatTemplateOptions parse_template_options(const JsonFields& f, ToolChoice& tool_choice) {
  ChatTemplateOptions options;
  options.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  f.boolean("continue_final_message");
  f.refuse_unless_neutral("continue_final_message", false, "continuing the final message is not implemented");
  f.string("chat_template");
  f.refuse_unless_neutral("chat_template", nullptr, "the model's own chat template is used");
  options.enable_thinking = enable_thinking(f);
  if (const Json* tools = f.get("tools")) {
    if (!tools->is_array())
      bad_request("tools", "expected a list of tools, got " + describe_json(*tools), "invalid_type");
    for (size_t i = 0; i < tools->size(); ++i) {
      JsonFields tool((*tools)[i], "tools[" + std::to_string(i) + "]");
      if (tool.string("type").value_or("function") != "function")
        bad_request(tool.path("type"), "only 'function' tools are supported", "unsupported_parameter");
      const Json* function = tool.get("function");
      if (function == nullptr)
        bad_request(tool.path("function"), "is required", "missing_required_parameter");
      if (!JsonFields(*function, tool.path("function")).string("name"))
        bad_request(tool.path("function") + ".name", "is required", "missing_required_parameter");
      options.tools.push_back(template_json((*tools)[i]));
    }
  }
  tool_choice = parse_tool_choice(f);  // after the tools it is checked against
  f.boolean("parallel_tool_calls");    // accepted and ignored: every tool call the answer makes is returned
  return options;
}

}  // namespace

ChatPrompt parse_chat_prompt(const JsonFields& f) {
  const std::vector<ChatMessage> messages = parse_messages(f);
  ChatPrompt out;
  const ChatTemplateOptions options = parse_template_options(f, out.tool_choice);
  out.text = render_chat_prompt(messages, options);
  return out;
}

bool chat_thinks(const JsonFields& f) {
  return enable_thinking(f).value_or(true);
}

}  // namespace tpserve::serve
