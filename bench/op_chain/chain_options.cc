// Parsers of --shapes and --tokens, mode names, option checks and the device-memory sum of a shape.
#include "bench/op_chain/chain_options.h"

#include <algorithm>
#include <charconv>

#include "common/error.h"

namespace tpserve::bench {
namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string_view() : s.substr(b, e - b + 1);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == separator) {
      parts.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  return parts;
}

// A whole decimal integer in [lo, hi], or false.
bool parse_int(std::string_view text, int lo, int hi, int& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && value >= lo && value <= hi;
}

ChainShape parse_shape(std::string_view item) {
  const std::vector<std::string_view> f = split(item, 'x');
  const auto fail = [&](const char* why) {
    TPS_THROW("--shapes: '", item, "' ", why, " (EXPERTSxTOPKxHIDDENxLAYERS, e.g. 128x8x2048x48)");
  };
  if (f.size() != 4) fail("is not four numbers joined by 'x'");
  ChainShape s;
  if (!parse_int(f[0], 1, kMaxChainExperts, s.experts)) fail("has experts outside [1, 512]");
  if (!parse_int(f[1], 1, std::min(s.experts, kMaxChainTopK), s.top_k))
    fail("has top-k outside [1, min(E, 16)]");
  if (!parse_int(f[2], 8, 1 << 16, s.hidden) || s.hidden % 8 != 0)
    fail("has a hidden size that is not a multiple of 8 in [8, 65536]");
  if (!parse_int(f[3], 1, 1024, s.layers)) fail("has layers outside [1, 1024]");
  return s;
}

}  // namespace

const char* mode_name(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kChevron:
      return "chevron";
    case LaunchMode::kEx:
      return "ex";
    case LaunchMode::kExPdl:
      return "ex_pdl";
  }
  return "?";
}

const char* mode_label(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kChevron:
      return "<<<>>>";
    case LaunchMode::kEx:
      return "LaunchKernelEx";
    case LaunchMode::kExPdl:
      return "LaunchKernelEx+PDL";
  }
  return "?";
}

std::string ChainShape::name() const {
  return std::to_string(experts) + "x" + std::to_string(top_k) + "x" + std::to_string(hidden) + "x" +
         std::to_string(layers);
}

std::vector<ChainShape> parse_chain_shapes(std::string_view text) {
  std::vector<ChainShape> shapes;
  for (std::string_view item : split(text, ',')) {
    const ChainShape s = parse_shape(item);
    TPS_CHECK(std::find(shapes.begin(), shapes.end(), s) == shapes.end(), "--shapes: ", s.name(),
              " appears twice");
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<int> parse_token_counts(std::string_view text) {
  std::vector<int> values;
  for (std::string_view item : split(text, ',')) {
    int v = 0;
    TPS_CHECK(parse_int(item, 1, kMaxChainTokens, v), "--tokens: '", item,
              "' is not an integer in [1, 4096] (e.g. 1,16,48)");
    TPS_CHECK(std::find(values.begin(), values.end(), v) == values.end(), "--tokens: ", v, " appears twice");
    values.push_back(v);
  }
  return values;
}

void check_chain_options(const ChainOptions& o) {
  TPS_CHECK(!o.shapes.empty(), "--shapes: no shape given");
  TPS_CHECK(!o.tokens.empty(), "--tokens: no token count given");
  TPS_CHECK(o.rounds >= 1, "--rounds must be >= 1");
  TPS_CHECK(o.replays >= 1, "--replays must be >= 1");
  TPS_CHECK(o.device >= 0, "--device must be >= 0");
}

uint64_t chain_device_bytes(const ChainShape& s, int max_tokens) {
  constexpr uint64_t kAllocationSlack = 512;  // the arena rounds every allocation up
  const uint64_t L = static_cast<uint64_t>(s.layers), T = static_cast<uint64_t>(max_tokens);
  const uint64_t E = static_cast<uint64_t>(s.experts), H = static_cast<uint64_t>(s.hidden);
  const uint64_t K = static_cast<uint64_t>(s.top_k);
  const uint64_t per_layer = 2 * E * H * 2  // router weights, expert table
                             + T * E * 4    // logits
                             + T * K * 8;   // gating weights + ids
  const uint64_t states = (L + 1) * T * H * 2;
  return L * per_layer + states + (6 * L + 1) * kAllocationSlack;  // 5 buffers a layer, L + 1 states
}

}  // namespace tpserve::bench
