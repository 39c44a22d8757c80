// mm audio input: decoding (libsndfile: WAV in its many encodings — PCM 8/16/24/32-bit, float,
// µ-law, A-law, ADPCM —, FLAC, Ogg Vorbis/Opus, MP3) to mono, resampling to the encoder's rate
// (libsamplerate, best sinc), and Gemma 4's log-mel features (Hugging Face's
// Gemma4AudioFeatureExtractor).
//
// The duration is read from the header first, so a clip longer than allowed is refused before it
// is decoded; the reference's extractor would silently truncate at 30 s instead.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace mm {

// The longest clip Gemma 4's feature extractor takes (480 000 samples at 16 kHz: 750 tokens).
inline constexpr double kMaxAudioSeconds = 30.0;

struct AudioHeader {
  std::string format;  // "WAV (PCM 16-bit)", "FLAC", …
  int channels = 0;
  int sample_rate = 0;
  int64_t frames = 0;
  double seconds() const { return sample_rate > 0 ? static_cast<double>(frames) / sample_rate : 0; }
};

util::Result<AudioHeader> read_audio_header(std::span<const uint8_t> bytes);

// Mono samples (channels averaged) in [−1, 1] at `sample_rate`; clips over `max_seconds` refused.
util::Result<std::vector<float>> decode_audio(std::span<const uint8_t> bytes, int sample_rate,
                                              double max_seconds);

// Log-mel features of one clip at 16 kHz, as Gemma4AudioFeatureExtractor makes them: samples
// padded to a multiple of 128, 160 zeros in front (semicausal), 20 ms periodic-Hann frames every
// 10 ms, |FFT(512)|, 128 HTK mel filters over 0–8 kHz (unnormalised), log(x + 0.001). Frames that
// reach into the padding are zeroed and not valid.
struct MelFeatures {
  int n_frames = 0;  // T
  int n_valid = 0;   // the first n_valid frames cover real samples only
  int n_mel = 0;
  std::vector<float> values;  // [T][n_mel]
};
util::Result<MelFeatures> log_mel(std::span<const float> samples, int n_mel = 128);

// The soft tokens a clip of `n_samples` samples (16 kHz) becomes: valid mel frames, halved twice
// (rounding up) by the encoder's two stride-2 convolutions.
int audio_token_count(int64_t n_samples);

}  // namespace mm
