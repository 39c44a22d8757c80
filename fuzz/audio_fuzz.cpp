// libFuzzer target for audio decoding (libsndfile, libsamplerate) and Gemma 4's log-mel features:
// any input either decodes or fails cleanly.
//
// Properties checked on every input:
//   - a failure is one line starting "audio: ";
//   - a clip over the length bound (0.5 s) is refused from its header, before it is decoded;
//   - a success is finite samples at 16 kHz, no more than the bound allows, whose features (when
//     the clip is long enough for one frame) are finite and as many as the clip makes.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "mm/audio.h"

namespace {

constexpr double kMaxSeconds = 0.5;

[[noreturn]] void violated(const char* what, const std::string& detail) {
  std::fprintf(stderr, "audio_fuzz: property violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_error(const util::Error& error) {
  const std::string& m = error.message();
  if (m.find('\n') != std::string::npos) violated("error is not one line", m);
  if (m.rfind("audio: ", 0) != 0) violated("error does not start with 'audio: '", m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto header = mm::read_audio_header(bytes);
  if (!header) check_error(header.error());
  auto samples = mm::decode_audio(bytes, 16000, kMaxSeconds);
  if (!samples) {
    check_error(samples.error());
    return 0;
  }
  if (header && header->seconds() > kMaxSeconds)
    violated("decoded a clip longer than the bound", std::to_string(header->seconds()));
  // Resampling may add a few samples past the header's length.
  if (samples->size() > static_cast<size_t>(kMaxSeconds * 16000) + 64)
    violated("more samples than the bound allows", std::to_string(samples->size()));
  for (float v : *samples) {
    if (!std::isfinite(v)) violated("a sample is not finite", std::to_string(v));
  }
  auto mel = mm::log_mel(*samples);
  if (!mel) {
    check_error(mel.error());
    return 0;
  }
  for (float v : mel->values) {
    if (!std::isfinite(v)) violated("a feature is not finite", std::to_string(v));
  }
  if (mm::audio_token_count(static_cast<int64_t>(samples->size())) <= 0)
    violated("features but no soft tokens", std::to_string(samples->size()));
  return 0;
}
