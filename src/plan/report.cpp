// Plan reports: a per-device, per-class table with shares and the predicted speed.
#include "plan/report.h"

#include <algorithm>

#include "util/units.h"

namespace plan {
namespace {

std::string lower_type(tensor::DType t) {
  std::string s(gguf::tensor_type_name(t));
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string item_label(const Item& i) {
  if (i.kind == ItemKind::kWeights) return "weights: " + i.name;
  return i.name;
}

double gbps(double bytes_per_second) {
  return bytes_per_second / 1e9;
}

// "media: an image of up to 280 tokens takes 6.8% of the 4096-token context and 12.3 MiB of KV
// cache per sequence; …"
std::string media_line(const Plan& p) {
  const int n_ctx = p.request.n_ctx;
  auto cost = [&](int tokens, uint64_t kv) {
    return fmt::format("{} tokens, {:.1f}% of the {}-token context and {} of KV cache per sequence",
                       tokens, 100.0 * tokens / n_ctx, n_ctx, util::format_bytes(kv));
  };
  std::string out = "media:";
  if (p.media.image_tokens > 0)
    out += fmt::format(" an image of the largest budget takes {}",
                       cost(p.media.image_tokens, p.media.image_kv_bytes));
  if (p.media.audio_tokens > 0) {
    out += fmt::format("{} a {:.0f} s clip takes {}", p.media.image_tokens > 0 ? ";" : "",
                       p.request.audio_seconds, cost(p.media.audio_tokens, p.media.audio_kv_bytes));
  }
  return out + "\n";
}

// "KV pool: …" — each group's pool, what a sequence holds of it, and where the size came from.
std::string format_kv_pool(const Plan& p) {
  const int bc = p.kv_config.block_cells;
  std::string out = "\nKV pool: ";
  if (p.kv_groups.empty()) return out + "none\n";
  out += fmt::format("{} ({}), blocks of {} positions\n", util::format_bytes(p.kv_budget),
                     p.kv_budget_source, bc);
  for (const auto& g : p.kv_groups) {
    const uint64_t bytes = g.bytes_per_block * g.n_blocks;
    if (!g.sliding) {
      const int positions = g.n_blocks * bc;
      out += fmt::format(
          "  full-attention layers: {} blocks, {} positions ({:.1f} contexts of {}), {}; taken as "
          "sequences grow{}\n",
          g.n_blocks, positions, static_cast<double>(positions) / p.request.n_ctx, p.request.n_ctx,
          util::format_bytes(bytes),
          p.kv_config.prefix_cache ? ", kept for prefix reuse until needed" : "");
    } else {
      out += fmt::format(
          "  sliding-window layers (window {}): {} blocks, {}; a ring of {} blocks per running "
          "sequence (window + micro-batch {} + a block){}\n",
          g.window, g.n_blocks, util::format_bytes(bytes), g.blocks_per_sequence,
          p.request.n_ubatch,
          p.kv_config.prefix_cache
              ? fmt::format(", and {} per slot for the windows of cached prefixes", g.window_blocks)
              : "");
    }
  }
  return out;
}

}  // namespace

std::string format_plan(const Plan& p, const model::Spec& spec, const std::string& source) {
  const Request& r = p.request;
  std::string out = fmt::format("plan for {} ({}, {} layers)\n", source,
                                model::arch_name(spec.arch), spec.n_layer);
  out += fmt::format("request: context {}, KV {}/{}, {} slot{}, micro-batch {}", r.n_ctx,
                     lower_type(r.k_type), lower_type(r.v_type), r.n_slots,
                     r.n_slots == 1 ? "" : "s", r.n_ubatch);
  if (r.lora.enabled())
    out += fmt::format(", {} LoRA adapter slot{} of rank ≤ {}", r.lora.max_loras,
                       r.lora.max_loras == 1 ? "" : "s", r.lora.max_rank);
  out += "\n";
  if (!p.applied.empty()) out += fmt::format("--fit applied: {}\n", p.applied);
  for (const auto& note : p.notes) out += fmt::format("note: {}\n", note);
  out += fmt::format("\n{:<44} {:>12} {:>12} {:>7}  {}\n", "device", "budget", "planned", "share",
                     "bandwidth");
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const Device& dev = p.devices[d];
    const uint64_t used = p.bytes_on(static_cast<int>(d));
    out +=
        fmt::format("{:<44} {:>12} {:>12} {:>6.1f}%  {:.1f} GB/s\n", dev.name,
                    util::format_bytes(dev.budget_bytes), util::format_bytes(used),
                    dev.budget_bytes ? 100.0 * used / dev.budget_bytes : 0.0, gbps(dev.bandwidth));
  }
  uint64_t total = 0;
  for (const auto& i : p.items) total += i.bytes;
  out += fmt::format("\n{:<34} {:<6} {:>12} {:>7} {:>14}\n", "what", "device", "bytes", "share",
                     "read/token");
  for (const auto& i : p.items) {
    out += fmt::format("{:<34} {:<6} {:>12} {:>6.1f}% {:>14}\n", item_label(i),
                       p.devices[i.device].kind == DeviceKind::kCpu ? "cpu" : "gpu",
                       util::format_bytes(i.bytes), total ? 100.0 * i.bytes / total : 0.0,
                       i.bytes_per_token ? util::format_bytes(i.bytes_per_token) : "-");
  }
  out += fmt::format("{:<34} {:<6} {:>12}\n", "total", "", util::format_bytes(total));
  out += format_kv_pool(p);
  if (p.media.image_tokens > 0 || p.media.audio_tokens > 0) out += media_line(p);
  const Prediction& pr = p.prediction;
  out += fmt::format(
      "\npredicted decode: {:.1f} tok/s at depth 0 ({} read per token), {:.1f} tok/s with the "
      "context "
      "full ({} per token) — bandwidth-bound: bytes per token / measured bandwidth\n",
      pr.tokens_per_second, util::format_bytes(pr.bytes_per_token), pr.tokens_per_second_full,
      util::format_bytes(pr.bytes_per_token_full));
  const bool reads_on_gpu = std::any_of(p.items.begin(), p.items.end(), [&](const auto& i) {
    return i.bytes_per_token > 0 && p.devices[i.device].kind == DeviceKind::kGpu;
  });
  if (reads_on_gpu)
    out +=
        "  on a GPU that is its bandwidth roofline, an upper bound: headroom's CUDA decode runs "
        "far below it so far (5-16 % on an H200; docs/cuda.md)\n";
  if (pr.transfer_seconds > 0)
    out += fmt::format("host↔GPU transfers: {:.3f} ms per token\n", pr.transfer_seconds * 1e3);
  for (const auto& d : p.devices) {
    out += fmt::format("  {}: budget from {}; bandwidth {}\n", d.name, d.budget_source,
                       d.bandwidth_source);
  }
  for (const auto& d : p.unused_devices) {
    out += fmt::format("  {}: not used ({}); budget {} from {}; bandwidth {:.1f} GB/s, {}\n",
                       d.name, d.unusable_reason, util::format_bytes(d.budget_bytes),
                       d.budget_source, gbps(d.bandwidth), d.bandwidth_source);
  }
  if (!p.fits) {
    out += "\nDOES NOT FIT:\n";
    for (const auto& problem : p.problems) out += "  " + problem + "\n";
    if (p.alternatives.empty())
      out += "  nothing fits: " + p.nothing_fits + "; use a smaller model\n";
    else
      out += "changes that fit, fastest first (decode tok/s at depth 0 / with the context full):\n";
    for (const auto& a : p.alternatives) {
      out += fmt::format("  {:>7.1f} / {:<7.1f} tok/s  {}  [{}]{}\n", a.tokens_per_second,
                         a.tokens_per_second_full, a.change, a.flags,
                         a.automatic ? "" : "  (not applied by --fit)");
    }
  }
  return out;
}

nlohmann::ordered_json plan_json(const Plan& p, const model::Spec& spec,
                                 const std::string& source) {
  nlohmann::ordered_json j;
  j["model"] = source;
  j["architecture"] = model::arch_name(spec.arch);
  j["request"] = {{"ctx", p.request.n_ctx},
                  {"kv_type_k", lower_type(p.request.k_type)},
                  {"kv_type_v", lower_type(p.request.v_type)},
                  {"slots", p.request.n_slots},
                  {"ubatch", p.request.n_ubatch},
                  {"cpu_layers", p.request.n_cpu_layers},
                  {"ple_on_host", p.request.ple_on_host},
                  {"experts_on_host", p.request.experts_on_host},
                  {"kv_budget", p.request.kv_budget},
                  {"prefix_cache", p.request.prefix_cache},
                  {"image_tokens", p.request.image_tokens},
                  {"audio_seconds", p.request.audio_seconds},
                  {"max_loras", p.request.lora.max_loras},
                  {"max_lora_rank", p.request.lora.max_rank}};
  j["fits"] = p.fits;
  if (!p.applied.empty()) j["fit_applied"] = p.applied;
  j["devices"] = nlohmann::ordered_json::array();
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const Device& dev = p.devices[d];
    j["devices"].push_back({{"name", dev.name},
                            {"kind", dev.kind == DeviceKind::kCpu ? "cpu" : "gpu"},
                            {"budget_bytes", dev.budget_bytes},
                            {"budget_source", dev.budget_source},
                            {"planned_bytes", p.bytes_on(static_cast<int>(d))},
                            {"bandwidth_bytes_per_s", dev.bandwidth},
                            {"bandwidth_source", dev.bandwidth_source},
                            {"simulated", dev.simulated}});
  }
  j["unused_devices"] = nlohmann::ordered_json::array();
  for (const Device& dev : p.unused_devices) {
    j["unused_devices"].push_back({{"name", dev.name},
                                   {"kind", dev.kind == DeviceKind::kCpu ? "cpu" : "gpu"},
                                   {"total_bytes", dev.total_bytes},
                                   {"budget_bytes", dev.budget_bytes},
                                   {"budget_source", dev.budget_source},
                                   {"bandwidth_bytes_per_s", dev.bandwidth},
                                   {"bandwidth_source", dev.bandwidth_source},
                                   {"unusable_reason", dev.unusable_reason}});
  }
  j["notes"] = p.notes;
  j["items"] = nlohmann::ordered_json::array();
  for (const auto& i : p.items) {
    nlohmann::ordered_json item = {{"name", item_label(i)},
                                   {"kind", item_kind_name(i.kind)},
                                   {"device", i.device},
                                   {"bytes", i.bytes},
                                   {"bytes_per_token", i.bytes_per_token}};
    j["items"].push_back(item);
  }
  j["totals"] = {{"weights", p.bytes_of(ItemKind::kWeights)},
                 {"kv_cache", p.bytes_of(ItemKind::kKvCache)},
                 {"activations", p.bytes_of(ItemKind::kActivations)},
                 {"logits", p.bytes_of(ItemKind::kLogits)},
                 {"host", p.bytes_of(ItemKind::kHost)}};
  j["placement"] = {{"main_device", p.placement.main_device},
                    {"layer_device", p.placement.layer_device},
                    {"experts_device", p.placement.experts_device},
                    {"ple_device", p.placement.ple_device}};
  j["kv_pool"] = {{"bytes", p.kv_budget},
                  {"source", p.kv_budget_source},
                  {"positions", p.kv_positions()},
                  {"prefix_cache", p.kv_config.prefix_cache}};
  j["kv_groups"] = nlohmann::ordered_json::array();
  for (const auto& g : p.kv_groups) {
    j["kv_groups"].push_back({{"sliding", g.sliding},
                              {"window", g.window},
                              {"cells_per_sequence", g.cells_per_sequence},
                              {"blocks_per_sequence", g.blocks_per_sequence},
                              {"window_blocks", g.window_blocks},
                              {"block_cells", p.kv_config.block_cells},
                              {"blocks", g.n_blocks},
                              {"bytes", g.bytes_per_block * g.n_blocks}});
  }
  j["prediction"] = {{"decode_tokens_per_second", p.prediction.tokens_per_second},
                     {"decode_tokens_per_second_full_context", p.prediction.tokens_per_second_full},
                     {"bytes_per_token", p.prediction.bytes_per_token},
                     {"bytes_per_token_full_context", p.prediction.bytes_per_token_full},
                     {"transfer_seconds_per_token", p.prediction.transfer_seconds}};
  if (p.media.image_tokens > 0 || p.media.audio_tokens > 0) {
    j["media"] = {{"image_tokens", p.media.image_tokens},
                  {"image_kv_bytes", p.media.image_kv_bytes},
                  {"audio_seconds", p.request.audio_seconds},
                  {"audio_tokens", p.media.audio_tokens},
                  {"audio_kv_bytes", p.media.audio_kv_bytes}};
  }
  j["problems"] = p.problems;
  if (!p.nothing_fits.empty()) j["nothing_fits"] = p.nothing_fits;
  j["alternatives"] = nlohmann::ordered_json::array();
  for (const auto& a : p.alternatives) {
    j["alternatives"].push_back(
        {{"change", a.change},
         {"flags", a.flags},
         {"automatic", a.automatic},
         {"decode_tokens_per_second", a.tokens_per_second},
         {"decode_tokens_per_second_full_context", a.tokens_per_second_full}});
  }
  return j;
}

}  // namespace plan
