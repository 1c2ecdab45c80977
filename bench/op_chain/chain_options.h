// What one op_chain run measures: the model shapes (experts, top-k, hidden, layers), the token counts, the
// launch modes of the consumer kernel, rounds and replays; and the parsers of its list-valued flags
// (`--shapes 64x8x2048x16,128x8x2048x48`, `--tokens 1,16,48`). Pure host logic: builds and is tested without
// CUDA.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/policy.h"

namespace tpserve::bench {

// How the consumer kernel of each layer is launched. The router GEMM and the top-k gating always go through
// kernels/launch.h; only the consumer's launch changes between modes.
enum class LaunchMode : int {
  kChevron,  // kernel<<<grid, block, smem, stream>>>(...): no launch attribute possible
  kEx,       // cudaLaunchKernelEx without attributes
  kExPdl,    // cudaLaunchKernelEx with cudaLaunchAttributeProgrammaticStreamSerialization
};
inline constexpr int kNumLaunchModes = 3;
inline constexpr std::array<LaunchMode, kNumLaunchModes> kLaunchModes = {LaunchMode::kChevron,
                                                                         LaunchMode::kEx, LaunchMode::kExPdl};
// The mode per-mode differences are taken against: the same API as kExPdl, without the attribute.
inline constexpr LaunchMode kBaselineMode = LaunchMode::kEx;

const char* mode_name(LaunchMode mode);   // "chevron", "ex", "ex_pdl" (JSON keys)
const char* mode_label(LaunchMode mode);  // "<<<>>>", "LaunchKernelEx", "LaunchKernelEx+PDL" (tables)

// One model's MoE routing chain.
struct ChainShape {
  int experts = 0;           // E: router GEMM output width
  int top_k = 0;             // k experts per token
  int hidden = 0;            // H: router GEMM input width, consumer row width
  int layers = 0;            // chains stacked in one graph
  std::string name() const;  // "64x8x2048x16"
  bool operator==(const ChainShape&) const = default;
};

struct ChainOptions {
  std::vector<ChainShape> shapes = {{64, 8, 2048, 16}, {128, 8, 2048, 48}, {512, 10, 2560, 48}};
  std::vector<int> tokens = {1, 16, 48};
  int rounds = 6;     // each round runs every mode once, in A/B/B/A order (bench/common/arm_schedule.h)
  int replays = 100;  // graph replays (and eager chains) timed per mode and round
  int device = 0;
  kernels::PdlMode chain_pdl = kernels::PdlMode::kAuto;  // launch.pdl.default for router GEMM and top-k
  uint64_t seed = 1;                                     // weights and inputs
  std::string json_path;
};

// Limits the kernels put on a shape (top-k gating: E <= 512, k <= 16; every kernel: H a multiple of 8).
inline constexpr int kMaxChainExperts = 512;
inline constexpr int kMaxChainTopK = 16;
inline constexpr int kMaxChainTokens = 4096;

// "64x8x2048x16" (experts x top-k x hidden x layers), comma-separated, distinct, in the order given.
std::vector<ChainShape> parse_chain_shapes(std::string_view text);
// "1,16,48": integers in [1, kMaxChainTokens], distinct, in the order given.
std::vector<int> parse_token_counts(std::string_view text);
// Checks ranges (rounds, replays, non-empty lists). Throws tpserve::Error.
void check_chain_options(const ChainOptions& options);

// Device bytes one shape's buffers take for up to `max_tokens` tokens: router weights and expert table per
// layer ([E, H] bf16 each), hidden states ([layers + 1, T, H] bf16), logits ([layers, T, E] f32), gating
// weights and ids ([layers, T, k] f32 + i32).
uint64_t chain_device_bytes(const ChainShape& shape, int max_tokens);

}  // namespace tpserve::bench
