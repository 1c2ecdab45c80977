// The order in which a benchmark runs its arms (tp_decode's config arms, op_chain's launch modes). Round r
// runs every arm once: in the order given on even rounds and reversed on odd ones, so two arms run
// A B | B A | A B | B A ... and k arms run a palindrome per pair of rounds. Over each pair of rounds every
// arm's mean position is the same, so a drift linear in time (clocks, temperature, a neighbour's load) adds
// the same to every arm and cancels in paired differences.
#pragma once

#include <vector>

namespace tpserve::bench {

// Arm indices in the order round `round` runs them.
std::vector<int> arm_order(int num_arms, int round);

struct ScheduledRun {
  int concurrency = 0;
  int round = 0;
  int arm = 0;
  int position = 0;  // index of the arm within its round
};

// Every run of a tp_decode sweep in execution order: concurrency levels in the order given, then rounds, then
// arms in arm_order. Every rank computes the same list, so all ranks enter and leave the same engine's rounds
// in step.
std::vector<ScheduledRun> sweep_schedule(const std::vector<int>& concurrency, int rounds, int num_arms);

}  // namespace tpserve::bench
