// `tpserve --report-pdl` / `--report-graphs`: builds the engine as serving would (weights, KV cache, the
// decode graphs captured after their warm-up), then prints on every rank the launch policy's decision for
// every site and kernel it launched, with the reason, and what each captured graph holds.
#include <iostream>
#include <sstream>

#include "kernels/policy.h"
#include "runtime/engine/engine.h"
#include "runtime/tools/commands.h"
#include "runtime/tools/runtime_setup.h"

namespace tpserve {

int run_reports(const CommandLine& cl, const Config& config) {
  RuntimeSetup rt(config);
  std::unique_ptr<Engine> engine_ptr = rt.make_engine();
  Engine& engine = *engine_ptr;
  std::ostringstream os;
  os << "== rank " << rt.topology().world_rank << " (local rank " << rt.topology().local_rank << ")\n";
  if (cl.report_pdl) {
    os << "PDL: launch.pdl.default=" << kernels::pdl_mode_name(config.launch.pdl.default_mode)
       << (kernels::pdl_kill_switch_from_env() ? ", TPSERVE_PDL=off (kill switch)" : "") << "\n";
    for (int i = 0; i < kernels::kNumSites; ++i)
      if (config.launch.pdl.sites[i])
        os << "  launch.pdl.sites." << kernels::site_name(static_cast<kernels::Site>(i)) << "="
           << kernels::pdl_mode_name(*config.launch.pdl.sites[i]) << "\n";
    os << engine.backend().launch_report() << "\n";
  }
  if (cl.report_graphs) {
    const auto graphs = engine.model().graph_reports();
    if (graphs.empty())
      os << "no CUDA graphs (" << engine.backend().name() << " backend, or cuda_graph.enabled: false)\n";
    for (const auto& [size, report] : graphs)
      os << "decode graph, batch " << size << ": " << report.format() << "\n";
  }
  std::cout << os.str() << std::flush;
  return 0;
}

}  // namespace tpserve
