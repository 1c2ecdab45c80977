// Where a kernel's time goes, from the phase marks its blocks recorded in one launch (kernels/phase_trace.h;
// tp_decode --phase-trace): per mark, how many blocks reached it and when the first and the last did, and
// the path of the block that ended last (the one its dependents wait for), all from the launch's first
// return of its PDL wait; then medians of those over many decode steps, and the gaps between one traced
// kernel's last block and the next traced kernel's first wait return.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/phase_trace.h"  // PhaseMark: a plain struct, no CUDA

namespace tpserve::bench {

// One launch of a kernel, from its marks [blocks][marks_per_block]. The launch is the one whose block
// entered last. Every block of a launch records its entry (mark 0), so the blocks whose entry has that
// launch's grid size are its blocks (those of an earlier, larger launch keep their entries past its grid);
// a block's mark counts when it is not before the block's entry (else an earlier launch left it).
struct LaunchPhases {
  bool present = false;     // some block entered and reached wait_mark
  int launch_blocks = 0;    // blocks of the launch recorded (the buffer holds the first kPhaseTraceBlocks)
  int grid_blocks = 0;      // blocks the launch had
  uint64_t t0_ns = 0;       // the first return of the PDL wait (wait_mark) of any block
  uint64_t end_ns = 0;      // the latest mark of any block
  std::vector<int> blocks;  // per mark: blocks that reached it
  std::vector<double> first_us, last_us;  // per mark, from t0; NaN where no block did
  std::vector<double> critical_us;  // the block with the latest mark: its marks from t0 (NaN: not reached)
  std::vector<double> critical_cycles;  // ... and its SM cycles since its previous reached mark (NaN: none)
};
LaunchPhases summarize_launch(const std::vector<kernels::PhaseMark>& marks, int marks_per_block,
                              int wait_mark);

// Medians over steps of each traced kernel's LaunchPhases, of the gaps between consecutive kernels of a step
// (next.t0 - previous.end, in the order add_step receives them), and of the chain: the last kernel's end
// from the first one's wait return, in steps where every kernel was traced (the traced launches being
// consecutive, it is their ends after their waits and the gaps added up).
class PhaseAccumulator {
 public:
  struct Kernel {
    std::string name;
    std::vector<std::string> mark_names;
    LaunchPhases phases;
  };
  void add_step(const std::vector<Kernel>& kernels);
  int steps() const { return steps_; }
  // launches: which launch of each kernel the marks are from (the report's first line).
  void report(std::ostream& out, const std::string& launches = "each kernel's last launch in the step") const;

 private:
  struct Samples {
    std::vector<std::string> mark_names;
    std::vector<std::vector<double>> blocks, first, last, critical, cycles;  // [mark][step]
    std::vector<double> launch_blocks, grid_blocks;
  };
  int steps_ = 0;
  std::vector<std::string> order_;  // kernel names in the order first seen
  std::map<std::string, Samples> kernels_;
  std::map<std::string, std::vector<double>> gaps_;  // "a -> b": next first wait return - previous end, us
  std::vector<std::string> gap_order_;
  std::vector<double> chain_;  // per step with every kernel present: last end - first t0, us
  std::string chain_name_;     // "first -> last"
};

}  // namespace tpserve::bench
