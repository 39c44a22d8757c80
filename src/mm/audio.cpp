// Audio decoding (libsndfile from memory), resampling (libsamplerate) and log-mel features.
#include "mm/audio.h"

#include <samplerate.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

namespace mm {
namespace {

// Gemma4AudioFeatureExtractor's defaults.
constexpr int kSampleRate = 16000;
constexpr int kFrame = 320;  // 20 ms
constexpr int kHop = 160;    // 10 ms
constexpr int kFft = 512;    // the power of two at or above the frame
constexpr int kPadMultiple = 128;
constexpr double kMelFloor = 1e-3;
constexpr double kMaxFrequency = 8000.0;

// libsndfile reads from a byte span through its virtual I/O.
struct Memory {
  std::span<const uint8_t> bytes;
  sf_count_t pos = 0;
};
sf_count_t mem_length(void* user) {
  return static_cast<Memory*>(user)->bytes.size();
}
sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<Memory*>(user);
  const sf_count_t size = static_cast<sf_count_t>(m->bytes.size());
  sf_count_t to = whence == SEEK_SET   ? offset
                  : whence == SEEK_CUR ? m->pos + offset
                                       : size + offset;
  m->pos = std::clamp<sf_count_t>(to, 0, size);
  return m->pos;
}
sf_count_t mem_read(void* out, sf_count_t n, void* user) {
  auto* m = static_cast<Memory*>(user);
  const sf_count_t left = static_cast<sf_count_t>(m->bytes.size()) - m->pos;
  n = std::clamp<sf_count_t>(n, 0, left);
  std::memcpy(out, m->bytes.data() + m->pos, static_cast<size_t>(n));
  m->pos += n;
  return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) {
  return 0;
}
sf_count_t mem_tell(void* user) {
  return static_cast<Memory*>(user)->pos;
}

struct SndFile {
  Memory memory;
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SNDFILE* file = nullptr;
  ~SndFile() {
    if (file) sf_close(file);
  }
};

std::string format_name(const SF_INFO& info) {
  SF_FORMAT_INFO f{};
  f.format = info.format & SF_FORMAT_TYPEMASK;
  std::string container =
      sf_command(nullptr, SFC_GET_FORMAT_INFO, &f, sizeof f) == 0 && f.name ? f.name : "audio";
  SF_FORMAT_INFO sub{};
  sub.format = info.format & SF_FORMAT_SUBMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &sub, sizeof sub) == 0 && sub.name)
    container += fmt::format(" ({})", sub.name);
  return container;
}

// Opens the bytes and checks what the header claims before anything is decoded.
util::Result<std::unique_ptr<SndFile>> open(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return util::errorf("audio: the file is empty");
  auto f = std::make_unique<SndFile>();
  f->memory.bytes = bytes;
  f->file = sf_open_virtual(&f->io, SFM_READ, &f->info, &f->memory);
  if (f->file == nullptr) {
    return util::errorf("audio: cannot read it: {} — headroom reads WAV, FLAC, Ogg and MP3",
                        sf_strerror(nullptr));
  }
  if (f->info.channels < 1 || f->info.channels > 64)
    return util::errorf("audio: {} channels is not a sound file headroom can read",
                        f->info.channels);
  if (f->info.samplerate < 1000 || f->info.samplerate > 384000)
    return util::errorf("audio: a sample rate of {} Hz is outside 1 kHz–384 kHz",
                        f->info.samplerate);
  if (f->info.frames <= 0) return util::errorf("audio: the file holds no samples");
  return f;
}

util::Error too_long(double seconds, double max_seconds) {
  return util::errorf(
      "audio: the clip is {:.1f} s, longer than the {:.1f} s allowed — cut it, or raise "
      "--audio-seconds (at most {:.0f})",
      seconds, max_seconds, kMaxAudioSeconds);
}

// Mel filter bank [n_freq][n_mel] on the HTK scale, triangles without normalisation
// (transformers' mel_filter_bank(norm=None, mel_scale="htk")).
std::vector<double> mel_filters(int n_freq, int n_mel, double f_max, int rate) {
  auto hz_to_mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  auto mel_to_hz = [](double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1.0); };
  const double mel_max = hz_to_mel(f_max);
  std::vector<double> edges(n_mel + 2);
  for (int i = 0; i < n_mel + 2; ++i) edges[i] = mel_to_hz(mel_max * i / (n_mel + 1));
  std::vector<double> filters(static_cast<size_t>(n_freq) * n_mel);
  for (int f = 0; f < n_freq; ++f) {
    const double hz = static_cast<double>(rate / 2) * f / (n_freq - 1);
    for (int m = 0; m < n_mel; ++m) {
      const double down = (hz - edges[m]) / (edges[m + 1] - edges[m]);
      const double up = (edges[m + 2] - hz) / (edges[m + 2] - edges[m + 1]);
      filters[static_cast<size_t>(f) * n_mel + m] = std::max(0.0, std::min(down, up));
    }
  }
  return filters;
}

// In-place radix-2 FFT of kFft complex values.
void fft(std::vector<std::complex<double>>& a) {
  const int n = static_cast<int>(a.size());
  for (int i = 1, j = 0; i < n; ++i) {
    int bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (int len = 2; len <= n; len <<= 1) {
    const double angle = -2.0 * M_PI / len;
    for (int i = 0; i < n; i += len) {
      for (int k = 0; k < len / 2; ++k) {
        const std::complex<double> w(std::cos(angle * k), std::sin(angle * k));
        const std::complex<double> u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
    }
  }
}

}  // namespace

util::Result<AudioHeader> read_audio_header(std::span<const uint8_t> bytes) {
  HR_ASSIGN_OR_RETURN(auto f, open(bytes));
  return AudioHeader{format_name(f->info), f->info.channels, f->info.samplerate, f->info.frames};
}

util::Result<std::vector<float>> decode_audio(std::span<const uint8_t> bytes, int sample_rate,
                                              double max_seconds) {
  HR_ASSIGN_OR_RETURN(auto f, open(bytes));
  const int channels = f->info.channels, rate = f->info.samplerate;
  const double seconds = static_cast<double>(f->info.frames) / rate;
  if (seconds > max_seconds) return too_long(seconds, max_seconds);
  // Read in blocks and stop at the limit: a header may understate the length (MP3 estimates it).
  const int64_t max_frames = static_cast<int64_t>(max_seconds * rate) + 1;
  std::vector<float> mono;
  mono.reserve(static_cast<size_t>(f->info.frames));
  std::vector<float> block(static_cast<size_t>(4096) * channels);
  for (;;) {
    const sf_count_t n = sf_readf_float(f->file, block.data(), 4096);
    if (n <= 0) break;
    for (sf_count_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int c = 0; c < channels; ++c) sum += block[i * channels + c];
      mono.push_back(static_cast<float>(sum / channels));
    }
    if (static_cast<int64_t>(mono.size()) > max_frames)
      return too_long(static_cast<double>(mono.size()) / rate, max_seconds);
  }
  if (sf_error(f->file) != SF_ERR_NO_ERROR)
    return util::errorf("audio: corrupt {} data: {}", format_name(f->info), sf_strerror(f->file));
  if (mono.empty()) return util::errorf("audio: the file holds no samples");
  for (float v : mono) {
    if (!std::isfinite(v)) return util::errorf("audio: the samples are not finite numbers");
  }
  if (rate == sample_rate) return mono;

  SRC_DATA src{};
  src.data_in = mono.data();
  src.input_frames = static_cast<long>(mono.size());
  src.src_ratio = static_cast<double>(sample_rate) / rate;
  std::vector<float> out(static_cast<size_t>(std::ceil(mono.size() * src.src_ratio)) + 16);
  src.data_out = out.data();
  src.output_frames = static_cast<long>(out.size());
  if (const int e = src_simple(&src, SRC_SINC_BEST_QUALITY, 1); e != 0)
    return util::errorf("audio: resampling {} Hz to {} Hz failed: {}", rate, sample_rate,
                        src_strerror(e));
  out.resize(static_cast<size_t>(src.output_frames_gen));
  return out;
}

util::Result<MelFeatures> log_mel(std::span<const float> samples, int n_mel) {
  const int64_t n_real = static_cast<int64_t>(samples.size());
  const int64_t n_padded = (n_real + kPadMultiple - 1) / kPadMultiple * kPadMultiple;
  const int64_t length = n_padded + kFrame / 2;  // with the semicausal zeros in front
  const int64_t n_frames = length >= kFrame + 1 ? (length - (kFrame + 1)) / kHop + 1 : 0;
  MelFeatures out;
  out.n_mel = n_mel;
  out.n_frames = static_cast<int>(n_frames);
  // A frame is valid when its last sample (start + kFrame, the reference's frame of kFrame + 1)
  // is real: start + kFrame < kFrame/2 + n_real.
  for (int64_t i = 0; i < n_frames && i * kHop + kFrame < kFrame / 2 + n_real; ++i) ++out.n_valid;
  if (out.n_valid == 0) return util::errorf("audio: the clip is too short (under 20 ms)");

  // Periodic Hann window in f32, applied to f32 samples, as the reference does.
  std::vector<float> window(kFrame);
  for (int i = 0; i < kFrame; ++i)
    window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * i / kFrame));
  const int n_freq = kFft / 2 + 1;
  const std::vector<double> filters = mel_filters(n_freq, n_mel, kMaxFrequency, kSampleRate);
  out.values.assign(static_cast<size_t>(n_frames) * n_mel, 0.0f);
  std::vector<std::complex<double>> spectrum(kFft);
  std::vector<double> magnitude(n_freq);
  for (int64_t t = 0; t < out.n_valid; ++t) {
    for (int i = 0; i < kFft; ++i) {
      const int64_t s = t * kHop + i - kFrame / 2;  // index into the real samples
      const float x = i < kFrame && s >= 0 && s < n_real ? samples[s] : 0.0f;
      spectrum[i] = i < kFrame ? static_cast<double>(x * window[i]) : 0.0;
    }
    fft(spectrum);
    for (int f = 0; f < n_freq; ++f) magnitude[f] = std::abs(spectrum[f]);
    for (int m = 0; m < n_mel; ++m) {
      double sum = 0;
      for (int f = 0; f < n_freq; ++f)
        sum += magnitude[f] * filters[static_cast<size_t>(f) * n_mel + m];
      out.values[t * n_mel + m] = static_cast<float>(std::log(sum + kMelFloor));
    }
  }
  return out;
}

int audio_token_count(int64_t n_samples) {
  const int64_t n_padded = (n_samples + kPadMultiple - 1) / kPadMultiple * kPadMultiple;
  const int64_t length = n_padded + kFrame / 2;
  const int64_t n_frames = length >= kFrame + 1 ? (length - (kFrame + 1)) / kHop + 1 : 0;
  int64_t valid = 0;
  while (valid < n_frames && valid * kHop + kFrame < kFrame / 2 + n_samples) ++valid;
  const int64_t after_first = (valid + 1) / 2;
  return static_cast<int>((after_first + 1) / 2);
}

}  // namespace mm
