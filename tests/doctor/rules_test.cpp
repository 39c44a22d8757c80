// The doctor's rules on injected observations: each condition names its cause, and no other.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "doctor/rules.h"
#include "testing/testing.h"

namespace doctor {
namespace {

using testing_util::kGiB;
using testing_util::kMiB;

// A healthy CPU run of a model larger than the cache, decoding at 90% of its roofline.
Observations healthy() {
  Observations o;
  o.placement.value = PlacementFacts{
      {{.name = "cpu", .budget = 20 * kGiB, .weights = 4 * kGiB, .kv = 512 * kMiB}}, 32, 0, ""};
  o.budget.value = BudgetFacts{
      .ram_need = 5 * kGiB,
      .ram_budget = 20 * kGiB,
      .ram_total = 32 * kGiB,
      .ram_margin = 1600 * kMiB,
      .ram_budget_is_available = true,
      .ram_holders = {
          {"java (pid 7)", 9 * kGiB}, {"firefox (pid 12)", 2 * kGiB}, {"sshd (pid 1)", 8 * kMiB}}};
  o.backend.value =
      BackendFacts{.backend = "cpu", .isa_in_use = "avx2", .isa_best = "avx2", .threads = 8};
  o.offload = Probe<OffloadFacts>::skipped("no GPU: every layer runs on the CPU");
  o.kv_growth.value = KvGrowthFacts{.short_depth = 16,
                                    .long_depth = 1024,
                                    .tps_short = 4.2,
                                    .tps_long = 3.6,
                                    .bytes_short = 4 * kGiB,
                                    .bytes_long = 4 * kGiB + 512 * kMiB,
                                    .llc_bytes = 32 * kMiB};
  MemoryFacts m{.kv_bytes = 512 * kMiB, .buffer_bytes = 64 * kMiB};
  for (int i = 0; i < 10; ++i) {
    m.samples.push_back({.seconds = 0.1 * i,
                         .rss = 5 * kGiB + i * 8 * kMiB,
                         .rss_anon = 1 * kGiB + i * 8 * kMiB,
                         .rss_file = 4 * kGiB,
                         .mem_available = 10 * kGiB,
                         .mem_total = 32 * kGiB,
                         .swap_used = 100 * kMiB,
                         .major_faults = 1000,
                         .weights_resident = 4 * kGiB,
                         .weights_bytes = 4 * kGiB});
  }
  o.memory.value = m;
  o.contention.value = ContentionFacts{.n_cpus = 16,
                                       .threads = 8,
                                       .other_cpus = 0.2,
                                       .loadavg_1m = 8.1,
                                       .n_concurrent = 4,
                                       .single_tps = 4.2,
                                       .concurrent_tps = 14};
  o.throttle.value = ThrottleFacts{{{.name = "gpu",
                                     .sm_clock_mhz = 1950,
                                     .max_sm_clock_mhz = 1980,
                                     .temperature_c = 62,
                                     .power_w = 250,
                                     .power_limit_w = 350,
                                     .utilization = 0.97}}};
  o.roofline.value = RooflineFacts{
      .bytes_per_token = 4 * kGiB, .measured_tps = 4.2, .bandwidth = 20e9, .llc_bytes = 32 * kMiB};
  o.endpoint = Probe<EndpointFacts>::skipped("no --endpoint given");
  return o;
}

std::set<std::string> rules_fired(const Observations& o, Status status = Status::kProblem) {
  std::set<std::string> ids;
  for (const auto& v : diagnose(o)) {
    if (v.status == status) ids.insert(v.rule);
  }
  return ids;
}

const Verdict& verdict(const std::vector<Verdict>& all, const std::string& rule) {
  auto it = std::find_if(all.begin(), all.end(), [&](const Verdict& v) { return v.rule == rule; });
  if (it == all.end()) throw std::runtime_error("no verdict " + rule);
  return *it;
}

TEST(DoctorRules, TheTableIsWellFormed) {
  std::set<std::string_view> ids;
  for (const auto& r : rules()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate rule " << r.id;
    EXPECT_NE(std::find(checks().begin(), checks().end(), r.check), checks().end()) << r.id;
    EXPECT_FALSE(r.when.empty() || r.cause.empty() || r.action.empty()) << r.id;
  }
  // Every check has a verdict for when nothing is wrong.
  for (auto check : checks()) {
    EXPECT_TRUE(std::any_of(rules().begin(), rules().end(), [&](const Rule& r) {
      return r.check == check && r.status != Status::kProblem;
    })) << check;
  }
}

TEST(DoctorRules, HealthyRunIsNormalBandwidthBoundWithoutFalseAlarms) {
  const auto all = diagnose(healthy());
  EXPECT_EQ(rules_fired(healthy()), std::set<std::string>{});
  const auto& roofline = verdict(all, "roofline.bandwidth-bound");
  EXPECT_EQ(roofline.status, Status::kOk);
  EXPECT_NE(roofline.cause.find("normal: bandwidth-bound"), std::string::npos);
  EXPECT_NE(roofline.observation.find("90%"), std::string::npos) << roofline.observation;
  EXPECT_EQ(verdict(all, "kv-growth.as-expected").status, Status::kOk);
  EXPECT_EQ(verdict(all, "memory.stable").status,
            Status::kOk);  // RSS +72 MiB < the 512 MiB KV cache
  EXPECT_EQ(verdict(all, "contention.none").status, Status::kOk);
  EXPECT_EQ(verdict(all, "throttle.none").status, Status::kOk);
  EXPECT_EQ(all.size(), checks().size());  // one verdict per check
}

TEST(DoctorRules, ChecksThatCouldNotRunSaySoAndWhy) {
  Observations o = healthy();
  o.throttle = Probe<ThrottleFacts>::skipped("no GPU: not applicable — no NVIDIA GPU found");
  const auto all = diagnose(o);
  const auto& v = verdict(all, "throttling.not-run");
  EXPECT_EQ(v.status, Status::kNotRun);
  EXPECT_EQ(v.cause, "no GPU: not applicable — no NVIDIA GPU found");
  EXPECT_EQ(verdict(diagnose(o), "endpoint.not-run").cause, "no --endpoint given");
}

TEST(DoctorRules, KvForcedToHostIsNamedAndItsCostAtDepth) {
  Observations o = healthy();
  o.placement.value =
      PlacementFacts{{{.name = "cpu", .budget = 20 * kGiB, .kv = 2 * kGiB},
                      {.name = "cuda:0", .gpu = true, .budget = 8 * kGiB, .weights = 5 * kGiB}},
                     32,
                     0,
                     ""};
  // Decode 3× slower at depth though a token reads only 1.4× the bytes.
  o.kv_growth.value = KvGrowthFacts{.short_depth = 16,
                                    .long_depth = 4096,
                                    .tps_short = 60,
                                    .tps_long = 20,
                                    .bytes_short = 5 * kGiB,
                                    .bytes_long = 7 * kGiB,
                                    .llc_bytes = 32 * kMiB};
  const auto fired = rules_fired(o);
  EXPECT_EQ(fired, (std::set<std::string>{"placement.kv-on-host", "kv-growth.worse-than-bytes"}));
  EXPECT_NE(
      verdict(diagnose(o), "placement.kv-on-host").observation.find("2.00 GiB of KV cache on cpu"),
      std::string::npos);
  EXPECT_NE(verdict(diagnose(o), "kv-growth.worse-than-bytes").observation.find("3.00× slower"),
            std::string::npos);
}

TEST(DoctorRules, SlowdownAtDepthInCacheIsANoteNotAProblem) {
  Observations o = healthy();
  o.kv_growth.value = KvGrowthFacts{.short_depth = 16,
                                    .long_depth = 1024,
                                    .tps_short = 3000,
                                    .tps_long = 1100,
                                    .bytes_short = kMiB,
                                    .bytes_long = 8 * kMiB / 5,
                                    .llc_bytes = 32 * kMiB};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
  EXPECT_EQ(rules_fired(o, Status::kNote), std::set<std::string>{"kv-growth.compute-in-cache"});
}

TEST(DoctorRules, ThermalThrottlingFromSyntheticTelemetry) {
  Observations o = healthy();
  o.throttle.value = ThrottleFacts{{{.name = "gpu",
                                     .sm_clock_mhz = 1100,
                                     .max_sm_clock_mhz = 1980,
                                     .temperature_c = 91,
                                     .power_w = 200,
                                     .power_limit_w = 350,
                                     .utilization = 0.99,
                                     .thermal_slowdown = true}}};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"throttle.thermal"});
  EXPECT_NE(verdict(diagnose(o), "throttle.thermal").observation.find("91 °C"), std::string::npos);
}

TEST(DoctorRules, PowerCapFromSyntheticTelemetry) {
  Observations o = healthy();
  o.throttle.value = ThrottleFacts{{{.name = "gpu",
                                     .sm_clock_mhz = 1500,
                                     .max_sm_clock_mhz = 1980,
                                     .temperature_c = 70,
                                     .power_w = 349,
                                     .power_limit_w = 350,
                                     .utilization = 0.99,
                                     .power_cap = true}}};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"throttle.power-cap"});
}

TEST(DoctorRules, LowClocksWithoutAReasonUnderLoad) {
  Observations o = healthy();
  o.throttle.value = ThrottleFacts{{{.name = "gpu",
                                     .sm_clock_mhz = 600,
                                     .max_sm_clock_mhz = 1980,
                                     .temperature_c = 45,
                                     .power_w = 90,
                                     .power_limit_w = 350,
                                     .utilization = 0.95}}};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"throttle.low-clocks"});
  // An idle GPU at low clocks is not throttled.
  o.throttle.value->samples[0].utilization = 0.02;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

MemoryFacts series(int n, auto&& at) {
  MemoryFacts m = *healthy().memory;
  m.samples.clear();
  for (int i = 0; i < n; ++i) {
    MemorySample s{.seconds = i * 1.0,
                   .rss = 5 * kGiB,
                   .rss_anon = 1 * kGiB,
                   .rss_file = 4 * kGiB,
                   .mem_available = 10 * kGiB,
                   .mem_total = 32 * kGiB,
                   .swap_used = 100 * kMiB,
                   .major_faults = 1000,
                   .weights_resident = 4 * kGiB,
                   .weights_bytes = 4 * kGiB};
    at(i, s);
    m.samples.push_back(s);
  }
  return m;
}

TEST(DoctorRules, MemoryPressureSwapGrowing) {
  Observations o = healthy();
  o.memory.value = series(20, [](int i, MemorySample& s) {
    s.swap_used += i * 40 * kMiB;
    s.mem_available = 4 * kGiB;
  });
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"memory.swapping"});
}

TEST(DoctorRules, MemoryPressureWeightsEvictedFromPageCache) {
  Observations o = healthy();
  o.memory.value = series(20, [](int i, MemorySample& s) {
    s.weights_resident = 4 * kGiB - i * 100 * kMiB;  // falls to 54%
    s.weights_evicted = i * 100 * kMiB;              // pages seen resident, then gone
    s.major_faults += i * 2000;
  });
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"memory.weights-evicted"});
  // The action names who holds the RAM.
  EXPECT_NE(verdict(diagnose(o), "memory.weights-evicted").action.find("java (pid 7) (9.00 GiB)"),
            std::string::npos);
}

TEST(DoctorRules, AColdPageCacheAndALazilyReadTableAreNotEvictionsNorGrowth) {
  // A cold start: the weights become resident as decode first reads them (a per-layer-embedding
  // table a row per token), with a major fault per read and the file pages in RSS; nothing that
  // was resident leaves.
  Observations o = healthy();
  o.memory.value = series(20, [](int i, MemorySample& s) {
    s.weights_resident = 400 * kMiB + i * 100 * kMiB;  // 10% … 56%
    s.major_faults += i * 3000;
    s.rss_file = 400 * kMiB + i * 100 * kMiB;
    s.rss = s.rss_anon + s.rss_file;
  });
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
  EXPECT_EQ(verdict(diagnose(o), "memory.stable").status, Status::kOk);
  // A few pages evicted (under 1% of the weights) are not a verdict either.
  o.memory.value->samples.back().weights_evicted = 8 * kMiB;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

TEST(DoctorRules, MemoryGrowingBeyondTheKvCache) {
  Observations o = healthy();
  o.memory.value = series(20, [](int i, MemorySample& s) {
    s.rss_anon += i * 64 * kMiB;  // +1.2 GiB, KV 512 MiB and buffers 64 MiB
    s.rss += i * 64 * kMiB;
  });
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"memory.growth"});
  o.memory.value->kv_bytes = 2 * kGiB;  // the same growth is the KV cache's pages being touched
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

TEST(DoctorRules, FileBackedGrowthIsNotALeak) {
  // The mapped weights becoming resident grow RSS, not the memory the process allocated.
  Observations o = healthy();
  o.memory.value = series(20, [](int i, MemorySample& s) {
    s.rss_file += i * 200 * kMiB;
    s.rss += i * 200 * kMiB;
  });
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

TEST(DoctorRules, MemoryLowAvailable) {
  Observations o = healthy();
  o.memory.value = series(5, [](int, MemorySample& s) { s.mem_available = 600 * kMiB; });
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"memory.low-available"});
  EXPECT_NE(verdict(diagnose(o), "memory.low-available").action.find("firefox (pid 12)"),
            std::string::npos);
}

TEST(DoctorRules, RamHeldByOtherProcessesIsNotAModelThatDoesNotFit) {
  // 12 GiB needed on a 32 GiB machine with 6 GiB free: java holds it.
  Observations o = healthy();
  BudgetFacts& b = *o.budget.value;
  b.fits = false;
  b.problems = {"cpu needs 12.00 GiB but its budget is 6.00 GiB"};
  b.ram_need = 12 * kGiB;
  b.ram_budget = 6 * kGiB;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"budget.ram-held-by-others"});
  auto v = verdict(diagnose(o), "budget.ram-held-by-others");
  EXPECT_NE(v.action.find("free 6.00 GiB (e.g. close java (pid 7) (9.00 GiB))"), std::string::npos)
      << v.action;
  EXPECT_EQ(v.action.find("smaller model"), std::string::npos) << v.action;
  EXPECT_NE(v.observation.find("firefox (pid 12) (2.00 GiB)"), std::string::npos) << v.observation;
  // With a configuration that fits now, that is offered too.
  b.alternatives = {{"KV cache Q8_0", "--kv-type-k q8_0 --kv-type-v q8_0", 3.9, true}};
  v = verdict(diagnose(o), "budget.ram-held-by-others");
  EXPECT_NE(v.action.find("or now: (1) KV cache Q8_0"), std::string::npos) << v.action;

  // More than the machine has: the model does not fit this machine, whoever holds what.
  b.ram_need = 40 * kGiB;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"budget.does-not-fit"});
  // A budget the user set (--cpu-mem), or a GPU over its budget, is not freed by closing programs.
  b.ram_need = 12 * kGiB;
  b.ram_budget_is_available = false;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"budget.does-not-fit"});
  b.ram_budget_is_available = true;
  b.gpus_fit = false;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"budget.does-not-fit"});
}

TEST(DoctorRules, ContentionFromOtherProcessesSuggestsTheFreeCores) {
  Observations o = healthy();
  o.contention.value = ContentionFacts{.n_cpus = 8,
                                       .threads = 8,
                                       .other_cpus = 3.4,
                                       .loadavg_1m = 11,
                                       .busiest = {{"cc1plus (pid 42)", 1.9}},
                                       .n_concurrent = 4,
                                       .single_tps = 4,
                                       .concurrent_tps = 13};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"contention.other-processes"});
  const auto all = diagnose(o);
  const auto& v = verdict(all, "contention.other-processes");
  EXPECT_NE(v.observation.find("cc1plus (pid 42)"), std::string::npos);
  EXPECT_NE(v.action.find("--threads 4"), std::string::npos) << v.action;
  // The same load leaves headroom alone when its threads fit beside it.
  o.contention.value->threads = 4;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

TEST(DoctorRules, ConcurrentStreamsSlowerThanOne) {
  Observations o = healthy();
  o.contention.value->concurrent_tps = 2.5;  // 4 streams, 2.5 tok/s in total vs 4.2 alone
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"contention.concurrent-slower"});
}

TEST(DoctorRules, OversubscribedThreads) {
  Observations o = healthy();
  o.contention.value->threads = 32;
  EXPECT_EQ(rules_fired(o).count("contention.oversubscribed"), 1u);
  EXPECT_NE(verdict(diagnose(o), "contention.oversubscribed").action.find("--threads 16"),
            std::string::npos);
}

TEST(DoctorRules, WrongBackendReferenceOrCappedSimdOrIdleGpu) {
  Observations o = healthy();
  o.backend.value->backend = "ref";
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"backend.reference"});

  o = healthy();
  o.backend.value->isa_in_use = "avx2";
  o.backend.value->isa_best = "avx512vnni";
  o.backend.value->isa_capped = true;
  o.backend.value->isa_cap_source = "HEADROOM_ISA=avx2";
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"backend.simd-capped"});
  EXPECT_NE(verdict(diagnose(o), "backend.simd-capped").action.find("unset HEADROOM_ISA"),
            std::string::npos);

  o = healthy();
  o.backend.value->gpu_hardware = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"backend.gpu-unused"});
  o.backend.value->bytes_on_real_gpu = 5 * kGiB;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

TEST(DoctorRules, BudgetMismatchNamesTheConfigurationThatFits) {
  Observations o = healthy();
  o.budget.value = BudgetFacts{
      .fits = false,
      .problems = {"cpu needs 40 GiB but its budget is 20 GiB"},
      .alternatives = {{"KV cache Q8_0", "--kv-type-k q8_0 --kv-type-v q8_0", 3.9, true}}};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"budget.does-not-fit"});
  const auto all = diagnose(o);
  const auto& v = verdict(all, "budget.does-not-fit");
  EXPECT_NE(v.action.find("--kv-type-k q8_0 --kv-type-v q8_0"), std::string::npos);
  EXPECT_NE(v.observation.find("40 GiB"), std::string::npos);
}

TEST(DoctorRules, EndpointThatSerializesRequests) {
  Observations o = healthy();
  o.endpoint.value = EndpointFacts{.url = "http://x",
                                   .single_ttft = 0.05,
                                   .single_tps = 40,
                                   .n_concurrent = 4,
                                   .concurrent_ttft_p50 = 1.2,
                                   .concurrent_tps = 41};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"endpoint.serialized"});
  o.endpoint.value->concurrent_tps = 120;
  o.endpoint.value->concurrent_ttft_p50 = 0.08;
  EXPECT_EQ(rules_fired(o), std::set<std::string>{});
}

TEST(DoctorRules, RooflineInCacheIsANoteAtAnyShareAndBelowOutsideIt) {
  Observations o = healthy();
  // 1 MiB a token in a 32 MiB cache: no memory roofline applies, fast or slow.
  for (double tps : {19000.0, 2000.0}) {
    o.roofline.value = RooflineFacts{
        .bytes_per_token = kMiB, .measured_tps = tps, .bandwidth = 20e9, .llc_bytes = 32 * kMiB};
    EXPECT_EQ(rules_fired(o), std::set<std::string>{}) << tps;
    EXPECT_EQ(rules_fired(o, Status::kNote), std::set<std::string>{"roofline.fits-in-cache"})
        << tps;
  }
  // 4 GiB a token at 20 GB/s is a 4.66 tok/s roofline; 1.4 tok/s is 30% of it.
  o.roofline.value = RooflineFacts{
      .bytes_per_token = 4 * kGiB, .measured_tps = 1.4, .bandwidth = 20e9, .llc_bytes = 32 * kMiB};
  EXPECT_EQ(rules_fired(o), std::set<std::string>{"roofline.below"});
  EXPECT_NE(verdict(diagnose(o), "roofline.below").observation.find("30%"), std::string::npos);
}

}  // namespace
}  // namespace doctor
