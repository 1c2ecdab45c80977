// The tp_decode sweep on every rank: builds each arm's engine (config file + --set + the arm's overrides),
// warms it up, then runs the schedule of (concurrency, round, arm) runs. Rank 0 drives and records; the other
// ranks serve each run in engine.run_follower(). Every rank builds engines and enters and leaves runs in the
// same order (the schedule is a pure function of the options), which MPI collectives require.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/tp_decode/decode_round.h"
#include "bench/tp_decode/sweep_options.h"
#include "runtime/config/config.h"

namespace tpserve::bench {

struct ArmRecord {
  ArmSpec spec;
  std::string config_yaml;             // the resolved config (config_to_yaml)
  std::string backend;                 // backend name
  std::string probe;                   // device probe name
  nlohmann::json cost_model;           // StepCostModel::describe() for rank 0
  std::vector<double> bandwidth_gbps;  // measured by the device probe (one per engine build); empty on CPU
};

struct SweepResult {
  int world_size = 1;
  std::vector<ArmRecord> arms;
  std::vector<RoundRecord> rounds;  // recorded runs, in execution order (rank 0 only)
  std::optional<double> hbm_gbps;   // used for the floor: --hbm-gbps, else the median measurement
  std::string bandwidth_source;     // "--hbm-gbps", "measured" or "n/a"
  double wall_s = 0;
};

// The config of one arm: the file, then --set, then the arm's overrides; checks that a request fits
// runtime.max_seq_len. Throws ConfigError or tpserve::Error.
Config load_arm_config(const SweepOptions& options, const ArmSpec& arm);

// Runs on every rank (MPI initialised by the caller); rank 0's result holds the records.
SweepResult run_sweep(const SweepOptions& options);

}  // namespace tpserve::bench
