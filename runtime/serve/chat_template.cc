#include "runtime/serve/chat_template.h"

#include <string_view>

namespace tpserve::serve {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return std::string(s);
}
std::string rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return std::string(s);
}
std::string strip_newlines(std::string_view s) {
  return rstrip_newlines(lstrip_newlines(s));
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string before_first(const std::string& s, const std::string& sep) {
  const size_t at = s.find(sep);
  return at == std::string::npos ? s : s.substr(0, at);
}
std::string after_last(const std::string& s, const std::string& sep) {
  const size_t at = s.rfind(sep);
  return at == std::string::npos ? s : s.substr(at + sep.size());
}

bool is_tool_response(const std::string& content) {
  return starts_with(content, "<tool_response>") && ends_with(content, "</tool_response>");
}

void append_assistant(std::string& out, const ChatMessage& m, bool after_last_query, bool last) {
  std::string content = m.content;
  std::string reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (content.find("</think>") != std::string::npos) {
    reasoning = lstrip_newlines(after_last(rstrip_newlines(before_first(m.content, "</think>")), "<think>"));
    content = lstrip_newlines(after_last(m.content, "</think>"));
  }
  if (after_last_query && (last || !reasoning.empty()))
    out += "<|im_start|>assistant\n<think>\n" + strip_newlines(reasoning) + "\n</think>\n\n" +
           lstrip_newlines(content);
  else
    out += "<|im_start|>assistant\n" + content;
  for (size_t j = 0; j < m.tool_calls.size(); ++j) {
    if (j > 0 || !content.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": \"" + m.tool_calls[j].name +
           "\", \"arguments\": " + m.tool_calls[j].arguments + "}\n</tool_call>";
  }
  out += "<|im_end|>\n";
}

void append_json_string(std::string& out, const std::string& s) {
  // JSON.stringify / json.dumps(ensure_ascii=False): escape quotes, backslashes and control characters.
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void append_template_json(std::string& out, const nlohmann::ordered_json& v) {
  if (v.is_string()) {
    append_json_string(out, v.get_ref<const std::string&>());
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      append_template_json(out, v[i]);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) out += ", ";
      first = false;
      append_json_string(out, key);
      out += ": ";
      append_template_json(out, value);
    }
    out += '}';
  } else {
    out += v.dump();  // numbers, booleans, null
  }
}

}  // namespace

std::string template_json(const nlohmann::ordered_json& value) {
  std::string out;
  append_template_json(out, value);
  return out;
}

std::string render_chat_prompt(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) {
  std::string out;
  const bool system_first = !messages.empty() && messages[0].role == "system";
  if (!options.tools.empty()) {
    out += "<|im_start|>system\n";
    if (system_first) out += messages[0].content + "\n\n";
    out +=
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
        "with "
        "function signatures within <tools></tools> XML tags:\n<tools>";
    for (const std::string& tool : options.tools) out += "\n" + tool;
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (system_first) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }

  // The last user message that is a real query (not tool output wrapped as a user turn).
  size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user" && !is_tool_response(messages[i].content)) {
      last_query = i;
      break;
    }
  }

  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      append_assistant(out, m, i > last_query, last);
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (options.enable_thinking.has_value() && !*options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace tpserve::serve
