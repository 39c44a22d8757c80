// Tokenizer throughput: encode and decode MB/s on 1 MB of mixed text for each tokenizer type.
//
// Build (Release) and run:
//   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build tokenizer_bench
//   build/bench/tokenizer/tokenizer_bench
// The text is generated deterministically (fixed seed, no std:: distributions, whose output
// differs between standard libraries): prose, code, numbers, several scripts and emoji, and
// whitespace runs, in about equal shares. MB/s counts input bytes for encode and output bytes
// for decode (1 MB = 10^6 bytes); tokens/s and bytes/token are reported beside them.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

std::string mixed_text(size_t bytes) {
  static const char* kWords[] = {
      "the",   "model", "planned", "memory",  "before", "it",       "loaded", "and",
      "every", "byte",  "lived",   "exactly", "where",  "promised", "a",      "little",
      "girl",  "named", "Lily",    "saw",     "big",    "red",      "ball",   "Ubiquitous",
  };
  static const char* kCode[] = {
      "for (int i = 0; i < n; ++i) {\n    sum += x[i] * w[i];\n}\n",
      "def encode(text: str) -> list[int]:\n\treturn [vocab[t] for t in split(text)]\n",
      "if (!file) return util::errorf(\"cannot open {}\", path);\n",
      "<div class=\"row\"><span>{{ value }}</span></div>\n",
  };
  static const char* kUnicode[] = {
      "Zürich Straße café naïve ", "Привет, как дела? ", "你好，世界。今天天气很好。",
      "こんにちは、カタカナ ",     "안녕하세요 ",        "مرحبا بالعالم ",
      "🦙🚀✨👍🏽 ",      "Ελληνικά κείμενα ",  "हिन्दी पाठ ",
  };
  std::mt19937 rng(20261122);
  std::string s;
  s.reserve(bytes + 256);
  while (s.size() < bytes) {
    switch (rng() % 5) {
      case 0:  // prose
        for (int n = 3 + rng() % 12; n > 0; --n) {
          s += kWords[rng() % std::size(kWords)];
          s += n > 1 ? " " : ". ";
        }
        break;
      case 1:
        s += kCode[rng() % std::size(kCode)];
        break;
      case 2:  // numbers
        for (int n = 1 + rng() % 4; n > 0; --n) {
          s += std::to_string(rng() % 1000000);
          if (rng() % 2) {
            s += '.';
            s += std::to_string(rng() % 1000);
            s += ' ';
          } else {
            s += ", ";
          }
        }
        break;
      case 3:
        s += kUnicode[rng() % std::size(kUnicode)];
        break;
      case 4:  // whitespace runs
        s += std::string(1 + rng() % 8, " \t\n"[rng() % 3]);
        break;
    }
  }
  s.resize(bytes);
  // Cutting may leave half a character at the end; drop it so every tokenizer sees valid UTF-8.
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
  return s;
}

const std::string& text() {
  static const std::string t = mixed_text(1000000);
  return t;
}

const tokenizer::Tokenizer* load(const char* name) {
  auto path = std::filesystem::path(HEADROOM_SHARED_DIR) / "models/vocab" / name;
  auto file = gguf::File::open(path.string());
  if (!file) {
    std::fprintf(stderr, "%s\n", file.error().message().c_str());
    return nullptr;
  }
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error().message().c_str());
    return nullptr;
  }
  return new tokenizer::Tokenizer(std::move(*tok));  // lives for the whole run
}

void report(benchmark::State& state, size_t bytes, size_t tokens) {
  const double n = static_cast<double>(state.iterations());
  state.counters["MB/s"] = benchmark::Counter(n * bytes / 1e6, benchmark::Counter::kIsRate);
  state.counters["tokens/s"] = benchmark::Counter(n * tokens, benchmark::Counter::kIsRate);
  state.counters["bytes/token"] = static_cast<double>(bytes) / static_cast<double>(tokens);
}

void BM_Encode(benchmark::State& state, const char* vocab) {
  const tokenizer::Tokenizer* tok = load(vocab);
  if (!tok) return state.SkipWithError("vocabulary not found");
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text(), {.add_bos = false});
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  report(state, text().size(), n_tokens);
}

void BM_Decode(benchmark::State& state, const char* vocab) {
  const tokenizer::Tokenizer* tok = load(vocab);
  if (!tok) return state.SkipWithError("vocabulary not found");
  const auto ids = tok->encode(text(), {.add_bos = false});
  size_t n_bytes = 0;
  for (auto _ : state) {
    std::string s = tok->decode(ids);
    n_bytes = s.size();
    benchmark::DoNotOptimize(s.data());
  }
  report(state, n_bytes, ids.size());
}

#define HEADROOM_TOKENIZER_BENCH(label, vocab)                               \
  BENCHMARK_CAPTURE(BM_Encode, label, vocab)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_Decode, label, vocab)->Unit(benchmark::kMillisecond)

HEADROOM_TOKENIZER_BENCH(llama_spm, "ggml-vocab-llama-spm.gguf");
HEADROOM_TOKENIZER_BENCH(gpt2, "ggml-vocab-gpt-2.gguf");
HEADROOM_TOKENIZER_BENCH(gemma4, "ggml-vocab-gemma-3-reconstructed.gguf");
HEADROOM_TOKENIZER_BENCH(bert_bge, "ggml-vocab-bert-bge.gguf");

}  // namespace

BENCHMARK_MAIN();
