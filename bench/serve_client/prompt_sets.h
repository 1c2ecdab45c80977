// Built-in prompt sets for serve_client: `prose` (explanations, stories), `code` (programming tasks) and
// `numbers` (counting, arithmetic, lists of figures). Request i takes set i mod (number of sets chosen) and
// cycles through that set's prompts, so a run is the same every time.
#pragma once

#include <string>
#include <vector>

namespace tpserve::bench {

std::vector<std::string> prompt_set_names();
// Throws tpserve::Error naming the known sets for an unknown name.
const std::vector<std::string>& prompt_set(const std::string& name);
std::string prompt_for_request(const std::vector<std::string>& set_names, int request_index);

}  // namespace tpserve::bench
