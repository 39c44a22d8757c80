// headroom bench: prompt processing and generation speed like llama-bench, through the scheduler
// that run and serve use (a depth is a cached prefix), plus for generation
// the bytes read per token, the bandwidth that achieves, and its share of this machine's memory
// bandwidth measured in the same run — or, when far below it, why: the kernels' ceiling with
// the weights in cache tells compute-bound decode from per-step overhead.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands.h"
#include "engine/measure.h"
#include "generation.h"
#include "kernels/cpu/matmul.h"
#include "kv/cache.h"
#include "plan/devices.h"
#include "plan/inventory.h"
#include "plan_flags.h"
#include "util/units.h"

namespace cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Stat {
  double mean = 0, sd = 0;
};

Stat stat_of(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x / v.size();
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / (v.size() - 1)) : 0;
  return s;
}

double cpu_ghz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0)
      return std::atof(line.substr(line.find(':') + 1).c_str()) / 1e3;
  }
  return 0;
}

// 2 × the weights one decoded token multiplies (gathered tables count their looked-up rows).
double flops_per_token(const gguf::File& file, const model::Spec& spec) {
  double flops = 0;
  for (const auto& w : plan::inventory(file, spec).weights) {
    if (!w.used || w.bytes == 0) continue;
    const auto* t = file.find_tensor(w.name);
    flops += 2 * static_cast<double>(t->n_elements) * static_cast<double>(w.bytes_per_token) /
             static_cast<double>(w.bytes);
  }
  return flops;
}

std::vector<int> parse_depths(const std::string& text) {
  std::vector<int> depths;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) depths.push_back(std::atoi(item.c_str()));
  return depths;
}

struct Options {
  PlanFlags plan;
  int n_prompt = 512, n_gen = 128, reps = 5;
  std::string depths = "0";
  bool json = false;
  bool oracle_drafts = false;
};

// What the model reads and computes per token, and the bandwidth it is measured against.
struct Machine {
  int threads = 0;
  bool on_gpu = false;
  double bandwidth = 0;  // bytes/s
  const char* bandwidth_label = "";
  double flops = 0;  // per token
};

// The pp and tg tests at each depth, through the scheduler: the depth is a cached prefix.
util::Result<nlohmann::json> run_tests(engine::Engine& e, const Options& o,
                                       const std::vector<int>& depths, const Machine& m,
                                       const std::string& adapter) {
  const plan::Plan& plan = e.plan();
  std::mt19937 rng(42);
  // Warm-up, untimed (as llama-bench): the first pass faults the weights into memory.
  HR_TRY(engine::prefill_only(
      e, engine::random_tokens(e, std::min(std::max(o.n_prompt, 1), e.n_ctx()), rng), adapter));
  const auto layers = model::kv_layers(e.spec());
  nlohmann::json results = nlohmann::json::array();
  for (int depth : depths) {
    const auto prefix = engine::random_tokens(e, depth, rng);
    if (o.n_prompt > 0) {
      std::vector<double> rates;
      for (int r = 0; r < o.reps; ++r) {
        HR_ASSIGN_OR_RETURN(auto t, engine::prompt_throughput(e, prefix, o.n_prompt, rng, adapter));
        rates.push_back(t.tokens_per_second);
      }
      const Stat st = stat_of(rates);
      results.push_back({{"test", fmt::format("pp{}", o.n_prompt)},
                         {"depth", depth},
                         {"tokens_per_second", st.mean},
                         {"sd", st.sd},
                         {"achieved_gflops", st.mean * m.flops / 1e9}});
    }
    if (o.n_gen > 0) {
      // With --draft, the same generation without drafts and with them, interleaved.
      std::vector<engine::Drafts> kinds = {engine::Drafts::kNone};
      if (plan.request.n_draft > 0) kinds.push_back(engine::Drafts::kEngine);
      if (o.oracle_drafts) kinds.push_back(engine::Drafts::kOracle);
      std::vector<std::vector<double>> rates(kinds.size());
      std::vector<engine::Throughput> drafts(kinds.size());
      for (int r = 0; r < o.reps; ++r) {
        for (size_t k = 0; k < kinds.size(); ++k) {
          HR_ASSIGN_OR_RETURN(
              auto t, engine::generation_throughput(e, prefix, o.n_gen, rng, adapter, kinds[k]));
          rates[k].push_back(t.tokens_per_second);
          drafts[k].n_drafted += t.n_drafted;
          drafts[k].n_accepted += t.n_accepted;
        }
      }
      // Bytes per token at this depth (the middle of the generated run): weights + KV read.
      const int mid = depth + o.n_gen / 2;
      const double bytes =
          static_cast<double>(plan.prediction.bytes_per_token) +
          static_cast<double>(kv::read_bytes_per_token(layers, plan.kv_config, mid)) -
          static_cast<double>(kv::read_bytes_per_token(layers, plan.kv_config, 0));
      for (size_t k = 0; k < kinds.size(); ++k) {
        const Stat st = stat_of(rates[k]);
        nlohmann::json row = {{"test", fmt::format("tg{}", o.n_gen)},
                              {"depth", depth},
                              {"tokens_per_second", st.mean},
                              {"sd", st.sd},
                              {"bytes_per_token", bytes},
                              {"achieved_gbps", st.mean * bytes / 1e9},
                              {"bandwidth_share", st.mean * bytes / m.bandwidth},
                              {"achieved_gflops", st.mean * m.flops / 1e9}};
        if (kinds[k] != engine::Drafts::kNone) {
          row["drafts"] = kinds[k] == engine::Drafts::kOracle ? "oracle"
                          : e.assistant() != nullptr          ? "assistant"
                          : e.draft_model() != nullptr        ? "draft-model"
                                                              : "lookup";
          row["drafted"] = drafts[k].n_drafted;
          row["accepted"] = drafts[k].n_accepted;
          // What making a draft costs, beside what a step of the plain run took.
          if (kinds[k] == engine::Drafts::kEngine && e.drafter_pass_seconds() > 0)
            row["drafter_pass_ms"] = 1e3 * e.drafter_pass_seconds();
        }
        results.push_back(row);
      }
    }
  }
  return results;
}

// The matmul kernels alone on the CPU: each weight type's decode rate with its rows in cache
// (the compute ceiling) or streaming from memory, weighted by the bytes of that type a token
// reads. Not measured (0) for a type decoded through f32 rows.
struct KernelRates {
  nlohmann::json gbps = nlohmann::json::object();  // per type
  double mix_gbps = 0, tokens_per_second = 0;
};

KernelRates kernel_rates(const engine::Engine& e, int threads, kernels::cpu::Residence where) {
  KernelRates k;
  std::map<tensor::DType, double> bytes_by_type;
  for (const auto& w : plan::inventory(e.file(), e.spec()).weights)
    if (w.bytes_per_token > 0) bytes_by_type[w.type] += static_cast<double>(w.bytes_per_token);
  util::ThreadPool pool(threads);
  double seconds = 0, weight_bytes = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    const double rate = kernels::cpu::decode_rate(type, where, pool);
    if (rate <= 0) return KernelRates{};
    k.gbps[std::string(tensor::dtype_name(type))] = rate / 1e9;
    seconds += bytes / rate;
    weight_bytes += bytes;
  }
  k.tokens_per_second = 1 / seconds;
  k.mix_gbps = weight_bytes / seconds / 1e9;
  return k;
}

// Peak 8-bit multiply-adds per cycle and core: two 256-bit (AVX2) or 512-bit units, 32 or 64
// lanes each.
double int8_macs_per_cycle() {
  const kernels::cpu::Isa isa = kernels::cpu::cpu_isa();
  return isa >= kernels::cpu::Isa::kAvx512 ? 128 : isa == kernels::cpu::Isa::kAvx2 ? 64 : 4;
}

void print_table(const nlohmann::json& doc, const Machine& m) {
  std::printf("model %s (%s), %s; %s: %.1f GB/s\n\n", doc["model"].get<std::string>().c_str(),
              util::format_bytes(doc["model_bytes"].get<uint64_t>()).c_str(),
              doc["kernels"].get<std::string>().c_str(), m.bandwidth_label, m.bandwidth / 1e9);
  std::printf("| %-8s | %7s | %18s | %12s | %12s | %10s |\n", "test", "depth", "tok/s",
              "bytes/token", "GB/s", "roofline");
  std::printf(
      "|----------|---------|--------------------|--------------|--------------|------------|\n");
  for (const auto& r : doc["results"]) {
    if (r.contains("drafts")) continue;  // below the table
    const std::string rate =
        fmt::format("{:.2f} ± {:.2f}", r["tokens_per_second"].get<double>(), r["sd"].get<double>());
    if (r.contains("bytes_per_token")) {
      std::printf("| %-8s | %7d | %18s | %12s | %12.2f | %9.0f%% |\n",
                  r["test"].get<std::string>().c_str(), r["depth"].get<int>(), rate.c_str(),
                  util::format_bytes(r["bytes_per_token"].get<double>()).c_str(),
                  r["achieved_gbps"].get<double>(), 100 * r["bandwidth_share"].get<double>());
    } else {
      std::printf("| %-8s | %7d | %18s | %12s | %12s | %10s |\n",
                  r["test"].get<std::string>().c_str(), r["depth"].get<int>(), rate.c_str(), "-",
                  "-", "-");
    }
  }
  // Speculative decoding: each drafted run against the same test without drafts.
  const nlohmann::json* plain = nullptr;
  for (const auto& r : doc["results"]) {
    if (!r.contains("drafts")) {
      plain = &r;
      continue;
    }
    const int drafted = r["drafted"].get<int>(), accepted = r["accepted"].get<int>();
    std::printf(
        "\n%s at depth %d with %s drafts (up to %d a step): %.2f ± %.2f tok/s, %.2f× without; "
        "%d of %d drafted tokens kept (%.0f%%)",
        r["test"].get<std::string>().c_str(), r["depth"].get<int>(),
        r["drafts"] == "oracle"        ? "always-right"
        : r["drafts"] == "assistant"   ? "assistant-model"
        : r["drafts"] == "draft-model" ? "draft-model"
                                       : "prompt-lookup",
        doc["draft"].get<int>(), r["tokens_per_second"].get<double>(), r["sd"].get<double>(),
        r["tokens_per_second"].get<double>() / (*plain)["tokens_per_second"].get<double>(),
        accepted, drafted, drafted > 0 ? 100.0 * accepted / drafted : 0.0);
    if (r.contains("drafter_pass_ms")) {
      std::printf("; a drafter pass %.2f ms, a step without drafts %.2f ms",
                  r["drafter_pass_ms"].get<double>(),
                  1e3 / (*plain)["tokens_per_second"].get<double>());
    }
  }
  if (doc["draft"].get<int>() > 0) std::printf("\n");
}

// Per-type rates, e.g. "Q4_K 52.1, Q6_K 47.9 GB/s".
std::string per_type(const KernelRates& k) {
  std::string text;
  for (const auto& [type, gbps] : k.gbps.items())
    text += fmt::format("{}{} {:.1f}", text.empty() ? "" : ", ", type, gbps.get<double>());
  return text + " GB/s";
}

// What bounds one tg result: the bandwidth roofline, or — with the figures that show it — the
// kernels' compute, their streaming, or the rest of the step.
void print_verdict(const nlohmann::json& r, const Machine& m, const KernelRates& in_cache,
                   const KernelRates& from_memory, double ghz, double peak_gops) {
  const std::string test = r["test"].get<std::string>();
  const int depth = r["depth"].get<int>();
  const double share = r["bandwidth_share"].get<double>(),
               gops = r["achieved_gflops"].get<double>(),
               tps = r["tokens_per_second"].get<double>(), roofline_tps = tps / share;
  const double compute_tps = in_cache.tokens_per_second;
  std::printf("\n%s at depth %d: ", test.c_str(), depth);
  if (share >= 0.7) {
    std::printf("bandwidth-bound, %.0f%% of the roofline — the speed this machine allows.\n",
                100 * share);
    return;
  }
  if (m.on_gpu) {
    std::printf(
        "%.0f%% of the GPU's bandwidth roofline — the CUDA kernels fall short of it "
        "(docs/cuda.md: latency-bound small kernels — decode attention, one-block norms and "
        "top-k — and quantized matvecs below the copy rate).\n",
        100 * share);
    return;
  }
  const std::string integer_work = fmt::format(
      "Integer work: {:.1f} GOP/s achieved (2 per weight per token) against a multiply-add "
      "peak of ~{:.0f} GOP/s ({} threads × {:.2f} GHz × {:.0f} 8-bit multiply-adds per cycle "
      "× 2)",
      gops, peak_gops, m.threads, ghz, int8_macs_per_cycle());
  std::printf("%.0f%% of the bandwidth roofline (%.1f tok/s at %.1f GB/s).", 100 * share,
              roofline_tps, m.bandwidth / 1e9);
  if (compute_tps <= 0 || from_memory.tokens_per_second <= 0) {
    std::printf(" %s.\n", integer_work.c_str());
    return;
  }
  // Three ceilings, lowest first to blame: the kernels from cache (compute), the kernels
  // streaming from memory (their memory-level parallelism), the whole step (overhead).
  const double matmul_tps = from_memory.tokens_per_second;
  std::printf(
      " The matmul kernels alone would run at %.1f tok/s streaming this model's weights from "
      "memory (%.1f GB/s: %s) and at %.1f tok/s from cache (%.1f GB/s: %s); the whole model "
      "runs at %.0f%% of the former.\n",
      matmul_tps, from_memory.mix_gbps, per_type(from_memory).c_str(), compute_tps,
      in_cache.mix_gbps, per_type(in_cache).c_str(), 100 * tps / matmul_tps);
  if (compute_tps < roofline_tps && tps >= 0.7 * compute_tps) {
    std::printf(
        "Compute-bound: even from cache the kernels read the weights slower than memory "
        "delivers them. %s — %s.\n",
        integer_work.c_str(),
        gops > 0.5 * peak_gops ? "the multiply-adds saturate the core"
                               : "unpacking the quantized blocks, not the multiply-adds, "
                                 "takes the cycles");
  } else if (matmul_tps < 0.8 * roofline_tps && tps >= 0.8 * matmul_tps) {
    std::printf(
        "Kernel-bound: on their own the kernels stream from memory at %.0f%% of the probe's "
        "rate on %d threads (the probe only reads; the kernels also unpack and multiply "
        "between loads); the steps around them cost little.\n",
        100 * matmul_tps / roofline_tps, m.threads);
  } else {
    std::printf(
        "Per-step overhead: the kernels reach %.0f%% of the roofline on their own, the model "
        "%.0f%% — the rest goes to what a step does besides the weight matmuls (attention, "
        "norms, small ops, thread hand-offs between them).\n",
        100 * matmul_tps / roofline_tps, 100 * share);
  }
}

// The whole bench: load, measure, then the JSON document or the table and the verdicts.
int run_bench(const Options& o) {
  auto fail = [&](const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    return kExitBadInput;
  };
  const std::vector<int> depths = parse_depths(o.depths);
  if (depths.empty() || o.reps < 1 || o.n_prompt < 0 || o.n_gen < 0) {
    return fail("bench: give -r ≥ 1, -p ≥ 0, -n ≥ 0 and --ctx-depth as numbers, e.g. 0,4096");
  }
  int max_depth = 0;
  for (int d : depths) {
    if (d < 0) return fail("bench: --ctx-depth values must be ≥ 0");
    max_depth = std::max(max_depth, d);
  }
  if (o.oracle_drafts && o.plan.draft <= 0 && o.plan.draft_model.empty())
    return fail("bench: --oracle-drafts verifies drafts — give --draft N (or --draft-model)");
  PlanFlags flags = o.plan;
  if (flags.ctx == 0) flags.ctx = max_depth + std::max(o.n_prompt, o.n_gen) + 1;
  auto session = open_session(flags);
  if (!session) return fail(session.error().message());
  engine::Engine& e = *session->engine;
  const plan::Plan& plan = session->planned.plan;
  Machine m;
  m.threads = plan.request.n_threads > 0 ? plan.request.n_threads : plan::physical_cores();
  // The roofline: on the CPU the machine's bandwidth now, with the threads the model runs on
  // (not the cached probe); on a GPU its datasheet peak from NVML (not measured here).
  m.on_gpu = plan.uses_gpu();
  m.bandwidth = m.on_gpu ? plan.compute_device().bandwidth
                         : plan::measure_cpu_bandwidth(m.threads, size_t{1} << 30);
  m.bandwidth_label = m.on_gpu ? "GPU memory bandwidth (datasheet peak from NVML)"
                               : "memory bandwidth measured now";
  m.flops = flops_per_token(e.file(), e.spec());
  auto results = run_tests(e, o, depths, m, session->adapter);
  if (!results) return fail(results.error().message());

  const double ghz = cpu_ghz();
  const double peak_gops = m.threads * ghz * int8_macs_per_cycle() * 2;
  const bool measure_kernels = !m.on_gpu && !plan.request.reference_kernels;
  const KernelRates in_cache =
      measure_kernels ? kernel_rates(e, m.threads, kernels::cpu::Residence::kCache) : KernelRates{};
  const KernelRates from_memory = measure_kernels
                                      ? kernel_rates(e, m.threads, kernels::cpu::Residence::kMemory)
                                      : KernelRates{};
  for (auto& r : *results) {
    if (r.contains("bytes_per_token") && in_cache.tokens_per_second > 0)
      r["compute_share"] = r["tokens_per_second"].get<double>() / in_cache.tokens_per_second;
  }
  nlohmann::json doc = {{"model", session->planned.source},
                        {"model_bytes", plan::inventory(e.file(), e.spec()).used_bytes},
                        {"kernels", kernels_description(plan)},
                        {"threads", m.threads},
                        {"draft", plan.request.n_draft},
                        {"measured_bandwidth_gbps", m.bandwidth / 1e9},
                        {"bandwidth_source", m.bandwidth_label},
                        {"flops_per_token", m.flops},
                        {"cpu_ghz", ghz},
                        {"peak_int8_gops", peak_gops},
                        {"decode_kernel_gbps_in_cache", in_cache.gbps},
                        {"decode_kernel_mix_gbps_in_cache", in_cache.mix_gbps},
                        {"compute_ceiling_tokens_per_second", in_cache.tokens_per_second},
                        {"decode_kernel_gbps_from_memory", from_memory.gbps},
                        {"decode_kernel_mix_gbps_from_memory", from_memory.mix_gbps},
                        {"matmul_only_tokens_per_second", from_memory.tokens_per_second},
                        {"results", *results}};
  if (o.json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return kExitOk;
  }
  print_table(doc, m);
  for (const auto& r : *results) {
    if (r.contains("bandwidth_share") && !r.contains("drafts"))
      print_verdict(r, m, in_cache, from_memory, ghz, peak_gops);
  }
  return kExitOk;
}

}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Prompt and generation tok/s (like llama-bench) with bytes/token, the bandwidth roofline "
      "and the kernels' compute ceiling");
  add_plan_flags(cmd, o->plan, false);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens per pp test (0 = skip)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens per tg test (0 = skip)")
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", o->reps, "Repetitions of each test")->capture_default_str();
  cmd->add_option("--ctx-depth", o->depths,
                  "Comma-separated KV depths to test at, e.g. 0,4096 (a cached prefix)")
      ->capture_default_str();
  cmd->add_flag("--oracle-drafts", o->oracle_drafts,
                "With --draft or --draft-model: also generate with drafts that are always right "
                "(the same run's tokens, made first): what verifying --draft + 1 tokens a step "
                "gains on these kernels, whatever the weights");
  cmd->add_flag("--json", o->json, "Print the results as one JSON document");
  cmd->callback([o, &exit_code] { exit_code = run_bench(*o); });
}

}  // namespace cli
