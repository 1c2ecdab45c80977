// The chat template equals Qwen3's real Jinja template (rendered by @huggingface/jinja into the golden file
// by make_tokenizer_golden.mjs) on every golden conversation.
#include <gtest/gtest.h>

#include "runtime/serve/chat_template.h"
#include "tests/serve/qwen3_tokenizer.h"

namespace tpserve::serve {
namespace {

std::vector<ChatMessage> messages_of(const nlohmann::ordered_json& list) {
  std::vector<ChatMessage> out;
  for (const auto& m : list) {
    ChatMessage msg;
    msg.role = m["role"];
    msg.content = m["content"];
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"];
    if (m.contains("tool_calls")) {
      for (const auto& call : m["tool_calls"]) {
        const auto& f = call["function"];
        const auto& args = f["arguments"];
        msg.tool_calls.push_back(
            {f["name"], args.is_string() ? args.get<std::string>() : template_json(args)});
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

TEST(ChatTemplate, MatchesQwen3JinjaTemplate) {
  std::ifstream in(std::string(TPSERVE_SOURCE_DIR) + "/tests/fixtures/tokenizer/qwen3_chat_golden.json");
  ASSERT_TRUE(in.good());
  const auto golden = nlohmann::ordered_json::parse(in);
  ASSERT_GE(golden["cases"].size(), 10u);
  for (const auto& c : golden["cases"]) {
    ChatTemplateOptions options;
    options.add_generation_prompt = c.value("add_generation_prompt", true);
    if (c.contains("enable_thinking")) options.enable_thinking = c["enable_thinking"].get<bool>();
    if (c.contains("tools"))
      for (const auto& tool : c["tools"]) options.tools.push_back(template_json(tool));
    EXPECT_EQ(render_chat_prompt(messages_of(c["messages"]), options), c["prompt"].get<std::string>())
        << "case " << c["name"];
  }
}

TEST(ChatTemplate, GenerationPromptAndThinkingSwitch) {
  const std::vector<ChatMessage> msgs = {{"user", "hi", std::nullopt, {}}};
  EXPECT_EQ(render_chat_prompt(msgs, {}), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  ChatTemplateOptions no_think;
  no_think.enable_thinking = false;
  EXPECT_EQ(render_chat_prompt(msgs, no_think),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, TemplateJsonFormatsLikeTojson) {
  const auto v = nlohmann::ordered_json::parse(R"({"b": [1, 2.5, true, null], "a": "x\"\n\u0001é"})");
  EXPECT_EQ(template_json(v), "{\"b\": [1, 2.5, true, null], \"a\": \"x\\\"\\n\\u0001é\"}");
}

}  // namespace
}  // namespace tpserve::serve
