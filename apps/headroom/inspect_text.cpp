// The text view of the inspect report: metadata, tensor table, totals and architecture summary.
#include <fmt/format.h>

#include <map>

#include "inspect_report.h"
#include "util/units.h"

namespace cli {
namespace {

constexpr size_t kMaxShownString = 64;  // longer strings (chat templates) are cut in text

// Length of the valid UTF-8 sequence starting at s[i], or 0 if there is none.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// A file string for the terminal: control characters and invalid UTF-8 escaped, cut after
// max_chars characters (the caller then adds the byte length, so nothing is hidden silently).
struct Shown {
  std::string text;
  bool cut = false;
};
Shown escape(std::string_view s, size_t max_chars) {
  Shown out;
  size_t chars = 0, i = 0;
  while (i < s.size() && chars < max_chars) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_length(s, i);
    if (c == '"' || c == '\\') {
      out.text += '\\';
      out.text += static_cast<char>(c);
    } else if (c == '\n') {
      out.text += "\\n";
    } else if (c == '\t') {
      out.text += "\\t";
    } else if (n == 0 || c < 0x20 || c == 0x7f) {
      out.text += fmt::format("\\x{:02x}", c);
    } else {
      out.text.append(s.substr(i, n));
    }
    i += n == 0 ? 1 : n;
    ++chars;
  }
  out.cut = i < s.size();
  return out;
}

std::string shown(std::string_view s, size_t max_chars = kMaxShownString) {
  Shown e = escape(s, max_chars);
  return e.cut ? fmt::format("{}… ({} bytes)", e.text, s.size()) : e.text;
}

std::string shown_quoted(std::string_view s, size_t max_chars = kMaxShownString) {
  Shown e = escape(s, max_chars);
  return e.cut ? fmt::format("\"{}\"… ({} bytes)", e.text, s.size()) : "\"" + e.text + "\"";
}

std::string scalar_text(const Json& type, const Json& value) {
  if (type == "string") return shown_quoted(value.get<std::string>());
  return value.dump();
}

std::string value_text(const Json& v) {
  if (v["type"] != "array") return scalar_text(v["type"], v["value"]);
  std::string out = "[";
  const Json& values = v["values"];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    if (v["element_type"] == "array") {
      out += value_text(values[i]);
    } else if (v["element_type"] == "string") {
      out += shown_quoted(values[i].get<std::string>(), 24);
    } else {
      out += values[i].dump();
    }
  }
  const uint64_t length = v["length"].get<uint64_t>();
  if (length > values.size()) out += fmt::format(", … {} more", length - values.size());
  return out + "]";
}

std::string type_text(const Json& v) {
  if (v["type"] != "array") return v["type"].get<std::string>();
  return fmt::format("{}[{}]", v["element_type"].get<std::string>(), v["length"].get<uint64_t>());
}

// [1, 2, 3, 5, 7, 8] → "1-3, 5, 7-8".
std::string ranges(const std::vector<int>& xs) {
  std::string out;
  for (size_t i = 0; i < xs.size();) {
    size_t j = i;
    while (j + 1 < xs.size() && xs[j + 1] == xs[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", xs[i]) : fmt::format("{}-{}", xs[i], xs[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// "SSSSFSSSSF" → "(SSSSF × 2)"; "" when the pattern does not repeat.
std::string period_text(const std::string& pattern) {
  const size_t n = pattern.size();
  for (size_t p = 1; p < n; ++p) {
    if (n % p != 0) continue;
    bool repeats = true;
    for (size_t i = p; i < n && repeats; ++i) repeats = pattern[i] == pattern[i - p];
    if (repeats) return fmt::format(" ({} × {})", pattern.substr(0, p), n / p);
  }
  return "";
}

std::string bytes_text(uint64_t bytes) {
  return bytes < 1024 ? fmt::format("{} B", bytes)
                      : fmt::format("{} B ({})", bytes, util::format_bytes(bytes));
}

std::string shape_text(const Json& shape) {
  std::string out;
  for (const auto& d : shape) out += (out.empty() ? "" : " x ") + d.dump();
  return out;
}

void metadata_section(const Json& r, fmt::memory_buffer& out) {
  const Json& metadata = r["metadata"];
  fmt::format_to(std::back_inserter(out), "\nMetadata: {} keys\n", metadata.size());
  size_t key_width = 0, type_width = 0;
  for (const auto& [key, v] : metadata.items()) {
    key_width = std::max(key_width, std::min<size_t>(key.size(), 48));
    type_width = std::max(type_width, type_text(v).size());
  }
  for (const auto& [key, v] : metadata.items()) {
    fmt::format_to(std::back_inserter(out), "  {:<{}}  {:<{}}  {}\n", key, key_width, type_text(v),
                   type_width, value_text(v));
  }
}

void tensor_section(const Json& r, fmt::memory_buffer& out) {
  const Json& tensors = r["tensors"];
  fmt::format_to(std::back_inserter(out),
                 "\nTensors: {} (offsets relative to the data section at byte {})\n",
                 tensors.size(), r["data_offset"].get<uint64_t>());
  if (tensors.empty()) return;
  size_t name_width = 4, shape_width = 5;
  for (const auto& t : tensors) {
    name_width = std::max(name_width, shown(t["name"].get<std::string>()).size());
    shape_width = std::max(shape_width, shape_text(t["shape"]).size());
  }
  const auto row = [&](std::string_view name, std::string_view type, std::string_view shape,
                       std::string_view params, std::string_view bytes, std::string_view offset) {
    fmt::format_to(std::back_inserter(out), "  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}  {:>12}\n",
                   name, name_width, type, shape, shape_width, params, bytes, offset);
  };
  row("name", "type", "shape", "parameters", "bytes", "offset");
  for (const auto& t : tensors) {
    row(shown(t["name"].get<std::string>()), t["type"].get<std::string>(), shape_text(t["shape"]),
        t["elements"].dump(), t["bytes"].dump(), t["offset"].dump());
  }
}

void totals_section(const Json& r, fmt::memory_buffer& out) {
  const Json& totals = r["totals"];
  const auto row = [&](std::string_view what, const Json& t) {
    const uint64_t n = t["tensors"].get<uint64_t>();
    fmt::format_to(std::back_inserter(out), "  {:<20}  {:>6} {:<7}  {:>14} parameters  {}\n", what,
                   n, n == 1 ? "tensor" : "tensors", t["parameters"].get<uint64_t>(),
                   bytes_text(t["bytes"].get<uint64_t>()));
  };
  if (totals["tensors"].get<uint64_t>() == 0) return;
  fmt::format_to(std::back_inserter(out), "\nTotals by type:\n");
  for (const auto& t : totals["by_type"]) row(t["type"].get<std::string>(), t);
  fmt::format_to(std::back_inserter(out), "\nTotals by class:\n");
  for (const auto& t : totals["by_class"]) {
    if (t["tensors"].get<uint64_t>() > 0) row(t["class"].get<std::string>(), t);
  }
  row("total", totals);
}

// "layers 5-6 read layer 3's cache; layer 7 reads layer 4's"
std::string sharing_text(const Json& per_layer) {
  std::map<int, std::vector<int>> readers;  // source layer → layers reading its cache
  for (const auto& l : per_layer) {
    const int il = l["layer"].get<int>(), source = l["kv_source"].get<int>();
    if (source != il) readers[source].push_back(il);
  }
  std::string out;
  for (const auto& [source, layers] : readers) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{} {} {} cache", layers.size() == 1 ? "layer" : "layers", ranges(layers),
                       fmt::format("{} layer {}'s", layers.size() == 1 ? "reads" : "read", source));
  }
  return out.empty() ? "none (every layer owns its KV cache)" : out;
}

// A projector: what each encoder is and what it takes.
void projector_section(const Json& p, fmt::memory_buffer& out) {
  auto o = std::back_inserter(out);
  if (p.contains("error")) {
    fmt::format_to(o, "\nProjector: no summary: {}\n", p["error"].get<std::string>());
    return;
  }
  fmt::format_to(o, "\nProjector: {} — Gemma 4 encoders embedding into a text model {} wide\n",
                 shown_quoted(p["name"].get<std::string>()), p["projects_to"].get<int>());
  if (p.contains("vision")) {
    const Json& v = p["vision"];
    const int side = v["patch_size"].get<int>() * v["pooling"].get<int>();
    fmt::format_to(o,
                   "  vision encoder: {} layers, width {}, {} heads x {} ({} KV heads), FFN {}, {} px "
                   "patches, {}x{} pooling, {} positions per side{}; {}\n",
                   v["layers"].get<int>(), v["embedding_length"].get<int>(), v["heads"].get<int>(),
                   v["head_dim"].get<int>(), v["kv_heads"].get<int>(), v["ffn_length"].get<int>(),
                   v["patch_size"].get<int>(), v["pooling"].get<int>(), v["pooling"].get<int>(),
                   v["positions"].get<int>(), v["clipped_linears"].get<bool>() ? ", clipped linears" : "",
                   bytes_text(v["weights_bytes"].get<uint64_t>()));
    fmt::format_to(o, "    images: 70, 140, 280, 560 or 1120 soft tokens (default {}), one per {}x{} pixels\n",
                   v["default_image_tokens"].get<int>(), side, side);
  }
  if (p.contains("audio")) {
    const Json& a = p["audio"];
    fmt::format_to(o,
                   "  audio encoder: {} layers, width {}, {} heads x {}, FFN {}, {} mel bins, sub-sampling "
                   "convolutions {}/{}, depthwise kernel {}, output {}{}; {}\n",
                   a["layers"].get<int>(), a["embedding_length"].get<int>(), a["heads"].get<int>(),
                   a["head_dim"].get<int>(), a["ffn_length"].get<int>(), a["mel_bins"].get<int>(),
                   a["conv_channels"][0].get<int>(), a["conv_channels"][1].get<int>(),
                   a["conv_kernel"].get<int>(), a["output_length"].get<int>(),
                   a["clipped_linears"].get<bool>() ? ", clipped linears" : "",
                   bytes_text(a["weights_bytes"].get<uint64_t>()));
    fmt::format_to(o, "    audio: {} Hz, {} soft tokens per second, clips up to {} s ({} tokens)\n",
                   a["sample_rate"].get<int>(), a["tokens_per_second"].get<int>(), a["max_seconds"].dump(),
                   a["max_tokens"].get<int>());
  }
}

void architecture_section(const Json& r, fmt::memory_buffer& out) {
  const Json& a = r["architecture"];
  if (!a.is_null() && a.contains("projector")) return projector_section(a["projector"], out);
  if (a.is_null()) {
    fmt::format_to(std::back_inserter(out),
                   "\nArchitecture: none (no general.architecture: not a model, e.g. a "
                   "vocabulary)\n");
    return;
  }
  const std::string name = a["name"].is_null() ? "?" : a["name"].get<std::string>();
  if (a.contains("error")) {
    fmt::format_to(std::back_inserter(out), "\nArchitecture: {} — no summary: {}\n", shown(name),
                   a["error"].get<std::string>());
    return;
  }
  fmt::format_to(std::back_inserter(out),
                 "\nArchitecture: {} ({}) — {} layers, embedding {}, vocabulary {}, context {}\n",
                 name, shown_quoted(a["model_name"].get<std::string>()), a["layers"].get<int>(),
                 a["embedding_length"].get<int>(), a["vocab_size"].get<int>(),
                 a["context_length"].get<int>());
  if (a["per_layer_embedding_length"].get<int>() > 0) {
    fmt::format_to(std::back_inserter(out), "  per-layer embedding width {}\n",
                   a["per_layer_embedding_length"].get<int>());
  }
  const std::string cache_type = a["kv_cache_type"].get<std::string>();
  fmt::format_to(std::back_inserter(out), "  {:<9} {:>5} {:>8} {:>8} {:>6} {:>6} {:>12}  {}\n",
                 "attention", "heads", "kv heads", "head dim", "window", "own KV", "KV B/token",
                 "layers");
  for (const auto& g : a["attention_groups"]) {
    const int window = g["window"].get<int>();
    fmt::format_to(std::back_inserter(out), "  {:<9} {:>5} {:>8} {:>8} {:>6} {:>6} {:>12}  {}\n",
                   g["attention"].get<std::string>(), g["heads"].get<int>(),
                   g["kv_heads"].get<int>(), g["head_dim"].get<int>(),
                   window > 0 ? std::to_string(window) : "-", g["layers_owning_kv"].get<int>(),
                   g["kv_bytes_per_token"].get<uint64_t>(),
                   ranges(g["layers"].get<std::vector<int>>()));
  }
  const std::string pattern = a["sliding_pattern"].get<std::string>();
  const bool any_sliding = pattern.find('S') != std::string::npos;
  fmt::format_to(std::back_inserter(out), "  sliding pattern: {}{}\n", pattern,
                 any_sliding ? period_text(pattern) +
                                   fmt::format(", window {}", a["sliding_window"].get<int>())
                             : " (all layers full attention)");
  fmt::format_to(std::back_inserter(out), "  shared-KV layers: {}\n", sharing_text(a["per_layer"]));
  const Json& kv = a["kv_bytes_per_token"];
  fmt::format_to(std::back_inserter(out),
                 "  KV cache per token ({}): {} B — {} B in full-attention layers, {} B in sliding "
                 "layers (which stop growing at their window)\n",
                 cache_type, kv["total"].get<uint64_t>(), kv["full_layers"].get<uint64_t>(),
                 kv["sliding_layers"].get<uint64_t>());
  fmt::format_to(std::back_inserter(out),
                 "  {:>5}  {:<9} {:>5} {:>8} {:>8} {:>6} {:>9} {:>10} {:>6} {:>10} {:>9}\n",
                 "layer", "attention", "heads", "kv heads", "head dim", "window", "kv source",
                 "KV B/token", "ffn", "rope theta", "rope dims");
  for (const auto& l : a["per_layer"]) {
    const int window = l["window"].get<int>();
    fmt::format_to(std::back_inserter(out),
                   "  {:>5}  {:<9} {:>5} {:>8} {:>8} {:>6} {:>9} {:>10} {:>6} {:>10} {:>9}{}\n",
                   l["layer"].get<int>(), l["attention"].get<std::string>(), l["heads"].get<int>(),
                   l["kv_heads"].get<int>(), l["head_dim"].get<int>(),
                   window > 0 ? std::to_string(window) : "-", l["kv_source"].get<int>(),
                   l["kv_bytes_per_token"].get<uint64_t>(), l["ffn_length"].get<int>(),
                   l["rope_theta"].dump(), l["rope_dims"].get<int>(),
                   l["experts"].get<int>() > 0
                       ? fmt::format("  experts {} (top {})", l["experts"].get<int>(),
                                     l["experts_used"].get<int>())
                       : "");
  }
}

}  // namespace

std::string render_inspect_text(const Json& r) {
  fmt::memory_buffer out;
  const uint64_t n_tensors = r["tensors"].size();
  fmt::format_to(std::back_inserter(out), "{}: GGUF v{}, {}, alignment {}, {}\n",
                 r["file"].get<std::string>(), r["gguf_version"].get<int>(),
                 bytes_text(r["file_bytes"].get<uint64_t>()), r["alignment"].get<uint64_t>(),
                 n_tensors > 0
                     ? fmt::format("tensor data at byte {}", r["data_offset"].get<uint64_t>())
                     : std::string("no tensors"));
  metadata_section(r, out);
  tensor_section(r, out);
  totals_section(r, out);
  architecture_section(r, out);
  return fmt::to_string(out);
}

}  // namespace cli
