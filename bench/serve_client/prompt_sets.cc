// The prompt texts of each set (fixed: runs are comparable over time).
#include "bench/serve_client/prompt_sets.h"

#include <map>

#include "common/error.h"

namespace tpserve::bench {
namespace {

const std::map<std::string, std::vector<std::string>>& sets() {
  static const std::map<std::string, std::vector<std::string>> all = {
      {"prose",
       {"Explain in a few paragraphs how a lighthouse keeper's daily routine might have looked in 1900.",
        "Write a short story about a cartographer who discovers that one of her maps is changing by itself.",
        "Describe the water cycle to a curious ten-year-old, with one concrete example for every stage.",
        "Summarise the arguments for and against building cities vertically rather than spreading them "
        "out."}},
      {"code",
       {"Write a C++ function that merges two sorted vectors of integers into one sorted vector, with tests.",
        "Implement a least-recently-used cache in Python with O(1) get and put, and explain the design.",
        "Write a shell script that finds the ten largest files under a directory and prints their sizes.",
        "Explain what this does and fix any bug: for (int i = 0; i <= n; ++i) sum += a[i];"}},
      {"numbers",
       {"Count from 1 to 200, separated by commas.",
        "List the first 40 prime numbers and the gap between each one and the next.",
        "Compute 17 multiplied by every integer from 1 to 30, one result per line.",
        "Give the powers of two from 2^0 to 2^40 with their decimal values."}},
  };
  return all;
}

}  // namespace

std::vector<std::string> prompt_set_names() {
  std::vector<std::string> names;
  for (const auto& [name, prompts] : sets()) names.push_back(name);
  return names;
}

const std::vector<std::string>& prompt_set(const std::string& name) {
  const auto it = sets().find(name);
  if (it == sets().end()) {
    std::string known;
    for (const auto& n : prompt_set_names()) known += (known.empty() ? "" : ", ") + n;
    TPS_THROW("unknown prompt set '", name, "' (known: ", known, ")");
  }
  return it->second;
}

std::string prompt_for_request(const std::vector<std::string>& set_names, int request_index) {
  TPS_CHECK(!set_names.empty() && request_index >= 0, "no prompt sets");
  const int n = static_cast<int>(set_names.size());
  const auto& prompts = prompt_set(set_names[request_index % n]);
  return prompts[(request_index / n) % prompts.size()];
}

}  // namespace tpserve::bench
