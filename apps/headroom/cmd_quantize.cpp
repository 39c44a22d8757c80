// headroom quantize IN OUT --type T: a GGUF model in the types of a standard mix, streamed.
#include <cstdio>

#include "commands.h"
#include "convert/quantize_model.h"
#include "plan/devices.h"
#include "progress_bar.h"
#include "quant_flags.h"

namespace cli {

void add_quantize(CLI::App& app, int& exit_code) {
  struct Options {
    std::string in, out, type = "Q4_K_M";
    QuantFlags quant;
    bool allow_requantize = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Quantize a GGUF model to a type or standard mix (streamed, one tensor in memory)");
  cmd->add_option("input", opts->in, "GGUF model to read (F32, F16 or BF16 for best quality)")
      ->required();
  cmd->add_option("output", opts->out, "GGUF file to write (replaced only when complete)")
      ->required();
  cmd->add_option("--type", opts->type, "Type or mix:" + file_type_list())->capture_default_str();
  add_quant_flags(cmd, opts->quant);
  cmd->add_flag("--allow-requantize", opts->allow_requantize,
                "Quantize tensors that are already quantized (compounds the error)");
  cmd->callback([opts, &exit_code] {
    auto fail = [&](const util::Error& e) {
      std::fprintf(stderr, "%s\n", e.message().c_str());
      exit_code = kExitBadInput;
    };
    convert::QuantizeOptions q;
    auto mix = mix_options(opts->quant);
    if (!mix) return fail(mix.error());
    q.mix = std::move(*mix);
    auto type = convert::parse_file_type(opts->type);
    if (!type) return fail(type.error());
    q.mix.file_type = *type;
    q.imatrix_path = opts->quant.imatrix;
    q.allow_requantize = opts->allow_requantize;
    util::ThreadPool pool(opts->quant.threads > 0 ? opts->quant.threads : plan::physical_cores());
    ProgressBar bar(stderr);
    auto result = convert::quantize_model(
        opts->in, opts->out, q, pool, [&bar](const convert::WriteProgress& p) { bar.update(p); });
    if (!result) return fail(result.error());
    print_write_summary(opts->out, result->totals, type->name);
    exit_code = kExitOk;
  });
}

}  // namespace cli
