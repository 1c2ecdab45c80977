// The tokenizer against Qwen3's real tokenizer.json: ids equal those of Hugging Face's tokenizers.js on a
// varied corpus (golden file made by make_tokenizer_golden.mjs), decode(encode(x)) == NFC(x), REFERENCE.md's
// vectors, and streaming detokenization that never emits broken UTF-8.
#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/serve/incremental_detokenizer.h"
#include "runtime/serve/pretokenizer.h"
#include "runtime/serve/tokenizer_path.h"
#include "runtime/serve/utf8.h"
#include "tests/serve/qwen3_tokenizer.h"

namespace tpserve::serve {
namespace {

using testing::read_fixture;

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

TEST(Qwen3Tokenizer, LoadsTheRealFile) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->added_tokens().size(), 26u);
  EXPECT_TRUE(tok->is_special(151644));   // <|im_start|>
  EXPECT_FALSE(tok->is_special(151667));  // <think> is an added token, not special
  EXPECT_EQ(tok->token_id("<|im_end|>"), 151645);
}

TEST(Qwen3Tokenizer, ReferenceVectors) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  EXPECT_EQ(tok->encode("Hello, world!"), (std::vector<int32_t>{9707, 11, 1879, 0}));
  EXPECT_EQ(tok->encode("<|im_start|>hello<|im_end|>"), (std::vector<int32_t>{151644, 14990, 151645}));
  EXPECT_EQ(tok->decode({9707, 11, 1879, 0}), "Hello, world!");
}

// U+180E MONGOLIAN VOWEL SEPARATOR is not whitespace since Unicode 6.3 (a format character), for Hugging
// Face's tokenizers too; PCRE2's \s still matched it. Ids from tokenizers.js 0.2.0.
TEST(Qwen3Tokenizer, MongolianVowelSeparatorIsNotWhitespace) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  EXPECT_EQ(show(tok->encode("a \u180e!")), show({64, 86089, 254, 236, 0}));
}

std::vector<std::string> pieces(const Pretokenizer& p, std::string_view text) {
  std::vector<std::string_view> views;
  p.split(text, views);
  return {views.begin(), views.end()};
}

TEST(Pretokenizer, WhitespaceIsUnicodesWhiteSpaceProperty) {
  for (const char* pattern : {"\\s+|\\S+", "[^\\s]+|[\\s]+"}) {
    const Pretokenizer p(pattern);
    EXPECT_EQ(pieces(p, "a\u180eb"), std::vector<std::string>{"a\u180eb"}) << pattern;
    EXPECT_EQ(pieces(p, "a\u2003b\u3000c"), (std::vector<std::string>{"a", "\u2003", "b", "\u3000", "c"}))
        << pattern;
    EXPECT_EQ(pieces(p, "a\t\r\n\u0085b"), (std::vector<std::string>{"a", "\t\r\n\u0085", "b"})) << pattern;
  }
  // Escapes other than \s and \S, a literal ] first in a class, and POSIX classes are left as they are.
  const std::string ws = with_unicode_whitespace("\\s");
  EXPECT_EQ(
      with_unicode_whitespace("\\\\s\\p{L}[]\\s][[:alpha:]\\s]"),
      "\\\\s\\p{L}[]" + ws.substr(1, ws.size() - 2) + "][[:alpha:]" + ws.substr(1, ws.size() - 2) + "]");
  EXPECT_EQ(with_unicode_whitespace("[\\S]"), "[\\S]");
  EXPECT_EQ(with_unicode_whitespace("\\Q[\\s\\E\\s"), "\\Q[\\s\\E" + ws);  // quoted text stays literal
}

TEST(Qwen3Tokenizer, EncodeMatchesTokenizersJsOnTheGoldenCorpus) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const auto golden = read_fixture("tokenizer/qwen3_tokenizer_golden.json");
  ASSERT_GE(golden["cases"].size(), 40u);
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(show(tok->encode(text)), show(c["ids"].get<std::vector<int32_t>>())) << "text: " << text;
  }
}

TEST(Qwen3Tokenizer, DecodeOfEncodeIsTheNfcText) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  for (const auto& c : read_fixture("tokenizer/qwen3_tokenizer_golden.json")["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(tok->decode(tok->encode(text), /*skip_special_tokens=*/false), c["nfc"].get<std::string>())
        << "text: " << text;
  }
}

TEST(Qwen3Tokenizer, SkipSpecialTokensDropsOnlySpecialOnes) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const auto ids = tok->encode("<|im_start|>user\n<think>hi</think><|im_end|>");
  EXPECT_EQ(tok->decode(ids, true), "user\n<think>hi</think>");
  EXPECT_EQ(tok->decode(ids, false), "<|im_start|>user\n<think>hi</think><|im_end|>");
}

TEST(Qwen3Tokenizer, SpecialTokensAsPlainTextWhenNotParsed) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const auto ids = tok->encode("<|im_end|>", /*parse_special=*/false);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(tok->decode(ids), "<|im_end|>");
}

TEST(Qwen3Tokenizer, IdsOutsideTheVocabularyDecodeToNothing) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  EXPECT_EQ(tok->decode({9707, 151700, 151935, -1, 0}), "Hello!");
}

TEST(Qwen3Tokenizer, RejectsInvalidUtf8) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  EXPECT_THROW(tok->encode(std::string("abc\xff")), Error);
}

TEST(Qwen3Tokenizer, LongPiecesEncodeQuickly) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const std::string long_word(200000, 'x');  // one pre-tokenizer piece of 200k bytes: the heap keeps BPE fast
  const auto ids = tok->encode(long_word);
  EXPECT_EQ(tok->decode(ids), long_word);
}

// Every corpus entry decoded one token at a time: each piece is valid UTF-8 and they add up to decode().
TEST(Qwen3Tokenizer, IncrementalDecodeNeverEmitsBrokenUtf8) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  for (const auto& c : read_fixture("tokenizer/qwen3_tokenizer_golden.json")["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      IncrementalDetokenizer detok(*tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        ASSERT_TRUE(is_valid_utf8(piece)) << "text: " << c["text"];
        streamed += piece;
      }
      EXPECT_EQ(detok.pending_bytes(), 0u);
      streamed += detok.finish();
      EXPECT_EQ(streamed, tok->decode(ids, skip)) << "text: " << c["text"];
    }
  }
}

// Tokens that split characters (single-byte tokens of a 4-byte emoji) and bytes that never form a character.
TEST(Qwen3Tokenizer, IncrementalDecodeHoldsBackAndRepairs) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600
  std::vector<int32_t> byte_ids;
  ByteLevelAlphabet alphabet;
  for (char b : emoji) byte_ids.push_back(*tok->token_id(alphabet.encode_byte(static_cast<uint8_t>(b))));
  IncrementalDetokenizer detok(*tok, true);
  EXPECT_EQ(detok.push(byte_ids[0]), "");
  EXPECT_EQ(detok.push(byte_ids[1]), "");
  EXPECT_EQ(detok.push(byte_ids[2]), "");
  EXPECT_EQ(detok.push(byte_ids[3]), emoji);
  // A lead byte followed by ASCII: U+FFFD then the ASCII, exactly as a full decode does.
  const int32_t a = *tok->token_id("a");
  std::vector<int32_t> broken = {byte_ids[0], byte_ids[1], a, byte_ids[0]};
  IncrementalDetokenizer d2(*tok, true);
  std::string streamed;
  for (int32_t id : broken) streamed += d2.push(id);
  streamed += d2.finish();
  EXPECT_EQ(streamed, tok->decode(broken));
  EXPECT_EQ(streamed,
            "\xEF\xBF\xBD"
            "a"
            "\xEF\xBF\xBD");
}

TEST(TokenizerJson, MergesInBothFormatsAndClearErrors) {
  // A miniature byte-level BPE file: vocab of the 256 bytes plus "ab", "abc"; merges as "a b" and pairs.
  nlohmann::json vocab = nlohmann::json::object();
  ByteLevelAlphabet alphabet;
  for (int b = 0; b < 256; ++b) vocab[alphabet.encode_byte(static_cast<uint8_t>(b))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  nlohmann::json doc = {
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"added_tokens", {{{"id", 258}, {"content", "<s>"}, {"special", true}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", {"ab", "c"}}}}}};
  auto tok = Tokenizer::from_json_text(doc.dump(), "mini.json");
  EXPECT_EQ(tok->encode("abc<s>ab"), (std::vector<int32_t>{257, 258, 256}));
  EXPECT_EQ(tok->decode({257, 258, 256}), "abcab");

  auto error_of = [](const nlohmann::json& d) -> std::string {
    try {
      Tokenizer::from_json_text(d.dump(), "bad.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "<accepted>";
  };
  auto bad = doc;
  bad["model"]["merges"] = {"a"};
  EXPECT_NE(error_of(bad).find("model.merges[0]"), std::string::npos) << error_of(bad);
  bad = doc;
  bad["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"x", "q"})});
  EXPECT_NE(error_of(bad).find("outside the vocabulary"), std::string::npos) << error_of(bad);
  bad = doc;
  bad["normalizer"] = {{"type", "NFKC"}};
  EXPECT_NE(error_of(bad).find("normalizer"), std::string::npos) << error_of(bad);
  bad = doc;
  bad["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of(bad).find("only byte-level BPE"), std::string::npos) << error_of(bad);
  EXPECT_NE(std::string(error_of(nlohmann::json::parse("[1]"))).find("bad.json"), std::string::npos);
  try {
    Tokenizer::from_json_text("{not json", "broken.json");
    ADD_FAILURE() << "accepted broken JSON";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(TokenizerPath, ExplicitCheckpointAndSyntheticChoices) {
  ModelConfig explicit_missing;
  explicit_missing.tokenizer = "/nonexistent/tokenizer.json";
  try {
    resolve_tokenizer_path(explicit_missing);
    ADD_FAILURE() << "a missing model.tokenizer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.tokenizer: /nonexistent/tokenizer.json"), std::string::npos);
  }
  ModelConfig checkpoint;
  checkpoint.path = std::string(TPSERVE_SOURCE_DIR) + "/tests/fixtures/gqa4";  // has no tokenizer.json
  const TokenizerChoice none = resolve_tokenizer_path(checkpoint);
  EXPECT_TRUE(none.path.empty());
  EXPECT_NE(none.missing.find("gqa4/tokenizer.json does not exist"), std::string::npos) << none.missing;

  ModelConfig synthetic;
  synthetic.synthetic = SyntheticModelConfig{};
  const TokenizerChoice fetched = resolve_tokenizer_path(synthetic);
  if (testing::qwen3_tokenizer() != nullptr) {
    EXPECT_NE(fetched.path.find(".deps/qwen3-tokenizer.json"), std::string::npos) << fetched.path;
  } else {
    EXPECT_NE(fetched.missing.find("launch/fetch-tokenizer"), std::string::npos) << fetched.missing;
  }
}

}  // namespace
}  // namespace tpserve::serve
