// Encoder time on the CPU kernels: one image at each token budget, and audio clips of a few
// lengths, through mm::Encoders as a run loads them (sized for the largest of each).
//
//   build/bench/mm/encoder_bench --mmproj FILE [--image FILE] [--tokens 280,1120]
//                                [--audio FILE] [--seconds 1,5,30] [--repeat 3] [--warmup 1]
//                                [--threads N]
//
// The projectors are random-weight files of the real shapes (tests/reference/synth_mmproj.py
// --shape e2b / 31b). A clip shorter than asked is repeated to the length. Prints the median of
// --repeat runs (after --warmup ones) per case: seconds, ms per soft token, and for audio the
// real-time factor (encoder seconds per second of audio). Results: bench/RESULTS.md ("Encoders").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/backend.h"
#include "mm/encoders.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> numbers(const std::string& list) {
  std::vector<double> out;
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    out.push_back(std::stod(list.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

// Median seconds of `repeat` encodings after `warmup` ones.
double time_encoding(mm::Encoders& encoders, const mm::Media& media, int64_t n_embd, int repeat,
                     int warmup) {
  std::vector<float> out(static_cast<size_t>(media.n_tokens) * n_embd);
  std::vector<double> seconds;
  for (int i = 0; i < warmup + repeat; ++i) {
    const auto t0 = Clock::now();
    if (auto s = encoders.encode(media, out); !s) {
      std::fprintf(stderr, "encoder_bench: %s\n", s.error().message().c_str());
      std::exit(1);
    }
    if (i >= warmup) seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string mmproj, image, audio, tokens = "280,1120", lengths = "1,5,30";
  int repeat = 3, warmup = 1, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--mmproj")
      mmproj = value;
    else if (flag == "--image")
      image = value;
    else if (flag == "--tokens")
      tokens = value;
    else if (flag == "--audio")
      audio = value;
    else if (flag == "--seconds")
      lengths = value;
    else if (flag == "--repeat")
      repeat = std::stoi(value);
    else if (flag == "--warmup")
      warmup = std::stoi(value);
    else if (flag == "--threads")
      threads = std::stoi(value);
    else
      return std::fprintf(stderr, "encoder_bench: unknown flag %s\n", flag.c_str()), 2;
  }
  auto file = gguf::File::open(mmproj);
  if (!file) return std::fprintf(stderr, "%s\n", file.error().message().c_str()), 1;
  auto spec = mm::projector_from_gguf(*file);
  if (!spec) return std::fprintf(stderr, "%s\n", spec.error().message().c_str()), 1;
  const auto budgets = numbers(tokens), seconds = numbers(lengths);
  mm::MediaLimits limits;
  if (!image.empty())
    limits.image_tokens = static_cast<int>(*std::max_element(budgets.begin(), budgets.end()));
  if (!audio.empty()) limits.audio_seconds = *std::max_element(seconds.begin(), seconds.end());
  const mm::EncoderCosts costs = mm::encoder_costs(*file, *spec, limits);
  util::ThreadPool pool(threads > 0 ? threads : 2);
  kernels::cpu::CpuBackend cpu(pool, 512, costs.max_matmul_cols);
  auto encoders = mm::Encoders::load(*file, *spec, limits, cpu, cpu);
  if (!encoders) return std::fprintf(stderr, "%s\n", encoders.error().message().c_str()), 1;
  std::printf("encoder_bench: %s, %s kernels, %d threads, median of %d after %d warm-up\n",
              spec->name.c_str(), kernels::cpu::isa_name(kernels::cpu::cpu_isa()).data(),
              pool.size(), repeat, warmup);
  std::printf("%-8s %-10s %8s %10s %12s %8s\n", "encoder", "input", "tokens", "seconds", "ms/token",
              "RTF");
  if (!image.empty()) {
    auto bytes = util::MappedFile::open(image);
    if (!bytes) return std::fprintf(stderr, "%s\n", bytes.error().message().c_str()), 1;
    for (double b : budgets) {
      auto media = mm::prepare_image(bytes->bytes(), *spec->vision, static_cast<int>(b));
      if (!media) return std::fprintf(stderr, "%s\n", media.error().message().c_str()), 1;
      const double s = time_encoding(**encoders, **media, spec->n_embd_text, repeat, warmup);
      std::printf("%-8s %-10s %8d %10.3f %12.2f %8s\n", "vision",
                  ("budget " + std::to_string(int(b))).c_str(), (*media)->n_tokens, s,
                  1e3 * s / (*media)->n_tokens, "");
    }
  }
  if (!audio.empty()) {
    auto bytes = util::MappedFile::open(audio);
    if (!bytes) return std::fprintf(stderr, "%s\n", bytes.error().message().c_str()), 1;
    auto clip = mm::prepare_audio(bytes->bytes(), mm::kMaxAudioSeconds);
    if (!clip) return std::fprintf(stderr, "%s\n", clip.error().message().c_str()), 1;
    for (double length : seconds) {
      mm::Media media = **clip;
      const size_t n = static_cast<size_t>(length * 16000);
      media.samples.resize(n);
      for (size_t i = (*clip)->samples.size(); i < n; ++i)
        media.samples[i] = (*clip)->samples[i % (*clip)->samples.size()];
      media.n_tokens = mm::audio_token_count(static_cast<int64_t>(n));
      const double s = time_encoding(**encoders, media, spec->n_embd_text, repeat, warmup);
      std::printf("%-8s %-10s %8d %10.3f %12.2f %8.3f\n", "audio",
                  (std::to_string(int(length)) + " s").c_str(), media.n_tokens, s,
                  1e3 * s / media.n_tokens, s / length);
    }
  }
  return 0;
}
