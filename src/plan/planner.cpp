// Placement, byte accounting and speed prediction; the fit policy and its alternatives.
#include "plan/planner.h"

#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cmath>

#include "model/model.h"
#include "plan/media.h"
#include "util/units.h"

namespace plan {
namespace {

bool is_ple_table(const WeightItem& w) {
  return w.name == "per_layer_token_embd.weight";
}

int layer_device(int il, const Request& r, bool has_gpu) {
  return has_gpu && il >= r.n_cpu_layers ? 1 : 0;
}

uint64_t tokenizer_bytes(const gguf::File& file) {
  uint64_t bytes = 0;
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    const gguf::Value* v = file.find(key);
    if (!v || !v->is_array() || v->array_type() != gguf::ValueType::kString) continue;
    for (auto s : v->array_strings()) bytes += s.size() + 48;  // the string and its index entries
  }
  if (const gguf::Value* v = file.find("tokenizer.ggml.tokens"))
    bytes += v->array_size() * 8;  // score, type
  return bytes;
}

}  // namespace

int weight_device(const WeightItem& w, const Request& r, bool has_gpu) {
  if (!has_gpu) return 0;
  if (r.ple_on_host && is_ple_table(w)) return 0;
  if (r.experts_on_host && w.cls == model::TensorClass::kExperts && w.layer >= 0) return 0;
  if (w.layer >= 0 && w.layer < r.n_cpu_layers) return 0;
  return 1;
}

std::string_view item_kind_name(ItemKind kind) {
  switch (kind) {
    case ItemKind::kWeights:
      return "weights";
    case ItemKind::kKvCache:
      return "kv cache";
    case ItemKind::kActivations:
      return "activations";
    case ItemKind::kLogits:
      return "logits";
    case ItemKind::kHost:
      return "host";
  }
  return "?";
}

uint64_t Plan::bytes_on(int device) const {
  uint64_t total = 0;
  for (const auto& i : items) total += i.device == device ? i.bytes : 0;
  return total;
}

uint64_t Plan::bytes_of(ItemKind kind) const {
  uint64_t total = 0;
  for (const auto& i : items) total += i.kind == kind ? i.bytes : 0;
  return total;
}

uint64_t Plan::weight_bytes(model::TensorClass cls) const {
  uint64_t total = 0;
  for (const auto& i : items)
    total += i.kind == ItemKind::kWeights && i.weight_class == cls ? i.bytes : 0;
  return total;
}

std::string Plan::refusal() const {
  std::string text = "the request does not fit: ";
  for (size_t i = 0; i < problems.size(); ++i) text += (i ? "; " : "") + problems[i];
  if (alternatives.empty())
    return text + " — no smaller configuration of this model fits; use a smaller model";
  text += " — changes that fit, fastest first:";
  for (size_t i = 0; i < alternatives.size() && i < 5; ++i) {
    const auto& a = alternatives[i];
    text +=
        fmt::format(" ({}) {} [{}] ≈{:.1f} tok/s;", i + 1, a.change, a.flags, a.tokens_per_second);
  }
  return text + " or add --fit to apply the first automatic one";
}

util::Result<Plan> make_plan(const PlanInput& in, const Request& r) {
  const model::Spec& spec = in.spec;
  if (in.devices.empty()) return util::errorf("plan: no devices");
  if (r.n_ctx <= 0 || r.n_slots <= 0 || r.n_ubatch <= 0) {
    return util::errorf("plan: context {}, slots {} and micro-batch {} must be positive", r.n_ctx,
                        r.n_slots, r.n_ubatch);
  }
  Plan p;
  p.request = r;
  // Only placeable devices take bytes; the present GPUs headroom cannot run on are named once
  // per reason (usually one: no GPU backend in this build, or no driver).
  std::vector<std::pair<std::string, std::string>> unused_gpus;  // reason → names
  for (const Device& d : in.devices) {
    if (d.placeable) {
      p.devices.push_back(d);
      continue;
    }
    p.unused_devices.push_back(d);
    if (d.kind != DeviceKind::kGpu) continue;
    auto same = std::find_if(unused_gpus.begin(), unused_gpus.end(),
                             [&](const auto& u) { return u.first == d.unusable_reason; });
    if (same == unused_gpus.end())
      unused_gpus.emplace_back(d.unusable_reason, d.name);
    else
      same->second += ", " + d.name;
  }
  for (const auto& [reason, names] : unused_gpus) {
    p.notes.push_back(fmt::format("GPU present ({}) but {}, so the plan places nothing on the GPU",
                                  names, reason));
  }
  if (p.devices.empty() || p.devices[0].kind != DeviceKind::kCpu) {
    return util::errorf("plan: the first device must be the CPU");
  }
  const bool has_gpu = p.uses_gpu();
  p.request.n_ubatch = std::min(r.n_ubatch, r.n_ctx);
  HR_TRY(fit_media_batch(in, p));

  // Weights, by class and device.
  const Inventory inv = inventory(in.file, spec);
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    for (int c = 0; c < model::kTensorClassCount; ++c) {
      Item item{.name = std::string(model::tensor_class_name(static_cast<model::TensorClass>(c))),
                .kind = ItemKind::kWeights,
                .weight_class = static_cast<model::TensorClass>(c),
                .device = d};
      for (const auto& w : inv.weights) {
        if (w.used && w.cls == item.weight_class && weight_device(w, r, has_gpu) == d) {
          item.bytes += w.bytes;
          item.bytes_per_token += w.bytes_per_token;
        }
      }
      if (item.bytes > 0) p.items.push_back(item);
    }
  }

  // KV cache, per layer kind and device, exactly as kv::Cache will allocate it.
  const auto layers = model::kv_layers(spec);
  p.kv_config = {.n_ctx = r.n_ctx,
                 .n_ubatch = p.request.n_ubatch,
                 .n_slots = r.n_slots,
                 .k_type = r.k_type,
                 .v_type = r.v_type};
  HR_ASSIGN_OR_RETURN(p.kv_groups, kv::plan_groups(layers, p.kv_config));
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    std::vector<kv::LayerGeometry> mine;
    for (const auto& l : layers) {
      if (layer_device(l.il, r, has_gpu) == d) mine.push_back(l);
    }
    if (mine.empty()) continue;
    // Shared layers on this device read a source that may live elsewhere; storage counts owners.
    std::vector<kv::LayerGeometry> owners;
    for (const auto& l : mine) {
      if (l.owns()) owners.push_back(l);
    }
    HR_ASSIGN_OR_RETURN(uint64_t kv_bytes, kv::storage_bytes(owners, p.kv_config));
    const uint64_t read = kv::read_bytes_per_token(mine, p.kv_config, 0);
    if (kv_bytes > 0 || read > 0) {
      p.items.push_back({.name = "kv cache",
                         .kind = ItemKind::kKvCache,
                         .device = d,
                         .bytes = kv_bytes,
                         .bytes_per_token = read});
    }
  }

  // A layer reading another's KV cache must compute where that cache lives (kv::Cache refuses a
  // split between them): name the nearest splits that keep every such pair together.
  if (has_gpu && r.n_cpu_layers > 0) {
    auto splits = [&](int n) {
      return std::none_of(layers.begin(), layers.end(),
                          [&](const kv::LayerGeometry& l) { return (l.il < n) != (l.source < n); });
    };
    if (!splits(r.n_cpu_layers)) {
      int below = r.n_cpu_layers, above = r.n_cpu_layers;
      while (below > 0 && !splits(below)) --below;
      while (above < spec.n_layer && !splits(above)) ++above;
      const auto across =
          std::find_if(layers.begin(), layers.end(), [&](const kv::LayerGeometry& l) {
            return (l.il < r.n_cpu_layers) != (l.source < r.n_cpu_layers);
          });
      return util::errorf(
          "plan: --cpu-layers {} separates layer {} from layer {}, whose KV cache it reads — use "
          "--cpu-layers {} or {}",
          r.n_cpu_layers, across->il, across->source, below, above);
    }
  }

  // Activations for one micro-batch on each device that computes layers; logits only for the
  // rows a step samples from (one per running sequence, at most a micro-batch).
  // The forward pass's workspace, plus the CPU kernels' activation scratch (matmul converts a
  // micro-batch to 8-bit partner rows; kernels::cpu::CpuBackend holds it).
  // A GPU's kernels hold no scratch of their own.
  const int threads = r.n_threads > 0 ? r.n_threads : physical_cores();
  const uint64_t workspace = model::workspace_bytes(spec, p.request.n_ubatch);
  const int64_t cols = std::max(model::max_matmul_cols(spec), media_matmul_cols(in, p.request));
  const uint64_t cpu_scratch =
      r.reference_kernels ? 0 : kernels::cpu::matmul_scratch_bytes(p.request.n_ubatch, cols, threads);
  const int compute_device = has_gpu ? 1 : 0;
  if (has_gpu) {
    p.items.push_back(
        {.name = "activations", .kind = ItemKind::kActivations, .device = 1, .bytes = workspace});
  }
  if (!has_gpu || r.n_cpu_layers > 0 || r.experts_on_host) {
    p.items.push_back({.name = "activations",
                       .kind = ItemKind::kActivations,
                       .device = 0,
                       .bytes = workspace + cpu_scratch});
  }
  const uint64_t n_out = std::min(r.n_slots, p.request.n_ubatch);
  p.items.push_back({.name = "logits",
                     .kind = ItemKind::kLogits,
                     .device = 0,
                     .bytes = n_out * static_cast<uint64_t>(spec.n_vocab) * sizeof(float)});
  // Host structures: tokenizer, KV bookkeeping, sampler state per slot.
  HR_ASSIGN_OR_RETURN(uint64_t bookkeeping, kv::bookkeeping_bytes(layers, p.kv_config));
  p.items.push_back({.name = "tokenizer",
                     .kind = ItemKind::kHost,
                     .device = 0,
                     .bytes = tokenizer_bytes(in.file)});
  p.items.push_back(
      {.name = "kv bookkeeping", .kind = ItemKind::kHost, .device = 0, .bytes = bookkeeping});
  p.items.push_back({.name = "samplers",
                     .kind = ItemKind::kHost,
                     .device = 0,
                     .bytes = static_cast<uint64_t>(r.n_slots) * spec.n_vocab * 16});
  HR_TRY(add_media_items(in, p, threads));

  // Prediction: decode reads every byte it needs once per token; time = bytes / bandwidth per
  // device, plus the activations that cross between host and GPU.
  p.prediction.seconds_per_device.assign(p.devices.size(), 0.0);
  for (const auto& i : p.items) {
    p.prediction.bytes_per_token += i.bytes_per_token;
    p.prediction.seconds_per_device[i.device] += i.bytes_per_token / p.devices[i.device].bandwidth;
  }
  if (has_gpu) {
    // What crosses per token (model/lanes.h): with layers on the CPU the residual stream goes
    // there and back, and the per-layer inputs go there once; the per-layer-embedding rows come
    // up from a host table; experts on the host take the router's and their own input down and
    // their sum up, per MoE layer.
    const double x = spec.n_embd * 4.0, ple = 4.0 * spec.n_embd_per_layer * spec.n_layer;
    const double link = p.devices[1].link_bandwidth;
    constexpr double kLatency = 10e-6;  // per copy
    auto copy = [&](double bytes) { return bytes / link + kLatency; };
    double t = 0;
    if (r.n_cpu_layers > 0) t += 2 * copy(x) + (ple > 0 ? copy(ple) : 0);
    if (r.ple_on_host && ple > 0) t += copy(ple);
    if (r.experts_on_host) {
      for (const auto& l : spec.layers) t += l.is_moe() ? 3 * copy(x) : 0;
    }
    p.prediction.transfer_seconds = t;
  }
  double seconds = p.prediction.transfer_seconds;
  for (double s : p.prediction.seconds_per_device) seconds += s;
  p.prediction.tokens_per_second = seconds > 0 ? 1.0 / seconds : 0;
  // At the full context the KV reads grow; the weights do not.
  const uint64_t kv_full = kv::read_bytes_per_token(layers, p.kv_config, r.n_ctx - 1);
  const uint64_t kv_zero = kv::read_bytes_per_token(layers, p.kv_config, 0);
  p.prediction.bytes_per_token_full = p.prediction.bytes_per_token + (kv_full - kv_zero);
  const double kv_device_bw = p.devices[compute_device].bandwidth;
  p.prediction.tokens_per_second_full = 1.0 / (seconds + (kv_full - kv_zero) / kv_device_bw);

  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    const uint64_t used = p.bytes_on(d);
    if (used > p.devices[d].budget_bytes) {
      p.fits = false;
      p.problems.push_back(fmt::format("{} needs {} but its budget is {}", p.devices[d].name,
                                       util::format_bytes(used),
                                       util::format_bytes(p.devices[d].budget_bytes)));
    }
  }
  return p;
}

namespace {

std::string kv_flags(tensor::DType k, tensor::DType v) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  return fmt::format("--kv-type-k {} --kv-type-v {}", lower(gguf::tensor_type_name(k)),
                     lower(gguf::tensor_type_name(v)));
}

// The largest context (a multiple of 256) that fits, or 0.
int largest_fitting_context(const PlanInput& in, Request r) {
  int lo = 0, hi = r.n_ctx / 256 - (r.n_ctx % 256 == 0 ? 1 : 0);
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    r.n_ctx = mid * 256;
    auto p = make_plan(in, r);
    if (p && p->fits)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo * 256;
}

void consider(const PlanInput& in, std::vector<Alternative>& out, std::string change,
              std::string flags, const Request& r, bool automatic = true) {
  auto p = make_plan(in, r);
  if (!p || !p->fits) return;
  out.push_back({std::move(change), std::move(flags), r, automatic, p->prediction.tokens_per_second,
                 p->prediction.tokens_per_second_full});
}

std::vector<Alternative> alternatives(const PlanInput& in, const Request& r, const Plan& original) {
  std::vector<Alternative> out;
  const bool has_gpu = original.devices.size() > 1;  // placeable devices only
  // Quantized KV cache, written quantized as it is computed (no full-precision prefill copy).
  for (auto [k, v] : {std::pair{tensor::DType::kQ8_0, tensor::DType::kQ8_0},
                      std::pair{tensor::DType::kQ4_0, tensor::DType::kQ4_0}}) {
    if (r.k_type == k && r.v_type == v) continue;
    Request q = r;
    q.k_type = k;
    q.v_type = v;
    consider(in, out, fmt::format("KV cache {}", gguf::tensor_type_name(k)), kv_flags(k, v), q);
  }
  // A shorter context.
  if (int ctx = largest_fitting_context(in, r); ctx > 0) {
    Request c = r;
    c.n_ctx = ctx;
    consider(in, out, fmt::format("context {} instead of {}", ctx, r.n_ctx),
             fmt::format("--ctx {}", ctx), c);
  }
  if (has_gpu) {
    if (in.spec.n_embd_per_layer > 0 && !r.ple_on_host) {
      Request h = r;
      h.ple_on_host = true;
      consider(in, out, "per-layer embedding table on the host (it is only gathered by row)",
               "--ple-on-host", h);
    }
    bool moe = false;
    for (const auto& l : in.spec.layers) moe = moe || l.is_moe();
    if (moe && !r.experts_on_host) {
      Request e = r;
      e.experts_on_host = true;
      consider(in, out, "MoE experts on the host", "--experts-on-host", e);
    }
    for (int n = std::max(1, r.n_cpu_layers + 1); n <= in.spec.n_layer; ++n) {
      Request l = r;
      l.n_cpu_layers = n;
      auto p = make_plan(in, l);
      if (p && p->fits) {
        consider(in, out,
                 fmt::format("{} of {} layers on the CPU (partial offload)", n, in.spec.n_layer),
                 fmt::format("--cpu-layers {}", n), l);
        break;
      }
    }
  }
  // A smaller weight quantization, estimated by scaling the matrices to fewer bits per weight;
  // it needs a re-quantized file, so --fit never picks it.
  auto is_matrix = [](const Item& i) {
    return i.kind == ItemKind::kWeights && i.weight_class != model::TensorClass::kNorm &&
           i.weight_class != model::TensorClass::kOther;
  };
  uint64_t matrix_bytes = 0, matrix_read = 0, elements = 0;
  for (const auto& i : original.items) {
    if (is_matrix(i)) {
      matrix_bytes += i.bytes;
      matrix_read += i.bytes_per_token;
    }
  }
  for (const auto& t : in.file.tensors()) {
    const auto cls = model::classify_tensor(t.name).cls;
    if (cls != model::TensorClass::kNorm && cls != model::TensorClass::kOther)
      elements += t.n_elements;
  }
  const double bpw_now =
      elements ? 8.0 * static_cast<double>(matrix_bytes) / static_cast<double>(elements) : 0;
  for (auto type : {gguf::TensorType::kQ6_K, gguf::TensorType::kQ5_K, gguf::TensorType::kQ4_K,
                    gguf::TensorType::kQ3_K, gguf::TensorType::kQ2_K}) {
    const double shrink = gguf::bits_per_weight(type) / bpw_now;
    if (shrink >= 0.99) continue;
    bool fits = true;
    for (int d = 0; d < static_cast<int>(original.devices.size()); ++d) {
      double bytes = static_cast<double>(original.bytes_on(d));
      for (const auto& i : original.items) {
        if (is_matrix(i) && i.device == d) bytes -= i.bytes * (1.0 - shrink);
      }
      if (bytes > static_cast<double>(original.devices[d].budget_bytes)) fits = false;
    }
    if (!fits) continue;
    const double read_now = static_cast<double>(original.prediction.bytes_per_token);
    const double read_new = read_now - matrix_read * (1.0 - shrink);
    out.push_back(
        {fmt::format("a smaller weight quantization, {} (≈{} of matrices instead of {}; needs a "
                     "re-quantized file)",
                     gguf::tensor_type_name(type),
                     util::format_bytes(static_cast<uint64_t>(matrix_bytes * shrink)),
                     util::format_bytes(matrix_bytes)),
         fmt::format("-m a {} file", gguf::tensor_type_name(type)), r, false,
         original.prediction.tokens_per_second * read_now / std::max(1.0, read_new),
         original.prediction.tokens_per_second_full * read_now / std::max(1.0, read_new)});
    break;
  }
  // If no single change fits, try the two most useful together.
  if (out.empty()) {
    Request both = r;
    both.k_type = both.v_type = tensor::DType::kQ8_0;
    if (int ctx = largest_fitting_context(in, both); ctx > 0) {
      both.n_ctx = ctx;
      consider(in, out, fmt::format("KV cache Q8_0 and context {}", ctx),
               fmt::format("{} --ctx {}", kv_flags(both.k_type, both.v_type), ctx), both);
    }
  }
  // Fastest first at depth 0; among equals, the one that stays faster as the context fills.
  auto key = [](const Alternative& a) {
    return std::pair{std::round(a.tokens_per_second * 10), a.tokens_per_second_full};
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Alternative& a, const Alternative& b) { return key(a) > key(b); });
  return out;
}

}  // namespace

util::Result<Plan> plan_with_fit(const PlanInput& in, const Request& request, bool fit) {
  HR_ASSIGN_OR_RETURN(Plan p, make_plan(in, request));
  if (p.fits) return p;
  p.alternatives = alternatives(in, request, p);
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
