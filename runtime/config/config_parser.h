// YAML -> Config. Every problem found is reported (not only the first), each naming the full key path,
// the value given and what is allowed. `--set a.b=value` overrides are applied to the YAML tree before
// conversion, so they are validated exactly like the file.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/config.h"

namespace tpserve {

class ConfigError : public Error {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// text: YAML document; source: a name for messages (file path or "<string>").
Config parse_config(const std::string& text, const std::string& source,
                    const std::vector<std::string>& overrides = {});
Config load_config_file(const std::string& path, const std::vector<std::string>& overrides = {});

// The resolved config as YAML (what --check-config prints).
std::string config_to_yaml(const Config& config);

// Closest candidate within edit distance 2 (or a prefix match), or "" if none.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace tpserve
