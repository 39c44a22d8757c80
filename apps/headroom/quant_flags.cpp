// Shared quantization flags of quantize and convert.
#include "quant_flags.h"

#include <cstdio>

#include "util/units.h"

namespace cli {

void add_quant_flags(CLI::App* cmd, QuantFlags& flags) {
  cmd->add_option("--tensor-type", flags.tensor_types,
                  "REGEX=TYPE: tensors whose name matches get TYPE (repeatable; first match wins), "
                  "e.g. --tensor-type 'attn_v=q8_0'");
  cmd->add_option("--keep", flags.keep,
                  "Leave in their source type: output, token_embd, per_layer_token_embd, or "
                  "embeddings (all three); repeatable or comma-separated");
  cmd->add_option("--imatrix", flags.imatrix,
                  "Importance matrix (llama.cpp imatrix, GGUF or legacy .dat): weigh each "
                  "weight's error by its column's activations");
  cmd->add_flag("--pure", flags.pure, "One type for every quantized tensor: no mix rules");
  cmd->add_option("-t,--threads", flags.threads, "Threads (0: the physical cores)")
      ->capture_default_str();
}

util::Result<convert::MixOptions> mix_options(const QuantFlags& flags) {
  convert::MixOptions mix;
  mix.pure = flags.pure;
  for (const std::string& text : flags.tensor_types) {
    HR_ASSIGN_OR_RETURN(convert::TensorTypeOverride o, convert::parse_tensor_type_override(text));
    mix.overrides.push_back(std::move(o));
  }
  for (const std::string& text : flags.keep) HR_TRY(convert::parse_keep(text, &mix.keep));
  return mix;
}

std::string file_type_list() {
  std::string out;
  for (const convert::FileType& f : convert::file_types()) {
    out += fmt::format("\n  {:<10} {}", f.name, f.description);
  }
  return out;
}

void print_write_summary(const std::string& out, const convert::WriteTotals& t,
                         std::string_view type) {
  const double n = t.n_elements ? static_cast<double>(t.n_elements) : 1.0;
  std::printf("wrote %s (%.*s): tensors %s -> %s (%.2f -> %.2f bits per weight)\n", out.c_str(),
              static_cast<int>(type.size()), type.data(), util::format_bytes(t.bytes_in).c_str(),
              util::format_bytes(t.bytes_out).c_str(), 8.0 * static_cast<double>(t.bytes_in) / n,
              8.0 * static_cast<double>(t.bytes_out) / n);
  if (t.n_fallback > 0) {
    std::printf(
        "note: %d tensors have rows that are not whole blocks of their type and use a "
        "32-value type instead (as llama.cpp does)\n",
        t.n_fallback);
  }
  if (t.n_without_importance > 0) {
    std::printf(
        "note: the importance matrix has no entry for %d quantized tensors; they are "
        "quantized without importance\n",
        t.n_without_importance);
  }
}

}  // namespace cli
