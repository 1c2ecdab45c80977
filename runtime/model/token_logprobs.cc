#include "runtime/model/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace tpserve {

std::vector<TokenLogprobs> token_logprobs(const LogprobCandidates& c, const std::vector<int32_t>& tokens,
                                          const std::vector<int32_t>& top) {
  TPS_CHECK(static_cast<int>(tokens.size()) == c.rows && static_cast<int>(top.size()) == c.rows,
            "logprobs: ", tokens.size(), " tokens and ", top.size(), " requests for ", c.rows, " rows");
  std::vector<TokenLogprobs> out(c.rows);
  std::vector<std::pair<float, int32_t>> merged;
  for (int r = 0; r < c.rows; ++r) {
    if (top[r] < 0) continue;
    // The n best overall are among the ranks' C best each only for n <= C.
    TPS_CHECK(top[r] <= c.per_rank, "logprobs: ", top[r], " top tokens asked of ", c.per_rank,
              " candidates a rank");
    // log(sum over the vocabulary of exp(logit)), from each rank's max and sum of exp(logit - max).
    float max = -std::numeric_limits<float>::infinity();
    for (int p = 0; p < c.ranks; ++p) max = std::max(max, c.stats[(static_cast<size_t>(p) * c.rows + r) * 2]);
    double sum = 0;
    for (int p = 0; p < c.ranks; ++p) {
      const float* s = c.stats + (static_cast<size_t>(p) * c.rows + r) * 2;
      sum += static_cast<double>(s[1]) * std::exp(static_cast<double>(s[0]) - max);
    }
    const double lse = max + std::log(sum);
    merged.clear();
    for (int p = 0; p < c.ranks; ++p) {
      const size_t at = (static_cast<size_t>(p) * c.rows + r) * c.per_rank;
      for (int i = 0; i < c.per_rank; ++i) merged.emplace_back(c.values[at + i], c.ids[at + i]);
    }
    std::partial_sort(merged.begin(), merged.begin() + top[r], merged.end(),
                      [](const auto& a, const auto& b) {
                        return a.first != b.first ? a.first > b.first : a.second < b.second;
                      });
    TokenLogprobs& lp = out[r];
    for (int i = 0; i < top[r]; ++i)
      lp.top.emplace_back(merged[i].second, static_cast<float>(merged[i].first - lse));
    if (tokens[r] < 0) continue;
    const auto it =
        std::find_if(merged.begin(), merged.end(), [&](const auto& m) { return m.second == tokens[r]; });
    // Drawn tokens are among the candidates; only NaN logits (a broken model) leave one out, and that
    // should not fail the step of every request: minus infinity.
    lp.logprob =
        it != merged.end() ? static_cast<float>(it->first - lse) : -std::numeric_limits<float>::infinity();
  }
  return out;
}

}  // namespace tpserve
