// GGUF open + validate on a ~4 GB model file: time cold (dropped from the page cache) and warm,
// and check that validating the header reads no page of the tensor data section.
//
//   build/bench/gguf/gguf_open_bench [--dir DIR] [--repeat N] [--keep]
//
// Writes a llama-7B-shaped file to DIR (default /tmp): 291 tensors, Q4_K matrices, Q6_K output
// and ffn_down, F32 norms, a 32000-token vocabulary; 4.2 GB in all. Deletes it afterwards unless
// --keep. Results are recorded in bench/RESULTS.md ("GGUF open + validate").
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "util/page_cache.h"
#include "util/units.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// llama-7B shapes (n_embd 4096, n_ff 11008, 32 layers, vocabulary 32000), Q4_K_M-like types.
gguf::Writer llama7b_like() {
  constexpr uint64_t n_embd = 4096, n_ff = 11008, n_vocab = 32000;
  constexpr int n_layer = 32;
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("llama"));
  w.set("general.name", gguf::MetaValue::string("open-bench 7B-shaped"));
  w.set("llama.block_count", gguf::MetaValue::u32(n_layer));
  w.set("llama.context_length", gguf::MetaValue::u32(4096));
  w.set("llama.embedding_length", gguf::MetaValue::u32(n_embd));
  w.set("llama.feed_forward_length", gguf::MetaValue::u32(n_ff));
  w.set("llama.attention.head_count", gguf::MetaValue::u32(32));
  w.set("llama.attention.head_count_kv", gguf::MetaValue::u32(32));
  w.set("llama.attention.layer_norm_rms_epsilon", gguf::MetaValue::f32(1e-5f));
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (uint64_t i = 0; i < n_vocab; ++i) {
    tokens.push_back(fmt::format("▁tok{}", i));
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  w.set("tokenizer.ggml.model", gguf::MetaValue::string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::MetaValue::array_strings(std::move(tokens)));
  w.set("tokenizer.ggml.scores", gguf::MetaValue::array_f32(scores));
  w.set("tokenizer.ggml.token_type", gguf::MetaValue::array_i32(types));

  // The bytes are a cheap pattern: this measures the parser, not the data.
  const gguf::TensorFill fill = [](std::span<uint8_t> out) -> util::Status {
    std::memset(out.data(), 0x55, out.size());
    return {};
  };
  using gguf::TensorType;
  w.add_tensor("token_embd.weight", TensorType::kQ4_K, {n_embd, n_vocab}, fill);
  for (int il = 0; il < n_layer; ++il) {
    const auto name = [&](const char* what) { return fmt::format("blk.{}.{}.weight", il, what); };
    w.add_tensor(name("attn_norm"), TensorType::kF32, {n_embd}, fill);
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      w.add_tensor(name(m), TensorType::kQ4_K, {n_embd, n_embd}, fill);
    }
    w.add_tensor(name("ffn_norm"), TensorType::kF32, {n_embd}, fill);
    w.add_tensor(name("ffn_gate"), TensorType::kQ4_K, {n_embd, n_ff}, fill);
    w.add_tensor(name("ffn_up"), TensorType::kQ4_K, {n_embd, n_ff}, fill);
    w.add_tensor(name("ffn_down"), TensorType::kQ6_K, {n_ff, n_embd}, fill);
  }
  w.add_tensor("output_norm.weight", TensorType::kF32, {n_embd}, fill);
  w.add_tensor("output.weight", TensorType::kQ6_K, {n_embd, n_vocab}, fill);
  return w;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "gguf_open_bench: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  int repeat = 5;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--repeat N] [--keep]\n", argv[0]);
      return 2;
    }
  }
  const std::string path = dir + "/headroom-open-bench.gguf";

  auto t0 = Clock::now();
  if (auto s = llama7b_like().write(path); !s) return fail(s.error().message());
  const double write_ms = ms_since(t0);
  t0 = Clock::now();
  if (auto s = util::drop_from_page_cache(path); !s) return fail(s.error().message());
  std::printf("wrote %s: %s in %.1f s, flushed and dropped from the page cache in %.1f s\n",
              path.c_str(), util::format_bytes(std::filesystem::file_size(path)).c_str(),
              write_ms / 1e3, ms_since(t0) / 1e3);

  // Cold: every open starts with the file out of the page cache (header read from disk).
  std::vector<double> cold, warm;
  size_t readahead_pages = 0, data_pages = 0, header_bytes = 0, n_tensors = 0;
  for (int i = 0; i < repeat; ++i) {
    if (auto s = util::drop_from_page_cache(path); !s) return fail(s.error().message());
    t0 = Clock::now();
    auto file = gguf::File::open(path);
    cold.push_back(ms_since(t0));
    if (!file) return fail(file.error().message());
    const size_t page = util::page_size();
    const size_t first_data_page = (file->data_offset() + page - 1) / page * page;
    auto resident = util::resident_pages(file->bytes().subspan(first_data_page));
    if (!resident) return fail(resident.error().message());
    readahead_pages = *resident;  // the kernel's read-around after header faults, not the parser
    data_pages = (file->bytes().size() - first_data_page + page - 1) / page;
    header_bytes = file->data_offset();
    n_tensors = file->tensors().size();
  }
  // Warm: the header pages are cached.
  for (int i = 0; i < repeat; ++i) {
    t0 = Clock::now();
    auto file = gguf::File::open(path);
    warm.push_back(ms_since(t0));
    if (!file) return fail(file.error().message());
  }

  // What the parser itself touches: a mapping with read-around off, parsed after a drop.
  if (auto s = util::drop_from_page_cache(path); !s) return fail(s.error().message());
  size_t touched = 0;
  {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const size_t size = std::filesystem::file_size(path);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return fail("mmap failed");
    ::madvise(p, size, MADV_RANDOM);
    std::span<const uint8_t> bytes(static_cast<const uint8_t*>(p), size);
    auto file = gguf::File::parse(bytes, path);
    if (!file) return fail(file.error().message());
    const size_t page = util::page_size();
    const size_t first_data_page = (file->data_offset() + page - 1) / page * page;
    auto resident = util::resident_pages(bytes.subspan(first_data_page));
    if (!resident) return fail(resident.error().message());
    touched = *resident;
    ::munmap(p, size);
  }

  std::printf("%zu tensors, header %s, data section %zu pages\n", n_tensors,
              util::format_bytes(header_bytes).c_str(), data_pages);
  std::printf("open + validate, cold: median %.2f ms (min %.2f, max %.2f) over %d runs\n",
              median(cold), *std::min_element(cold.begin(), cold.end()),
              *std::max_element(cold.begin(), cold.end()), repeat);
  std::printf("open + validate, warm: median %.2f ms (min %.2f, max %.2f) over %d runs\n",
              median(warm), *std::min_element(warm.begin(), warm.end()),
              *std::max_element(warm.begin(), warm.end()), repeat);
  std::printf("data-section pages resident after a cold open: %zu of %zu (kernel read-around)\n",
              readahead_pages, data_pages);
  std::printf("data-section pages touched by the parser (read-around off): %zu of %zu\n", touched,
              data_pages);
  if (!keep) std::filesystem::remove(path);
  if (touched != 0) return fail("validating the header read tensor data pages");
  return 0;
}
