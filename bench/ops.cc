// bench/ops: the decode-critical ops of the CUDA backend on Qwen3-30B-A3B shapes (hidden 2048, 32 q heads /
// 4 KV heads x 128, 128 experts top-8, moe_intermediate 768, vocabulary 151936), each against the HBM read
// bandwidth measured in the same run. Inputs are rotated over copies several times larger than L2 so that
// every run reads from HBM; a spin kernel holds the GPU while the host queues all runs, and CUDA events
// around each run (and each chain of 20 runs: the GEMVs, the MoE, decode attention) give the median and the
// minimum. GB/s counts the bytes an op must read (weights, KV).
//
//   ops [--reps N] [--device D] [--json out.json] [--only moe,...] [--set runtime.<switch>=<value> ...]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_kernels.h"
#include "bench/common/sample_stats.h"
#include "bench/common/tool_main.h"
#include "common/cuda_check.h"
#include "kernels/gemv.h"
#include "runtime/backend/cuda/cublaslt_gemm.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda_kernel_switches.h"
#include "runtime/config/config_parser.h"

namespace tpserve::bench {
namespace {

constexpr int kHidden = 2048, kQHeads = 32, kKvHeads = 4, kHeadDim = 128, kExperts = 128, kTopK = 8;
constexpr int kMoeInter = 768, kVocab = 151936, kBlockSize = 16;

struct Result {
  std::string name;
  double median_us = 0, min_us = 0, bytes = 0;
  double gbps() const { return bytes / (median_us * 1e3); }
};

class Bench {
 public:
  Bench(CudaBackend& backend, int reps) : be_(backend), reps_(reps) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, backend.device_index()));
    l2_bytes_ = static_cast<size_t>(prop.l2CacheSize);
  }

  // Copies of `bytes` bytes needed so that rotating over them reads about 4x L2 between reuses.
  int copies_for(size_t bytes) const {
    return static_cast<int>(std::clamp<size_t>((4 * l2_bytes_ + bytes - 1) / bytes, 1, 16));
  }

  Tensor random_bf16(std::initializer_list<int64_t> shape, uint64_t seed) {
    Tensor t = be_.alloc(DType::kBF16, shape);
    launch_fill_bf16(be_.launch_policy(), be_.stream(), t.data, t.nbytes(), seed);
    return t;
  }
  template <typename T>
  Tensor upload(DType dtype, std::initializer_list<int64_t> shape, const std::vector<T>& values) {
    Tensor t = be_.alloc(dtype, shape);
    be_.copy_from_host(t, values.data());
    return t;
  }

  // Median and minimum of the time of run(i): `reps` runs, each between two events (chain = 1); or chains of
  // `chain` runs back to back between two events, the time per run (a launch's tail overlaps the next one's
  // start, PDL included, as in a decode step), over max(5, reps / chain) chains.
  Result time(const std::string& name, double bytes, const std::function<void(int)>& run, int chain = 1) {
    for (int i = 0; i < 3; ++i) run(i);
    const int chains = chain == 1 ? reps_ : std::max(5, reps_ / chain);
    std::vector<cudaEvent_t> events(2 * chains);
    for (auto& e : events) CUDA_CHECK(cudaEventCreate(&e));
    launch_spin(be_.launch_policy(), be_.stream(),
                static_cast<long long>(chains) * chain * 50 * 1000);  // ~50 us a run
    for (int c = 0; c < chains; ++c) {
      CUDA_CHECK(cudaEventRecord(events[2 * c], be_.stream()));
      for (int i = 0; i < chain; ++i) run(c * chain + i);
      CUDA_CHECK(cudaEventRecord(events[2 * c + 1], be_.stream()));
    }
    be_.synchronize();
    std::vector<double> us(chains);
    for (int c = 0; c < chains; ++c) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * c], events[2 * c + 1]));
      us[c] = ms * 1e3 / chain;
    }
    for (auto& e : events) CUDA_CHECK(cudaEventDestroy(e));
    // median() of an even count: the mean of the middle two (the upper one was taken before).
    Result r{name, tpserve::bench::median(us), *std::min_element(us.begin(), us.end()), bytes};
    std::fprintf(stderr, "  %-44s %9.2f us\n", name.c_str(), r.median_us);
    results_.push_back(r);
    return r;
  }

  CudaBackend& backend() { return be_; }
  const std::vector<Result>& results() const { return results_; }

 private:
  CudaBackend& be_;
  int reps_;
  size_t l2_bytes_ = 0;
  std::vector<Result> results_;
};

double measure_bandwidth(Bench& b) {
  CudaBackend& be = b.backend();
  const int64_t bytes = int64_t(4) << 30;
  Tensor data = b.random_bf16({bytes / 2}, 1);
  Tensor partial = be.alloc(DType::kF32, {be.num_sms() * 4});
  const Result r = b.time("hbm read (reduce 4 GiB)", double(bytes), [&](int) {
    launch_read_reduce(be.launch_policy(), be.stream(), data.data, size_t(bytes), partial.ptr<float>(),
                       be.num_sms() * 4);
  });
  return r.gbps();
}

// The GEMV `gp` (its weights rotating over the copies `w`) with `options`, alone and chained 20 in a row:
// "linear <shape> (<kernel>)" and "linear <shape> (<kernel>, x20)".
void time_gemv(Bench& b, const std::string& shape, const std::string& kernel, double bytes,
               const kernels::GemvParams& gp, const std::vector<Tensor>& w,
               const kernels::GemvLaunchOptions& options) {
  CudaBackend& be = b.backend();
  auto run = [&](int i) {
    kernels::GemvParams q = gp;
    q.w = static_cast<const kernels::bf16*>(w[i % w.size()].data);
    kernels::launch_gemv(q, be.stream(), be.launch_policy(), options);
  };
  b.time("linear " + shape + " (" + kernel + ")", bytes, run);
  b.time("linear " + shape + " (" + kernel + ", x20)", bytes, run, 20);
}

void bench_projections(Bench& b) {
  CudaBackend& be = b.backend();
  Tensor gemm_ws = be.alloc(DType::kU8, {int64_t(32) << 20});
  CublasLtGemm cublas(gemm_ws.data, size_t(32) << 20);
  struct Proj {
    const char* name;
    int n, k;
    bool f32_out;
  };
  for (const Proj& p : {Proj{"qkv 2048->5120", (kQHeads + 2 * kKvHeads) * kHeadDim, kHidden, false},
                        Proj{"o 4096->2048", kHidden, kQHeads * kHeadDim, false},
                        Proj{"lm_head 2048->151936", kVocab, kHidden, true}}) {
    const size_t w_bytes = size_t(p.n) * p.k * 2;
    const int copies = b.copies_for(w_bytes);
    std::vector<Tensor> w;
    for (int c = 0; c < copies; ++c) w.push_back(b.random_bf16({p.n, p.k}, 100 + c));
    for (int m : {1, 8, 16}) {
      Tensor x = b.random_bf16({m, p.k}, 7);
      Tensor out = be.alloc(p.f32_out ? DType::kF32 : DType::kBF16, {m, p.n});
      const double bytes = double(w_bytes) + 2.0 * m * p.k + double(out.nbytes());
      const std::string shape = std::string(p.name) + " M=" + std::to_string(m);
      kernels::GemvParams gp;
      gp.x = static_cast<const kernels::bf16*>(x.data);
      gp.w = static_cast<const kernels::bf16*>(w[0].data);
      if (p.f32_out)
        gp.out_f32 = out.ptr<float>();
      else
        gp.out_bf16 = static_cast<kernels::bf16*>(out.data);
      gp.m = m, gp.n = p.n, gp.k = p.k;
      // The two GEMV kernels: staged (weights in shared memory, where they fit; else it is the other) and
      // register-pipelined; each alone and chained 20 in a row. Staged as the backend stages (its options).
      for (const auto& [label, options] : {std::pair{"gemv staged", be.gemv_launch_options()},
                                           std::pair{"gemv", kernels::GemvLaunchOptions{}}})
        time_gemv(b, shape, label, bytes, gp, w, options);
      b.time("linear " + shape + " (cublasLt)", bytes, [&](int i) {
        cublas.run(x.data, w[i % copies].data, out.data, p.f32_out, m, p.n, p.k, be.stream());
      });
    }
  }
}

// The staged GEMV at K = hidden and M = 1 for other row counts N (--gemv-rows): whether its time follows
// the weight bytes in all or the most each SM holds (ceil(N / 16) row tiles over the SMs).
void bench_gemv_rows(Bench& b, const std::vector<int>& rows) {
  CudaBackend& be = b.backend();
  for (int n : rows) {
    const size_t w_bytes = size_t(n) * kHidden * 2;
    const int copies = b.copies_for(w_bytes);
    std::vector<Tensor> w;
    for (int c = 0; c < copies; ++c) w.push_back(b.random_bf16({n, kHidden}, 300 + c));
    Tensor x = b.random_bf16({1, kHidden}, 8);
    Tensor out = be.alloc(DType::kBF16, {1, n});
    kernels::GemvParams gp;
    gp.x = static_cast<const kernels::bf16*>(x.data);
    gp.out_bf16 = static_cast<kernels::bf16*>(out.data);
    gp.m = 1, gp.n = n, gp.k = kHidden;
    const double bytes = double(w_bytes) + 2.0 * kHidden + double(out.nbytes());
    // launch_gemv takes the register kernel where the staged one cannot hold the shape: named as it runs.
    kernels::GemvStagedPlan plan;
    const bool staged = kernels::plan_gemv_staged(gp, be.gemv_launch_options(), plan);
    time_gemv(b, "2048->" + std::to_string(n) + " M=1", staged ? "gemv staged" : "gemv, not staged", bytes,
              gp, w, be.gemv_launch_options());
  }
}

void bench_moe(Bench& b) {
  CudaBackend& be = b.backend();
  Tensor gate_up = b.random_bf16({kExperts, 2 * kMoeInter, kHidden}, 11);
  Tensor down = b.random_bf16({kExperts, kHidden, kMoeInter}, 12);
  const double expert_bytes = 3.0 * kMoeInter * kHidden * 2;
  std::mt19937 rng(3);
  constexpr int kRoutings = 32;
  for (int tokens : {1, 8, 16}) {
    // Routings rotate so that consecutive runs read (mostly) different experts.
    std::vector<Tensor> ids;
    double distinct = 0;
    std::vector<int> order(kExperts);
    for (int r = 0; r < kRoutings; ++r) {
      std::vector<int32_t> v;
      std::vector<bool> used(kExperts, false);
      for (int t = 0; t < tokens; ++t) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int j = 0; j < kTopK; ++j) v.push_back(order[j]), used[order[j]] = true;
      }
      distinct += std::count(used.begin(), used.end(), true);
      ids.push_back(b.upload(DType::kI32, {tokens, kTopK}, v));
    }
    distinct /= kRoutings;
    Tensor weights =
        b.upload(DType::kF32, {tokens, kTopK}, std::vector<float>(size_t(tokens) * kTopK, 0.125f));
    Tensor x = b.random_bf16({tokens, kHidden}, 13), out = be.alloc(DType::kBF16, {tokens, kHidden});
    // Alone, and chained 20 in a row as in a decode step (each launch's start overlapping the one before).
    const std::string name = "moe_experts T=" + std::to_string(tokens) + " (E 128, k 8, I 768";
    auto run = [&](int i) { be.moe_experts(x, gate_up, down, ids[i % kRoutings], weights, 0, out); };
    b.time(name + ")", distinct * expert_bytes, run);
    b.time(name + ", x20)", distinct * expert_bytes, run, 20);
  }
}

// kernel: the name of the decode attention kernel the backend takes (runtime.attention_tensor_cores); S
// sequences of one token each for S in seq_counts, each at every context.
void bench_decode_attention(Bench& b, const std::string& kernel, const std::vector<int>& seq_counts) {
  CudaBackend& be = b.backend();
  for (int seqs : seq_counts) {
    for (int ctx : {4096, 8192, 16384, 32768}) {
      const int blocks_per_seq = ctx / kBlockSize, blocks = seqs * blocks_per_seq;
      const size_t kv_bytes = size_t(blocks) * kBlockSize * kKvHeads * kHeadDim * 2 * 2;
      const int copies = b.copies_for(kv_bytes);
      std::vector<KvCacheLayer> caches;
      for (int c = 0; c < copies; ++c) {
        const Tensor k = b.random_bf16({blocks, kBlockSize, kKvHeads, kHeadDim}, 200 + c);
        const Tensor v = b.random_bf16({blocks, kBlockSize, kKvHeads, kHeadDim}, 300 + c);
        caches.push_back({k, v});
      }
      std::vector<int32_t> table(static_cast<size_t>(blocks)), starts(seqs + 1), positions(seqs, ctx - 1);
      std::vector<int32_t> lens(seqs, ctx);
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(ctx + seqs));
      std::iota(starts.begin(), starts.end(), 0);
      AttentionMeta meta;
      meta.positions = b.upload(DType::kI32, {seqs}, positions);
      meta.slot_mapping = meta.positions;
      meta.query_start = b.upload(DType::kI32, {seqs + 1}, starts);
      meta.context_lens = b.upload(DType::kI32, {seqs}, lens);
      meta.block_tables = b.upload(DType::kI32, {seqs, blocks_per_seq}, table);
      meta.num_seqs = seqs, meta.max_query_len = 1, meta.max_context_len = ctx;
      Tensor q = b.random_bf16({seqs, kQHeads * kHeadDim}, 17),
             out = be.alloc(DType::kBF16, {seqs, kQHeads * kHeadDim});
      // Alone, and chained 20 in a row as in a decode step.
      const std::string name =
          "decode attention S=" + std::to_string(seqs) + " ctx=" + std::to_string(ctx) + " (" + kernel;
      auto run = [&](int i) { be.attention(q, kQHeads, kKvHeads, 0.088f, caches[i % copies], meta, out); };
      b.time(name + ")", double(kv_bytes), run);
      b.time(name + ", x20)", double(kv_bytes), run, 20);
    }
  }
}

// The kernel switches with the --set overrides ("runtime.<switch>=<value>") applied, parsed and checked as
// the config parses them (docs/config.md); other keys are refused, since only the switches reach the backend.
CudaKernelSwitches kernel_switches(const std::vector<std::string>& sets) {
  const CudaKernelSwitches defaults;
  std::vector<std::string> names;
  for_each_kernel_switch(defaults, [&](const char* name, auto&&...) { names.push_back(name); });
  for (const std::string& spec : sets) {
    const std::string key = spec.substr(0, spec.find('='));
    TPS_CHECK(
        key.rfind("runtime.", 0) == 0 && std::find(names.begin(), names.end(), key.substr(8)) != names.end(),
        "--set / --attention-variant ", spec, ": expected runtime.<kernel switch>=<value> (docs/config.md)");
  }
  return parse_config("model: {synthetic: {preset: tiny}}\n", "ops --set", sets).runtime.kernels;
}

void write_json(const std::string& path, double bandwidth_gbps, const std::vector<Result>& results) {
  std::ofstream f(path);
  TPS_CHECK(f.good(), "cannot write ", path);
  f << "{\n  \"hbm_read_gbps\": " << bandwidth_gbps << ",\n  \"ops\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    f << "    {\"name\": \"" << r.name << "\", \"median_us\": " << r.median_us << ", \"min_us\": " << r.min_us
      << ", \"bytes\": " << r.bytes << ", \"gbps\": " << r.gbps()
      << ", \"fraction_of_hbm\": " << r.gbps() / bandwidth_gbps << "}" << (i + 1 < results.size() ? "," : "")
      << "\n";
  }
  f << "  ]\n}\n";
}

// A comma-separated list of ints, each within [lo, hi].
void add_int_list(CLI::App& app, const std::string& name, std::vector<int>& values, const std::string& help,
                  int lo, int hi) {
  app.add_option(name, values, help)->delimiter(',')->check(CLI::Range(lo, hi));
}

int run(int argc, char** argv) {
  CLI::App app{"CUDA op benchmark on Qwen3-30B-A3B shapes"};
  int reps = 100, device = 0;
  std::string json;
  app.add_option("--reps", reps, "timed runs per op (median reported)")->check(CLI::Range(5, 100000));
  app.add_option("--device", device, "CUDA device index");
  app.add_option("--json", json, "write the results as JSON to this file");
  std::vector<std::string> only;
  app.add_option("--only", only, "run only these groups of ops (the HBM read is always measured)")
      ->delimiter(',')
      ->check(CLI::IsMember({"projections", "moe", "attention"}));
  std::vector<int> one_level_maxes;
  add_int_list(app, "--attention-merge-one-level-max", one_level_maxes,
               "decode attention on tensor cores again with each of these "
               "runtime.attention_merge_one_level_max values (a backend each)",
               8, 128);
  std::vector<int> split_growths;
  add_int_list(app, "--attention-split-growth", split_growths,
               "decode attention on tensor cores again with each of these runtime.attention_split_growth "
               "values (a backend each)",
               0, 4096);
  std::vector<std::string> variants;
  app.add_option(
      "--attention-variant", variants,
      "decode attention on tensor cores again on a backend with these switches set on top of --set: "
      "runtime.<kernel switch>=<value>, several joined by '+' (repeatable: a backend each)");
  std::vector<int> attention_seqs{1, 8};
  add_int_list(app, "--attention-seqs", attention_seqs,
               "decode attention with this many sequences of one token each (every context: 4k-32k; the K/V "
               "cache of one copy is S x 8 MB at 4k, S x 64 MB at 32k)",
               1, 64);
  std::vector<int> gemv_rows;
  add_int_list(
      app, "--gemv-rows", gemv_rows,
      "the staged GEMV at K = 2048, M = 1 with each of these row counts N as well (alone and chained "
      "20 in a row)",
      16, 65536);
  std::vector<std::string> sets;
  app.add_option("--set", sets,
                 "runtime.<kernel switch>=<value> for every backend of the run (docs/config.md)");
  CLI11_PARSE(app, argc, argv);

  CudaBackendOptions options;
  options.device = device;
  options.kernels = kernel_switches(sets);
  // Each --attention-variant's switches, checked before anything runs.
  std::vector<CudaKernelSwitches> variant_switches;
  for (const std::string& variant : variants) {
    std::vector<std::string> variant_sets = sets;
    for (size_t begin = 0; begin <= variant.size();) {
      const size_t end = std::min(variant.find('+', begin), variant.size());
      variant_sets.push_back(variant.substr(begin, end - begin));
      begin = end + 1;
    }
    variant_switches.push_back(kernel_switches(variant_sets));
  }
  // The attention rows' caches stay allocated until the backend goes: S x 120 MB over the four contexts,
  // and up to 1.2 GB of copies for the small ones (copies_for), for each S.
  size_t attention_bytes = 0;
  for (int seqs : attention_seqs) attention_bytes += size_t(seqs) * (size_t(128) << 20) + (size_t(5) << 28);
  options.arena_bytes = (size_t(12) << 30) + attention_bytes;
  options.pdl.kill_switch = kernels::pdl_kill_switch_from_env();
  auto backend = make_cuda_backend(options);
  Bench b(*backend, reps);
  const double bandwidth = measure_bandwidth(b);
  auto wanted = [&](const std::string& group) {
    return only.empty() || std::find(only.begin(), only.end(), group) != only.end();
  };
  if (wanted("projections")) bench_projections(b);
  if (!gemv_rows.empty()) bench_gemv_rows(b, gemv_rows);
  if (wanted("moe")) bench_moe(b);
  if (wanted("attention")) bench_decode_attention(b, "tensor cores", attention_seqs);
  std::vector<Result> results = b.results();
  // Other attention kernels and splits, each on a backend of its own (they are backend options).
  auto bench_attention_variant = [&](const std::string& label, auto&& set_option) {
    CudaBackendOptions variant = options;
    variant.arena_bytes = (size_t(1) << 30) + attention_bytes;
    set_option(variant.kernels);
    auto other = make_cuda_backend(variant);
    Bench b2(*other, reps);
    bench_decode_attention(b2, label, attention_seqs);
    results.insert(results.end(), b2.results().begin(), b2.results().end());
  };
  if (wanted("attention"))
    bench_attention_variant("CUDA cores", [](CudaKernelSwitches& k) { k.attention_tensor_cores = false; });
  for (int one_level_max : one_level_maxes)
    bench_attention_variant("tensor cores, one-level merge up to " + std::to_string(one_level_max),
                            [&](CudaKernelSwitches& k) { k.attention_merge_one_level_max = one_level_max; });
  for (size_t i = 0; i < variants.size(); ++i)
    bench_attention_variant("tensor cores, " + variants[i],
                            [&](CudaKernelSwitches& k) { k = variant_switches[i]; });
  for (int growth : split_growths)
    bench_attention_variant("tensor cores, split growth " + std::to_string(growth),
                            [&](CudaKernelSwitches& k) { k.attention_split_growth = growth; });

  std::printf("%-46s %10s %10s %10s %8s\n", "op", "median us", "min us", "GB/s", "% HBM");
  for (const Result& r : results)
    std::printf("%-46s %10.2f %10.2f %10.1f %7.1f%%\n", r.name.c_str(), r.median_us, r.min_us, r.gbps(),
                100.0 * r.gbps() / bandwidth);
  std::printf("HBM read bandwidth measured: %.1f GB/s\n", bandwidth);
  if (!json.empty()) write_json(json, bandwidth, results);
  return 0;
}

}  // namespace
}  // namespace tpserve::bench

int main(int argc, char** argv) {
  return tpserve::bench::tool_main("ops", [&] { return tpserve::bench::run(argc, argv); });
}
