// The quantization flags quantize and convert share (--tensor-type, --keep, --pure, --imatrix,
// --threads), their parsing, and the summary printed after a write.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "convert/quant_mix.h"
#include "convert/tensor_source.h"
#include "util/result.h"

namespace cli {

struct QuantFlags {
  std::vector<std::string> tensor_types;
  std::vector<std::string> keep;
  std::string imatrix;
  bool pure = false;
  int threads = 0;  // 0: the physical cores
};
void add_quant_flags(CLI::App* cmd, QuantFlags& flags);

// The mix options of the flags (file_type left for the caller).
util::Result<convert::MixOptions> mix_options(const QuantFlags& flags);

// "  Q4_K_M     4.5 bpw; …" for every file type, for --help.
std::string file_type_list();

// Sizes and bits per weight of a write, with fallbacks and tensors the imatrix missed said aloud.
void print_write_summary(const std::string& out, const convert::WriteTotals& totals,
                         std::string_view type);

}  // namespace cli
