#include "runtime/serve/json_string_pattern.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "common/error.h"
#include "runtime/serve/regex_parser.h"

namespace tpserve::serve {
namespace {

// The code points a JSON string may hold unescaped, as ranges to intersect with (surrogates are no
// characters, and the escape of one is refused).
const std::vector<CodePointRange> kUnescaped = {
    {0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}};

std::string code_point(char32_t c) {
  char buffer[16];
  if (c <= 0xFFFF) {
    std::snprintf(buffer, sizeof buffer, "\\u%04X", static_cast<unsigned>(c));
  } else {
    std::snprintf(buffer, sizeof buffer, "\\U%08X", static_cast<unsigned>(c));
  }
  return buffer;
}

// Where a node's text goes: groups are added only where precedence needs them (a deep pattern would
// otherwise come back nested deeper than the parser allows).
enum class Place { kTop, kInConcat, kRepeated };

// The node as regex text, its sets cut to kUnescaped; nullopt when it then matches nothing.
std::optional<std::string> restricted(const RegexNode& n, Place place) {
  switch (n.kind) {
    case RegexNode::Kind::kEmpty:
      return std::string();
    case RegexNode::Kind::kSet: {
      std::string out;
      for (const CodePointRange& r : n.set)
        for (const CodePointRange& u : kUnescaped) {
          const char32_t lo = std::max(r.lo, u.lo), hi = std::min(r.hi, u.hi);
          if (lo > hi) continue;
          out += code_point(lo);
          if (hi > lo) out += "-" + code_point(hi);
        }
      if (out.empty()) return std::nullopt;
      return "[" + out + "]";
    }
    case RegexNode::Kind::kConcat: {
      std::string out;
      for (const RegexNode& c : n.children) {
        const auto part = restricted(c, Place::kInConcat);
        if (!part) return std::nullopt;
        out += *part;
      }
      return place == Place::kRepeated && !out.empty() ? "(?:" + out + ")" : out;
    }
    case RegexNode::Kind::kAlternate: {
      std::string out;
      bool any = false;
      for (const RegexNode& c : n.children) {
        const auto part = restricted(c, Place::kTop);  // an alternative needs no group of its own
        if (!part) continue;
        out += (any ? "|" : "") + *part;
        any = true;
      }
      if (!any) return std::nullopt;
      return place == Place::kTop ? out : "(?:" + out + ")";
    }
    case RegexNode::Kind::kRepeat: {
      const auto part = restricted(n.children.at(0), Place::kRepeated);
      if (!part) return n.min == 0 ? std::optional<std::string>(std::string()) : std::nullopt;
      if (part->empty()) return std::string();  // the empty text, however often
      const std::string max = n.max < 0 ? "" : std::to_string(n.max);
      const std::string out = *part + "{" + std::to_string(n.min) + "," + max + "}";
      return place == Place::kRepeated ? "(?:" + out + ")" : out;  // a repeat of a repeat: grouped
    }
  }
  return std::nullopt;
}

}  // namespace

std::string json_string_pattern(std::string_view pattern) {
  const auto regex = restricted(parse_regex(pattern), Place::kTop);
  if (!regex)
    throw Error(
        "the pattern matches only text with characters a JSON string must escape ('\"', '\\\\', "
        "control characters), which this server cannot generate");
  return *regex;
}

}  // namespace tpserve::serve
