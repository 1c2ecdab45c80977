// `tpserve generate`: runs the model on prompt token ids and prints the generated ids on rank 0, one line.
#include <iostream>
#include <sstream>

#include "common/log.h"
#include "runtime/engine/engine.h"
#include "runtime/tools/commands.h"
#include "runtime/tools/runtime_setup.h"

namespace tpserve {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t pos = 0;
    long v = -1;
    try {
      v = std::stol(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    TPS_CHECK(pos == item.size() && v >= 0 && v <= INT32_MAX, "--prompt-ids: '", item, "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  TPS_CHECK(!ids.empty(), "--prompt-ids: no token ids given");
  return ids;
}

}  // namespace

int run_generate(const GenerateArgs& args, const Config& config) {
  RuntimeSetup rt(config);
  std::unique_ptr<Engine> engine_ptr = rt.make_engine();
  Engine& engine = *engine_ptr;
  if (!engine.is_driver()) {
    engine.run_follower();
    return 0;
  }
  const std::vector<int32_t> prompt = parse_ids(args.prompt_ids);
  for (int32_t id : prompt)
    TPS_CHECK(id < engine.spec().vocab_size, "--prompt-ids: token ", id, " is outside the vocabulary of ",
              engine.spec().vocab_size);
  SamplingParams sp{.temperature = static_cast<float>(args.temperature),
                    .top_k = args.top_k,
                    .top_p = static_cast<float>(args.top_p),
                    .min_p = static_cast<float>(args.min_p),
                    .seed = args.seed};
  // An exception here reaches main(), which aborts every rank: followers never wait forever.
  const std::vector<int32_t> out = engine.generate(prompt, sp, args.max_tokens, args.ignore_eos);
  engine.stop_followers();
  std::ostringstream os;
  for (size_t i = 0; i < out.size(); ++i) os << (i ? "," : "") << out[i];
  std::cout << os.str() << std::endl;
  return 0;
}

}  // namespace tpserve
