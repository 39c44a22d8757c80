// The fit policy: when a request does not fit, a bounded search over combinations of what the
// planner prices (weight type, K and V cache types, context, slots, placement), ranked by predicted
// decode speed; when nothing fits, which part alone exceeds which budget.
#include <algorithm>
#include <cmath>

#include "model/model.h"
#include "plan/planner.h"
#include "util/units.h"

namespace plan {
namespace {

using gguf::TensorType;

// Types a re-quantized file could have (headroom quantize --type T --pure), more bits first.
// Q8_0 (blocks of 32) also serves rows too short for the K types' blocks of 256.
constexpr TensorType kWeightTypes[] = {TensorType::kQ8_0, TensorType::kQ6_K, TensorType::kQ5_K,
                                       TensorType::kQ4_K, TensorType::kQ3_K, TensorType::kQ2_K};
// KV cache types (K, V), more bits first: K keeps its bits longer, as its error passes through
// the softmax of every score.
constexpr std::pair<TensorType, TensorType> kKvTypes[] = {{TensorType::kQ8_0, TensorType::kQ8_0},
                                                          {TensorType::kQ8_0, TensorType::kQ4_0},
                                                          {TensorType::kQ4_0, TensorType::kQ4_0}};
// Speeds within 1% are a tie: the configuration that changes the request less wins.
constexpr double kTie = 1.01;
constexpr size_t kMaxAlternatives = 8;

double bits(TensorType t) {
  return gguf::bits_per_weight(t);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The values each knob takes: the request's own first, then ones that need less memory.
struct Grid {
  std::vector<std::optional<TensorType>> weights;  // nullopt: the file as it is
  std::vector<std::pair<TensorType, TensorType>> kv;
  std::vector<int> slots;
  std::vector<bool> ple_on_host, experts_on_host;
  std::vector<int> cpu_splits;  // layer counts the CPU may take beyond the request's, ascending
};

Grid make_grid(const PlanInput& in, const Plan& asked) {
  const Request& r = asked.request;
  Grid g;
  g.weights.push_back(r.requantized);
  const uint64_t now = asked.bytes_of(ItemKind::kWeights);
  for (TensorType t : kWeightTypes) {
    // Only a type that shrinks the weights by more than a rounding error is worth a new file.
    if (r.requantized && bits(t) >= bits(*r.requantized)) continue;
    if (inventory(in.file, in.spec, t).used_bytes < now * 0.99) g.weights.push_back(t);
  }
  g.kv.push_back({r.k_type, r.v_type});
  for (auto [k, v] : kKvTypes) {
    if (bits(k) <= bits(r.k_type) && bits(v) <= bits(r.v_type) && (k != r.k_type || v != r.v_type))
      g.kv.push_back({k, v});
  }
  g.slots.push_back(r.n_slots);
  if (r.n_slots > 1) g.slots.push_back(1);
  g.ple_on_host.push_back(r.ple_on_host);
  g.experts_on_host.push_back(r.experts_on_host);
  if (asked.uses_gpu()) {
    const bool moe = std::any_of(in.spec.layers.begin(), in.spec.layers.end(),
                                 [](const auto& l) { return l.is_moe(); });
    if (in.spec.n_embd_per_layer > 0 && !r.ple_on_host) g.ple_on_host.push_back(true);
    if (moe && !r.experts_on_host) g.experts_on_host.push_back(true);
    const auto layers = model::kv_layers(in.spec);
    for (int n = r.n_cpu_layers + 1; n <= in.spec.n_layer; ++n) {
      if (keeps_kv_sharing_together(layers, n)) g.cpu_splits.push_back(n);
    }
  }
  return g;
}

// The largest context that fits, or 0: a multiple of 256, or for contexts under 2048 of an eighth
// of it (at least a KV block of 16). Memory only grows with the context, so a bisection finds it.
int context_step(int n_ctx) {
  int step = 256;
  while (step > 16 && step * 8 > n_ctx) step /= 2;
  return step;
}

int largest_fitting_context(const PlanInput& in, Request r) {
  const int step = context_step(r.n_ctx);
  int lo = 0, hi = r.n_ctx / step - (r.n_ctx % step == 0 ? 1 : 0);
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    r.n_ctx = mid * step;
    auto p = make_plan(in, r);
    if (p && p->fits)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo * step;
}

// The fewest layers on the CPU that leave the GPU within its budget, or 0. The GPU's bytes only
// fall as layers move to the CPU, so a bisection over the allowed splits finds it; the CPU's only
// rise, so if that split does not fit, none with more layers does.
int fewest_cpu_layers(const PlanInput& in, Request r, const std::vector<int>& splits) {
  size_t lo = 0, hi = splits.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    r.n_cpu_layers = splits[mid];
    auto p = make_plan(in, r);
    if (p && p->bytes_on(1) <= p->devices[1].budget_bytes)
      hi = mid;
    else
      lo = mid + 1;
  }
  if (lo == splits.size()) return 0;
  r.n_cpu_layers = splits[lo];
  auto p = make_plan(in, r);
  return p && p->fits ? r.n_cpu_layers : 0;
}

// Whether `a` is at least as close to the request as `b` on every knob (both start from it and
// only move towards less memory).
bool no_further(const Request& a, const Request& b) {
  const bool weights =
      !a.requantized || (b.requantized && bits(*a.requantized) >= bits(*b.requantized));
  return weights && bits(a.k_type) >= bits(b.k_type) && bits(a.v_type) >= bits(b.v_type) &&
         a.n_ctx >= b.n_ctx && a.n_slots >= b.n_slots && a.n_cpu_layers <= b.n_cpu_layers &&
         (!a.ple_on_host || b.ple_on_host) && (!a.experts_on_host || b.experts_on_host);
}

int changes(const Request& a, const Request& asked) {
  return (a.requantized != asked.requantized) +
         (a.k_type != asked.k_type || a.v_type != asked.v_type) + (a.n_ctx != asked.n_ctx) +
         (a.n_slots != asked.n_slots) + (a.n_cpu_layers != asked.n_cpu_layers) +
         (a.ple_on_host != asked.ple_on_host) + (a.experts_on_host != asked.experts_on_host);
}

std::string kv_flags(TensorType k, TensorType v) {
  return fmt::format("--kv-type-k {} --kv-type-v {}", lower(gguf::tensor_type_name(k)),
                     lower(gguf::tensor_type_name(v)));
}

// What `p` changes from the request, in words and as the flags that make the change.
Alternative describe(const Plan& p, const Plan& asked, const model::Spec& spec) {
  const Request& q = p.request;
  const Request& r = asked.request;
  std::vector<std::string> words, flags;
  if (q.requantized != r.requantized) {
    const std::string type(gguf::tensor_type_name(*q.requantized));
    words.push_back(
        fmt::format("weights re-quantized to {}, {} instead of {} (a new file: headroom quantize "
                    "MODEL-F16.gguf MODEL-{}.gguf --type {} --pure)",
                    type, util::format_bytes(p.bytes_of(ItemKind::kWeights)),
                    util::format_bytes(asked.bytes_of(ItemKind::kWeights)), type, type));
    flags.push_back(fmt::format("-m MODEL-{}.gguf", type));
  }
  if (q.k_type != r.k_type || q.v_type != r.v_type) {
    words.push_back(q.k_type == q.v_type
                        ? fmt::format("KV cache {}", gguf::tensor_type_name(q.k_type))
                        : fmt::format("KV cache K {}, V {}", gguf::tensor_type_name(q.k_type),
                                      gguf::tensor_type_name(q.v_type)));
    flags.push_back(kv_flags(q.k_type, q.v_type));
  }
  if (q.n_ctx != r.n_ctx) {
    words.push_back(fmt::format("context {} instead of {}", q.n_ctx, r.n_ctx));
    flags.push_back(fmt::format("--ctx {}", q.n_ctx));
  }
  if (q.n_slots != r.n_slots) {
    words.push_back(
        fmt::format("{} slot{} instead of {}", q.n_slots, q.n_slots == 1 ? "" : "s", r.n_slots));
    flags.push_back(fmt::format("--slots {}", q.n_slots));
  }
  if (q.ple_on_host != r.ple_on_host) {
    words.push_back("per-layer embedding table on the host (it is only gathered by row)");
    flags.push_back("--ple-on-host");
  }
  if (q.experts_on_host != r.experts_on_host) {
    words.push_back("MoE experts on the host");
    flags.push_back("--experts-on-host");
  }
  if (q.n_cpu_layers != r.n_cpu_layers) {
    words.push_back(
        fmt::format("{} of {} layers on the CPU (partial offload)", q.n_cpu_layers, spec.n_layer));
    flags.push_back(fmt::format("--cpu-layers {}", q.n_cpu_layers));
  }
  auto join = [](const std::vector<std::string>& parts, std::string_view sep) {
    std::string out;
    for (const auto& s : parts) out += (out.empty() ? "" : std::string(sep)) + s;
    return out;
  };
  return {join(words, "; "),
          join(flags, " "),
          q,
          !q.requantized,
          p.prediction.tokens_per_second,
          p.prediction.tokens_per_second_full};
}

// Every combination of the grid's values; where one does not fit as asked, the largest context
// that fits, and (with a GPU) the fewest layers on the CPU that fit.
std::vector<Plan> fitting_plans(const PlanInput& in, const Plan& asked, const Grid& g) {
  std::vector<Plan> out;
  auto keep = [&](const Request& q) {
    if (auto p = make_plan(in, q); p && p->fits) out.push_back(std::move(*p));
  };
  for (const auto& w : g.weights) {
    for (auto [k, v] : g.kv) {
      for (int slots : g.slots) {
        for (bool ple : g.ple_on_host) {
          for (bool experts : g.experts_on_host) {
            Request q = asked.request;
            q.requantized = w;
            q.k_type = k;
            q.v_type = v;
            q.n_slots = slots;
            q.ple_on_host = ple;
            q.experts_on_host = experts;
            auto p = make_plan(in, q);
            if (!p) continue;
            if (p->fits) {
              out.push_back(std::move(*p));
              continue;
            }
            if (int ctx = largest_fitting_context(in, q); ctx > 0) {
              Request c = q;
              c.n_ctx = ctx;
              keep(c);
            }
            if (int n = g.cpu_splits.empty() ? 0 : fewest_cpu_layers(in, q, g.cpu_splits)) {
              Request l = q;
              l.n_cpu_layers = n;
              keep(l);
            }
          }
        }
      }
    }
  }
  return out;
}

// Fastest first; speeds within kTie of each other rank by how little they change the request:
// fewer flags, then more of the context, the slots and the KV bits asked for (what a user asks for
// outweighs the speed with the context full, which a shorter context always wins). A configuration
// is dropped when another is no further from the request on any knob and no slower beyond a tie.
std::vector<Alternative> rank(const std::vector<Plan>& plans, const Plan& asked,
                              const model::Spec& spec) {
  std::vector<Alternative> all;
  for (const auto& p : plans) all.push_back(describe(p, asked, spec));
  std::vector<Alternative> kept;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool dominated = std::any_of(all.begin(), all.end(), [&](const Alternative& b) {
      const Alternative& a = all[i];
      return &a != &b && no_further(b.request, a.request) && !no_further(a.request, b.request) &&
             b.tokens_per_second * kTie >= a.tokens_per_second;
    });
    if (!dominated) kept.push_back(all[i]);
  }
  auto key = [&](const Alternative& a) {
    const Request& q = a.request;
    return std::tuple{-std::lround(std::log(a.tokens_per_second) / std::log(kTie)),
                      changes(q, asked.request),
                      -q.n_ctx,
                      -q.n_slots,
                      -(bits(q.k_type) + bits(q.v_type)),
                      q.n_cpu_layers,
                      -a.tokens_per_second_full};
  };
  std::stable_sort(kept.begin(), kept.end(),
                   [&](const Alternative& a, const Alternative& b) { return key(a) < key(b); });
  if (kept.size() > kMaxAlternatives) kept.resize(kMaxAlternatives);
  return kept;
}

std::string budgets_phrase(const std::vector<Device>& devices) {
  if (devices.size() == 1)
    return "the CPU budget of " + util::format_bytes(devices[0].budget_bytes);
  std::string sum;
  uint64_t total = 0;
  for (const auto& d : devices) {
    sum += (sum.empty() ? "" : " + ") + util::format_bytes(d.budget_bytes);
    total += d.budget_bytes;
  }
  return fmt::format("the CPU and GPU budgets together ({} = {})", sum, util::format_bytes(total));
}

// Why no configuration of the grid fits: the weights at their smallest alone, or else the least
// memory the grid reaches (smallest weights and KV types, one slot, what the host can take, the
// shortest context searched) on the device it overflows, part by part.
std::string why_nothing_fits(const PlanInput& in, const Plan& asked, const Grid& g) {
  Request floor = asked.request;
  floor.requantized = g.weights.back();
  std::tie(floor.k_type, floor.v_type) = g.kv.back();
  floor.n_slots = g.slots.back();
  floor.ple_on_host = g.ple_on_host.back();
  floor.experts_on_host = g.experts_on_host.back();
  floor.n_ctx = context_step(asked.request.n_ctx);
  auto p = make_plan(in, floor);
  if (!p) return "no configuration searched fits (" + p.error().message() + ")";
  uint64_t budget = 0;
  for (const auto& d : p->devices) budget += d.budget_bytes;
  const uint64_t weights = p->bytes_of(ItemKind::kWeights);
  if (weights > budget) {
    return fmt::format(
        "the weights alone {} exceed {}",
        floor.requantized
            ? fmt::format("at the smallest quantization searched ({}, {})",
                          gguf::tensor_type_name(*floor.requantized), util::format_bytes(weights))
            : fmt::format("as the file holds them ({})", util::format_bytes(weights)),
        budgets_phrase(p->devices));
  }
  for (int d = 0; d < static_cast<int>(p->devices.size()); ++d) {
    const uint64_t used = p->bytes_on(d);
    if (used <= p->devices[d].budget_bytes) continue;
    uint64_t parts[3] = {};  // weights, KV cache, the rest
    for (const auto& i : p->items) {
      if (i.device != d) continue;
      parts[i.kind == ItemKind::kWeights ? 0 : i.kind == ItemKind::kKvCache ? 1 : 2] += i.bytes;
    }
    return fmt::format(
        "even the least memory searched ({}) needs {} on {}, over its budget of {}: weights {}, "
        "KV cache {}, activations, logits and host data {}",
        describe(*p, asked, in.spec).change, util::format_bytes(used), p->devices[d].name,
        util::format_bytes(p->devices[d].budget_bytes), util::format_bytes(parts[0]),
        util::format_bytes(parts[1]), util::format_bytes(parts[2]));
  }
  return "no configuration searched fits";
}

}  // namespace

util::Result<Plan> plan_with_fit(const PlanInput& in, const Request& request, bool fit) {
  HR_ASSIGN_OR_RETURN(Plan p, make_plan(in, request));
  if (p.fits) return p;
  const Grid grid = make_grid(in, p);
  p.alternatives = rank(fitting_plans(in, p, grid), p, in.spec);
  if (p.alternatives.empty()) p.nothing_fits = why_nothing_fits(in, p, grid);
  if (!fit) return p;
  for (const auto& a : p.alternatives) {
    if (!a.automatic) continue;
    HR_ASSIGN_OR_RETURN(Plan chosen, make_plan(in, a.request));
    chosen.applied = a.change + " (" + a.flags + ")";
    chosen.alternatives = p.alternatives;
    return chosen;
  }
  return p;
}

}  // namespace plan
