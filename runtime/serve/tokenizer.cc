#include "runtime/serve/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "runtime/serve/unicode_nfc.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

using nlohmann::json;

// GPT-2's pattern, which a ByteLevel pre-tokenizer with use_regex applies.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") ? j["type"].dump() : j.dump();
}

// The split pattern of the pre_tokenizer section; throws for shapes other than byte-level BPE uses.
std::string pretokenizer_pattern(const json& pre, const std::string& source) {
  auto unsupported = [&](const std::string& what) {
    TPS_THROW(source, ": pre_tokenizer ", what,
              " is not supported (tpserve reads byte-level BPE tokenizers: a "
              "Split regex followed by ByteLevel, or ByteLevel with use_regex)");
  };
  auto check_byte_level = [&](const json& b) {
    if (!b.is_object() || b.value("type", "") != "ByteLevel") unsupported(type_of(b));
    if (b.value("add_prefix_space", false)) unsupported("ByteLevel with add_prefix_space");
  };
  if (pre.is_object() && pre.value("type", "") == "ByteLevel") {
    check_byte_level(pre);
    if (!pre.value("use_regex", true)) unsupported("ByteLevel without use_regex and without a Split");
    return kGpt2Pattern;
  }
  if (!pre.is_object() || pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers") ||
      pre["pretokenizers"].size() != 2)
    unsupported(type_of(pre));
  const json& split = pre["pretokenizers"][0];
  check_byte_level(pre["pretokenizers"][1]);
  if (pre["pretokenizers"][1].value("use_regex", true))
    unsupported("Split followed by ByteLevel with use_regex");
  if (!split.is_object() || split.value("type", "") != "Split") unsupported(type_of(split));
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
    unsupported("Split with behavior " + split.value("behavior", std::string("?")) + " / invert");
  if (!split.contains("pattern") || !split["pattern"].contains("Regex") ||
      !split["pattern"]["Regex"].is_string())
    unsupported("Split without a Regex pattern");
  return split["pattern"]["Regex"].get<std::string>();
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& merges, const std::string& source) {
  TPS_CHECK(merges.is_array(), source, ": model.merges must be a list");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else if (m.is_string()) {  // older files: "a b" (byte-level tokens never contain a plain space)
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      TPS_CHECK(space != std::string::npos && space > 0 && space + 1 < s.size() &&
                    s.find(' ', space + 1) == std::string::npos,
                source, ": model.merges[", i, "] = '", s, "' is not 'left right'");
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      TPS_THROW(source, ": model.merges[", i, "] must be [\"left\", \"right\"] or \"left right\", got ",
                m.dump());
    }
  }
  return out;
}

}  // namespace

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TPS_CHECK(in.good(), "tokenizer: cannot open ", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return from_json_text(buffer.str(), path);
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(const std::string& json_text,
                                                     const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    TPS_THROW(source, ": not valid JSON: ", e.what());
  }
  TPS_CHECK(doc.is_object() && doc.contains("model") && doc["model"].is_object(), source,
            ": not a tokenizer.json (no 'model' section)");
  const json& model = doc["model"];
  TPS_CHECK(model.value("type", "BPE") == "BPE", source, ": model type ", type_of(model),
            " is not supported (only byte-level BPE)");
  TPS_CHECK(!model.value("byte_fallback", false), source, ": BPE byte_fallback is not supported");
  TPS_CHECK(model.contains("vocab") && model["vocab"].is_object(), source, ": model.vocab must be a mapping");

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const json& normalizer = doc.contains("normalizer") ? doc["normalizer"] : json();
  if (normalizer.is_object() && normalizer.value("type", "") == "NFC")
    t->nfc_ = true;
  else
    TPS_CHECK(normalizer.is_null(), source, ": normalizer ", type_of(normalizer),
              " is not supported (NFC or none)");
  TPS_CHECK(doc.contains("pre_tokenizer"), source, ": no pre_tokenizer section");
  t->pretokenizer_ = std::make_unique<Pretokenizer>(pretokenizer_pattern(doc["pre_tokenizer"], source));

  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(model["vocab"].size());
  int32_t max_id = -1;
  for (const auto& [token, id] : model["vocab"].items()) {
    TPS_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 30), source,
              ": model.vocab['", token, "'] is not a token id");
    vocab.emplace(token, id.get<int32_t>());
    max_id = std::max(max_id, id.get<int32_t>());
  }
  const auto merges = read_merges(model.contains("merges") ? model["merges"] : json::array(), source);

  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    TPS_CHECK(doc["added_tokens"].is_array(), source, ": added_tokens must be a list");
    for (const json& a : doc["added_tokens"]) {
      TPS_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() && a.contains("content") &&
                    a["content"].is_string() && !a["content"].get<std::string>().empty(),
                source, ": added token ", a.dump(), " needs an integer id and non-empty content");
      AddedToken token{a["content"].get<std::string>(), a["id"].get<int32_t>(), a.value("special", false)};
      TPS_CHECK(token.id >= 0 && token.id < (1 << 30), source, ": added token id ", token.id,
                " out of range");
      max_id = std::max(max_id, token.id);
      t->added_first_byte_[static_cast<uint8_t>(token.content[0])] = true;
      t->added_.push_back(std::move(token));
    }
  }
  std::stable_sort(t->added_.begin(), t->added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });

  t->bpe_ = std::make_unique<BpeModel>(std::move(vocab), merges);
  t->id_to_bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  t->special_.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [token, id] : t->bpe_->vocab()) {
    auto bytes = t->bpe_->alphabet().decode(token);
    TPS_CHECK(bytes.has_value(), source, ": vocabulary token '", token, "' (id ", id,
              ") is outside the byte-level alphabet");
    t->id_to_bytes_[id] = std::move(*bytes);
  }
  for (const AddedToken& a : t->added_) {
    t->id_to_bytes_[a.id] = a.content;
    t->special_[a.id] = a.special ? 1 : 0;
  }
  return t;
}

const AddedToken* Tokenizer::added_token_at(std::string_view text, size_t pos) const {
  if (!added_first_byte_[static_cast<uint8_t>(text[pos])]) return nullptr;
  for (const AddedToken& a : added_)  // longest first
    if (text.compare(pos, a.content.size(), a.content) == 0) return &a;
  return nullptr;
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  const std::string normalized = nfc_ ? to_nfc(text) : std::string(text);
  std::vector<std::string_view> pieces;
  pretokenizer_->split(normalized, pieces);
  for (std::string_view piece : pieces) bpe_->encode_piece(piece, ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  TPS_CHECK(is_valid_utf8(text), "tokenizer: the text is not valid UTF-8");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  size_t start = 0;  // start of the ordinary text before the next added token
  if (parse_special && !added_.empty()) {
    for (size_t pos = 0; pos < text.size();) {
      const AddedToken* a = added_token_at(text, pos);
      if (a == nullptr) {
        ++pos;
        continue;
      }
      encode_ordinary(text.substr(start, pos - start), ids);
      ids.push_back(a->id);
      pos += a->content.size();
      start = pos;
    }
  }
  encode_ordinary(text.substr(start), ids);
  return ids;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && id < vocab_size() ? id_to_bytes_[id] : kNone;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id] != 0;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const AddedToken& a : added_)
    if (a.content == token) return a.id;
  auto it = bpe_->vocab().find(std::string(token));
  if (it != bpe_->vocab().end()) return it->second;
  return std::nullopt;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids)
    if (!(skip_special_tokens && is_special(id))) bytes += token_bytes(id);
  return repair_utf8(bytes);
}

}  // namespace tpserve::serve
