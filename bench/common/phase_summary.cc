#include "bench/common/phase_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "bench/common/sample_stats.h"

namespace tpserve::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double us_between(uint64_t from, uint64_t to) {
  return static_cast<double>(static_cast<int64_t>(to - from)) * 1e-3;
}

// The median of the samples that are not NaN (NaN without any).
double median_present(const std::vector<double>& values) {
  std::vector<double> kept;
  for (double v : values)
    if (!std::isnan(v)) kept.push_back(v);
  return kept.empty() ? kNaN : median(kept);
}

std::string cell(double v, const char* format) {
  if (std::isnan(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

}  // namespace

LaunchPhases summarize_launch(const std::vector<kernels::PhaseMark>& marks, int marks_per_block,
                              int wait_mark) {
  LaunchPhases out;
  if (marks_per_block <= 0 || wait_mark < 0 || wait_mark >= marks_per_block) return out;
  const int blocks = static_cast<int>(marks.size()) / marks_per_block;
  auto at = [&](int block, int mark) -> const kernels::PhaseMark& {
    return marks[block * marks_per_block + mark];
  };
  int latest = -1;
  for (int b = 0; b < blocks; ++b)
    if (at(b, 0).global_ns != 0 && (latest < 0 || at(b, 0).global_ns > at(latest, 0).global_ns)) latest = b;
  if (latest < 0) return out;
  const uint32_t grid = at(latest, 0).grid_blocks;
  out.grid_blocks = static_cast<int>(grid);
  auto in_launch = [&](int b) { return at(b, 0).global_ns != 0 && at(b, 0).grid_blocks == grid; };
  auto valid = [&](int b, int mark) {
    return at(b, mark).global_ns != 0 && at(b, mark).global_ns >= at(b, 0).global_ns;
  };

  bool any_wait = false;
  int critical = -1;
  uint64_t critical_end = 0;
  for (int b = 0; b < blocks; ++b) {
    if (!in_launch(b)) continue;
    ++out.launch_blocks;
    if (valid(b, wait_mark) && (!any_wait || at(b, wait_mark).global_ns < out.t0_ns))
      out.t0_ns = at(b, wait_mark).global_ns, any_wait = true;
    for (int m = 0; m < marks_per_block; ++m)
      if (valid(b, m) && (critical < 0 || at(b, m).global_ns > critical_end))
        critical = b, critical_end = at(b, m).global_ns;
  }
  if (!any_wait) return out;
  out.present = true;
  out.end_ns = critical_end;
  out.blocks.assign(marks_per_block, 0);
  out.first_us.assign(marks_per_block, kNaN);
  out.last_us.assign(marks_per_block, kNaN);
  out.critical_us.assign(marks_per_block, kNaN);
  out.critical_cycles.assign(marks_per_block, kNaN);
  for (int m = 0; m < marks_per_block; ++m) {
    uint64_t first = 0, last = 0;
    for (int b = 0; b < blocks; ++b) {
      if (!in_launch(b) || !valid(b, m)) continue;
      const uint64_t ns = at(b, m).global_ns;
      if (out.blocks[m]++ == 0 || ns < first) first = ns;
      last = std::max(last, ns);
    }
    if (out.blocks[m] == 0) continue;
    out.first_us[m] = us_between(out.t0_ns, first);
    out.last_us[m] = us_between(out.t0_ns, last);
  }
  int previous = -1;
  for (int m = 0; m < marks_per_block; ++m) {
    if (!valid(critical, m)) continue;
    out.critical_us[m] = us_between(out.t0_ns, at(critical, m).global_ns);
    if (previous >= 0)
      out.critical_cycles[m] = static_cast<double>(at(critical, m).clock - at(critical, previous).clock);
    previous = m;
  }
  return out;
}

void PhaseAccumulator::add_step(const std::vector<Kernel>& kernels) {
  ++steps_;
  if (!kernels.empty() &&
      std::all_of(kernels.begin(), kernels.end(), [](const Kernel& k) { return k.phases.present; })) {
    chain_name_ = kernels.front().name + " -> " + kernels.back().name;
    chain_.push_back(us_between(kernels.front().phases.t0_ns, kernels.back().phases.end_ns));
  }
  const Kernel* previous = nullptr;
  for (const Kernel& k : kernels) {
    if (!k.phases.present) {
      previous = nullptr;
      continue;
    }
    auto [it, inserted] = kernels_.try_emplace(k.name);
    Samples& s = it->second;
    if (inserted) {
      order_.push_back(k.name);
      s.mark_names = k.mark_names;
      const size_t n = k.phases.blocks.size();
      s.blocks.resize(n), s.first.resize(n), s.last.resize(n), s.critical.resize(n), s.cycles.resize(n);
    }
    for (size_t m = 0; m < s.blocks.size() && m < k.phases.blocks.size(); ++m) {
      s.blocks[m].push_back(k.phases.blocks[m]);
      s.first[m].push_back(k.phases.first_us[m]);
      s.last[m].push_back(k.phases.last_us[m]);
      s.critical[m].push_back(k.phases.critical_us[m]);
      s.cycles[m].push_back(k.phases.critical_cycles[m]);
    }
    s.launch_blocks.push_back(k.phases.launch_blocks);
    s.grid_blocks.push_back(k.phases.grid_blocks);
    if (previous != nullptr) {
      const std::string gap = previous->name + " -> " + k.name;
      if (!gaps_.count(gap)) gap_order_.push_back(gap);
      gaps_[gap].push_back(us_between(previous->phases.end_ns, k.phases.t0_ns));
    }
    previous = &k;
  }
}

void PhaseAccumulator::report(std::ostream& out, const std::string& launches) const {
  char line[256];
  out << "phase marks: medians over " << steps_ << " decode steps of " << launches
      << "; us from the launch's first PDL wait return\n";
  for (const std::string& name : order_) {
    const Samples& s = kernels_.at(name);
    const double recorded = median_present(s.launch_blocks), grid = median_present(s.grid_blocks);
    out << "  " << name << " (" << grid << " blocks in the launch";
    if (recorded != grid) out << ", " << recorded << " recorded: the block that ended last may be missing";
    out << ")\n";
    std::snprintf(line, sizeof line, "    %-34s %7s %9s %9s %11s %11s\n", "mark", "blocks", "first us",
                  "last us", "critical us", "cycles");
    out << line;
    for (size_t m = 0; m < s.blocks.size(); ++m) {
      const double blocks = median_present(s.blocks[m]);
      if (!(blocks > 0)) continue;
      const std::string mark = m < s.mark_names.size() ? s.mark_names[m] : std::to_string(m);
      std::snprintf(line, sizeof line, "    %-34s %7s %9s %9s %11s %11s\n", mark.c_str(),
                    cell(blocks, "%.0f").c_str(), cell(median_present(s.first[m]), "%.2f").c_str(),
                    cell(median_present(s.last[m]), "%.2f").c_str(),
                    cell(median_present(s.critical[m]), "%.2f").c_str(),
                    cell(median_present(s.cycles[m]), "%.0f").c_str());
      out << line;
    }
  }
  for (const std::string& gap : gap_order_) {
    std::snprintf(line, sizeof line, "  gap %s: %.2f us (last block's last mark -> first PDL wait return)\n",
                  gap.c_str(), median_present(gaps_.at(gap)));
    out << line;
  }
  if (!chain_.empty()) {
    std::snprintf(line, sizeof line,
                  "  chain %s: %.2f us (first PDL wait return -> last block's last mark; %zu steps)\n",
                  chain_name_.c_str(), median_present(chain_), chain_.size());
    out << line;
  }
}

}  // namespace tpserve::bench
