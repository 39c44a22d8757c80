// The audio path against independent truth: decoding against Python's wave module and the
// lossless conversions the test files were made with (sox), resampling against analytic sines,
// log-mel features and every stage of the conformer against the float64 reference
// (tests/reference/reference_mm.py).
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <memory>
#include <numeric>

#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "mm/audio.h"
#include "mm/audio_encoder.h"
#include "mm/projector.h"
#include "mm_testing.h"
#include "testing/emulated_gpu.h"
#include "util/thread_pool.h"

namespace {

using namespace mm_testing;

std::vector<float> audio_file(const std::string& name, double max_seconds = 30) {
  const auto bytes = testing_util::read_file(data(name));
  auto samples = mm::decode_audio(bytes, 16000, max_seconds);
  EXPECT_TRUE(samples.ok()) << name << ": " << (samples ? "" : samples.error().message());
  return samples ? std::move(*samples) : std::vector<float>{};
}

// A WAV file of `seconds` of a0·sin(2π f0 t) + a1·sin(2π f1 t), as 32-bit float, written by
// libsndfile into memory.
std::vector<uint8_t> sine_wav(int rate, int channels, double seconds) {
  const int64_t n = static_cast<int64_t>(seconds * rate);
  std::vector<float> interleaved(static_cast<size_t>(n) * channels);
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / rate;
    const float v = static_cast<float>(0.5 * std::sin(2 * M_PI * 440 * t) +
                                       0.25 * std::sin(2 * M_PI * 2500 * t));
    for (int c = 0; c < channels; ++c) interleaved[i * channels + c] = v;
  }
  const fs::path path = testing_util::temp_dir() / "sine.wav";
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return {};
  sf_writef_float(f, interleaved.data(), n);
  sf_close(f);
  return testing_util::read_file(path);
}

// PCM 16-bit at 16 kHz decodes to exactly what the reference's reader gives (int16 / 32768).
TEST(AudioDecode, WavMatchesReferenceReader) {
  const fs::path proj = tiny_projector();
  const Dump ref = read_dump(cached_python(
      "reference_mm.py", fmt::format("audio {} {}", proj.string(), data("speech.wav").string())));
  const std::vector<float> samples = audio_file("speech.wav");
  EXPECT_EQ(compare(ref["samples"], samples).max_diff, 0);
  EXPECT_EQ(mm::audio_token_count(static_cast<int64_t>(samples.size())), 30);  // 1.2 s: ⌈1200 / 40⌉
}

// 24-bit and float WAV and FLAC were made from a segment of speech.wav losslessly: they decode to
// that segment's samples exactly. The 8-bit, µ-law and 44.1 kHz stereo versions pass through
// other rates and coarser samples: same length, and close to the segment.
TEST(AudioDecode, ReadsOtherWavEncodingsAndFlac) {
  const std::vector<float> speech = audio_file("speech.wav");
  ASSERT_GE(speech.size(), 3200u + 8000u);
  const std::span<const float> segment(speech.data() + 3200, 8000);  // sox trim 0.2 0.5
  for (const char* name : {"speech-s24.wav", "speech-f32.wav", "speech.flac"}) {
    const std::vector<float> s = audio_file(name);
    ASSERT_EQ(s.size(), segment.size()) << name;
    EXPECT_EQ(compare(segment, s).max_diff, 0) << name;
  }
  auto header = mm::read_audio_header(testing_util::read_file(data("speech-s24.wav")));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->sample_rate, 16000);
  EXPECT_NE(header->format.find("WAV"), std::string::npos) << header->format;
  auto rms_error = [](std::span<const float> a, std::span<const float> b) {
    double e = 0, r = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      e += (a[i] - b[i]) * double(a[i] - b[i]);
      r += a[i] * double(a[i]);
    }
    return std::sqrt(e / r);
  };
  // 44.1 kHz stereo (both channels the segment's first 0.2 s): back at 16 kHz within 2 % RMS.
  const std::vector<float> stereo = audio_file("speech-stereo-44k.wav");
  EXPECT_NEAR(static_cast<double>(stereo.size()), 3200, 1);
  EXPECT_LT(rms_error(segment.first(3200), stereo), 0.02);
  // 8 kHz versions lose everything above 4 kHz (and 8-bit / µ-law steps): same length, the speech
  // still there.
  for (const char* name : {"speech-u8-8k.wav", "speech-ulaw-8k.wav"}) {
    const std::vector<float> s = audio_file(name);
    EXPECT_NEAR(static_cast<double>(s.size()), 8000, 2) << name;
    EXPECT_LT(rms_error(segment, s), 0.5) << name;
  }
}

// Resampling to 16 kHz against the analytic signal: a 440 Hz + 2.5 kHz tone from 44.1 kHz, 48 kHz,
// 22.05 kHz and 8 kHz (stereo for one) agrees with the same tone sampled at 16 kHz.
TEST(AudioDecode, ResamplesToTheEncoderRate) {
  for (auto [rate, channels] : {std::pair{44100, 2}, {48000, 1}, {22050, 1}, {8000, 1}}) {
    const auto wav = sine_wav(rate, channels, 0.5);
    auto samples = mm::decode_audio(wav, 16000, 30);
    ASSERT_TRUE(samples.ok()) << samples.error().message();
    EXPECT_NEAR(static_cast<double>(samples->size()), 8000, 1) << rate;
    double worst = 0;
    for (int i = 400; i < 7600; ++i) {  // away from the edges, where the filter sees zeros
      const double t = i / 16000.0;
      const double expected =
          0.5 * std::sin(2 * M_PI * 440 * t) + 0.25 * std::sin(2 * M_PI * 2500 * t);
      worst = std::max(worst, std::fabs((*samples)[i] - expected));
    }
    std::printf("[ resample ] %d Hz x%d -> 16 kHz: max error %.2g\n", rate, channels, worst);
    EXPECT_LT(worst, 1e-3) << rate;
  }
}

std::string audio_decode_error(std::span<const uint8_t> bytes, double max_seconds = 30) {
  auto samples = mm::decode_audio(bytes, 16000, max_seconds);
  EXPECT_FALSE(samples.ok());
  if (samples) return "";
  EXPECT_EQ(samples.error().message().find('\n'), std::string::npos);
  return samples.error().message();
}

TEST(AudioDecode, RefusesBadAudioInOneLine) {
  const auto wav = testing_util::read_file(data("speech.wav"));
  EXPECT_NE(audio_decode_error({}).find("empty"), std::string::npos);
  const std::vector<uint8_t> text(100, 'x');
  EXPECT_NE(audio_decode_error(text).find("cannot read"), std::string::npos);
  EXPECT_NE(audio_decode_error(std::span(wav).first(30)).find("audio:"), std::string::npos);
  // Longer than allowed: refused from the header.
  EXPECT_NE(audio_decode_error(wav, 0.5).find("longer than"), std::string::npos);
  // A data chunk claiming 2 GB (67 000 s) is read as what the file holds.
  auto huge = wav;
  huge[40] = huge[41] = huge[42] = 0xff;
  huge[43] = 0x7f;
  auto clamped = mm::decode_audio(huge, 16000, 30);
  ASSERT_TRUE(clamped.ok()) << clamped.error().message();
  EXPECT_EQ(clamped->size(), 19200u);
  // A header with an absurd rate.
  auto fast = wav;
  fast[24] = fast[25] = fast[26] = 0xff;
  fast[27] = 0x0f;
  EXPECT_FALSE(mm::decode_audio(fast, 16000, 30).ok());
  // Too short to make one frame.
  auto tiny = mm::log_mel(std::vector<float>(100, 0.1f));
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message().find("too short"), std::string::npos);
}

// --- Features and the encoder -----------------------------------------------------------------

struct AudioCase {
  std::string name;
  std::string synth;    // synth_mmproj.py options
  std::string backend;  // ref, cpu
  int samples;          // clip length (0: all of speech.wav)
  double tolerance;     // max |Δ| / max |reference| at every encoder stage
};
void PrintTo(const AudioCase& c, std::ostream* os) {
  *os << c.name;
}

class AudioStages : public ::testing::TestWithParam<AudioCase> {};

TEST_P(AudioStages, MatchReference) {
  const AudioCase& c = GetParam();
  const fs::path proj = tiny_projector(c.synth);
  const Dump ref = read_dump(cached_python(
      "reference_mm.py", fmt::format("audio {} {}{}", proj.string(), data("speech.wav").string(),
                                     c.samples ? fmt::format(" --samples {}", c.samples) : "")));

  std::vector<float> samples = audio_file("speech.wav");
  if (c.samples) samples.resize(c.samples);
  auto mel = mm::log_mel(samples);
  ASSERT_TRUE(mel.ok()) << mel.error().message();
  // Features: f64 FFT and mel sums of f32 windowed frames on both sides; the reference keeps f64
  // to the log, headroom rounds the result to f32 (as the reference extractor's output is).
  expect_close(c.name + " mel", ref["mel"], mel->values, 1e-6);
  EXPECT_EQ(mel->n_valid, static_cast<int>(std::accumulate(ref["mel_valid"].begin(),
                                                           ref["mel_valid"].end(), 0.0)));

  auto file = gguf::File::open(proj.string());
  ASSERT_TRUE(file.ok());
  auto spec = mm::projector_from_gguf(*file);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  util::ThreadPool pool(2);
  std::unique_ptr<kernels::Backend> backend;
  if (c.backend == "ref") backend = std::make_unique<kernels::ref::RefBackend>();
  if (c.backend == "cpu") backend = std::make_unique<kernels::cpu::CpuBackend>(pool, 64, 4096);
  auto encoder = mm::AudioEncoder::load(*file, *spec, *backend, 30);
  ASSERT_TRUE(encoder.ok()) << encoder.error().message();
  const int tokens = mm::audio_token_count(static_cast<int64_t>(samples.size()));
  std::vector<float> out(static_cast<size_t>(tokens) * spec->n_embd_text);
  std::map<std::string, std::vector<float>> stages;
  auto status =
      (*encoder)->encode(*mel, out, [&](std::string_view name, std::span<const float> v, int64_t) {
        stages[std::string(name)].assign(v.begin(), v.end());
      });
  ASSERT_TRUE(status.ok()) << status.error().message();
  std::vector<std::string> names = {"subsampled"};
  for (int il = 0; il < spec->audio->n_layer; ++il) names.push_back(fmt::format("blk.{}.out", il));
  names.insert(names.end(), {"encoded", "projected"});
  for (const auto& name : names)
    expect_close(c.name + " " + name, ref[name], stages[name], c.tolerance);
  expect_close(c.name + " output", ref["projected"], out, c.tolerance);
}

// f32 against f64: the features' f32 rounding (~1e-7) grows through the convolutions' LayerNorms
// and two blocks; 1e-5 leaves room while a wrong step (the relative shift off by one, the GLU
// halves swapped, the causal convolution looking ahead, a missing clamp) moves values by > 1e-2.
INSTANTIATE_TEST_SUITE_P(
    Backends, AudioStages,
    ::testing::Values(AudioCase{"clamped_ref", "--clamp", "ref", 0, 1e-5},
                      AudioCase{"clamped_cpu", "--clamp", "cpu", 0, 1e-5},
                      // 5000 samples: not a multiple of 128, so padded frames are masked.
                      AudioCase{"partial_cpu", "--clamp", "cpu", 5000, 1e-5},
                      AudioCase{"f16_cpu", "--clamp --type f16", "cpu", 0, 1e-5}),
    [](const auto& p) { return p.param.name; });

TEST(AudioEncoder, RefusesDeviceBackendsAndLongClips) {
  auto file = gguf::File::open(tiny_projector().string());
  ASSERT_TRUE(file.ok());
  auto spec = mm::projector_from_gguf(*file);
  ASSERT_TRUE(spec.ok());
  util::ThreadPool pool(1);
  testing_util::EmulatedGpu gpu(pool, 64, 4096);
  auto on_gpu = mm::AudioEncoder::load(*file, *spec, gpu, 30);
  ASSERT_FALSE(on_gpu.ok());
  EXPECT_NE(on_gpu.error().message().find("host memory"), std::string::npos);
  kernels::cpu::CpuBackend cpu(pool, 64, 4096);
  auto encoder = mm::AudioEncoder::load(*file, *spec, cpu, 1.0);  // planned for 1 s clips
  ASSERT_TRUE(encoder.ok()) << encoder.error().message();
  auto mel = mm::log_mel(audio_file("speech.wav"));  // 1.2 s
  ASSERT_TRUE(mel.ok());
  std::vector<float> out(30 * 128);
  auto status = (*encoder)->encode(*mel, out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("--audio-seconds"), std::string::npos)
      << status.error().message();
}

}  // namespace
