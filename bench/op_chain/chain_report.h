// op_chain's outputs: the console table (one line per case and launch mode) and the JSON record (every
// round's timing, each graph's counts, the summaries, build, machine, device and options).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/op_chain/chain_options.h"
#include "bench/op_chain/chain_summary.h"

namespace tpserve::bench {

// What the consumer kernel is, for the JSON record and the table's footer.
extern const char* const kConsumerDescription;

std::string format_chain_table(const std::vector<CaseRun>& runs);

nlohmann::json graph_json(const GraphReport& graph);

// device: what the runner knows of the GPU (name, SM, clocks); pdl_decisions: the launch policy's report.
nlohmann::json chain_json(const ChainOptions& options, const std::vector<CaseRun>& runs,
                          const nlohmann::json& device, const nlohmann::json& pdl_decisions,
                          const std::vector<std::string>& command_line);

}  // namespace tpserve::bench
