// Images and audio through the server: OpenAI content parts (image_url with a data: URL,
// input_audio) on a tiny Gemma 4 model with the tiny projector, rendered by Gemma 4's template;
// and every kind of bad input — a remote URL, corrupt, truncated, empty and enormous images,
// unreadable and overlong clips, bad base64, media sent to a model without a projector — each a
// one-line 400 naming the field, after which the server still answers a good request.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/template.h"
#include "mm/media.h"
#include "mm/mm_testing.h"
#include "running_server.h"

namespace {

using namespace server_test;

std::string base64(const std::vector<uint8_t>& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) |
                       (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

std::vector<uint8_t> data_file(const std::string& name) {
  return testing_util::read_file(mm_testing::data(name));
}

json image_part(const std::vector<uint8_t>& bytes, const std::string& mime = "image/jpeg") {
  return {{"type", "image_url"},
          {"image_url", {{"url", "data:" + mime + ";base64," + base64(bytes)}}}};
}
json audio_part(const std::vector<uint8_t>& bytes, const std::string& format = "wav") {
  return {{"type", "input_audio"}, {"input_audio", {{"data", base64(bytes)}, {"format", format}}}};
}

json chat_with(const json& part) {
  return {
      {"messages",
       json::array({{{"role", "user"},
                     {"content", json::array({part, {{"type", "text"}, {"text", "What?"}}})}}})},
      {"max_tokens", 2},
      {"temperature", 0}};
}

// A mono 16 kHz 16-bit PCM WAV of `seconds` of a tone.
std::vector<uint8_t> wav(double seconds) {
  const uint32_t frames = static_cast<uint32_t>(seconds * 16000), bytes = frames * 2;
  std::vector<uint8_t> out;
  out.reserve(44 + bytes);
  auto put = [&](uint32_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  // Byte by byte: GCC 12 at -O1 takes a 4-byte range insert for an overflow (-Wstringop-overflow).
  auto tag = [&](const char* s) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(s[i]));
  };
  tag("RIFF"), put(36 + bytes, 4), tag("WAVE"), tag("fmt "), put(16, 4), put(1, 2), put(1, 2);
  put(16000, 4), put(32000, 4), put(2, 2), put(16, 2), tag("data"), put(bytes, 4);
  for (uint32_t i = 0; i < frames; ++i)
    put(static_cast<uint16_t>(static_cast<int16_t>(8000 * ((i / 40) % 2 ? 1 : -1))), 2);
  return out;
}

// Sets a baseline JPEG's frame size (SOF0: FF C0, length, precision, height, width).
std::vector<uint8_t> jpeg_with_size(std::vector<uint8_t> jpeg, uint16_t width, uint16_t height) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      jpeg[i + 5] = height >> 8, jpeg[i + 6] = height & 0xff;
      jpeg[i + 7] = width >> 8, jpeg[i + 8] = width & 0xff;
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF0 marker";
  return jpeg;
}

class MediaServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    mm_testing::tiny_projector("--clamp");  // made once, then cached: before the model's dir
    const auto dir = testing_util::temp_dir();
    model_ = new std::string((dir / "tiny-e.gguf").string());
    std::string out, err;
    ASSERT_EQ(testing_util::run_command(testing_util::headroom_binary().string() +
                                            " synth --arch gemma4 --shape tiny-e -o " + *model_,
                                        &out, &err),
              0)
        << out << err;
  }
  static void TearDownTestSuite() { delete model_; }

  // Images of up to 140 tokens, clips of up to 2 s.
  static engine::EngineOptions options() {
    return {
        .model_path = *model_,
        .mmproj_path = mm_testing::tiny_projector("--clamp").string(),
        .request = {
            .n_ctx = 256, .n_slots = 2, .n_ubatch = 64, .image_tokens = 140, .audio_seconds = 2}};
  }
  // The soft tokens an image file becomes under a budget, as the projector's preprocessing says.
  static int image_tokens(const std::string& file, int budget) {
    auto proj = gguf::File::open(mm_testing::tiny_projector("--clamp").string());
    auto spec = mm::projector_from_gguf(*proj);
    auto media = mm::prepare_image(data_file(file), *spec->vision, budget);
    EXPECT_TRUE(media.ok());
    return media.ok() ? (*media)->n_tokens : -1;
  }
  static server::ServerOptions server_options() {
    server::ServerOptions o;
    o.model_id = "tiny-e";
    o.chat_template = std::string(*chat::builtin_template("gemma4"));
    o.max_body_bytes = 8u << 20;
    return o;
  }
  static std::string* model_;
};
std::string* MediaServer::model_ = nullptr;

// A 400 whose message is one line and names `param`, containing `says`.
void expect_400(httplib::Client& c, const json& body, const std::string& param,
                const std::string& says) {
  int status = 0;
  const json r = post(c, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 400) << r.dump().substr(0, 300);
  if (!r.contains("error")) return ADD_FAILURE() << r.dump().substr(0, 300);
  const std::string message = r["error"]["message"];
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(r["error"]["param"], param) << message;
  EXPECT_NE(message.find(says), std::string::npos) << message;
}

// The prompt tokens of a 200 answer.
int prompt_tokens(httplib::Client& c, const json& body) {
  int status = 0;
  const json r = post(c, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 200) << r.dump().substr(0, 300);
  return status == 200 ? r["usage"]["prompt_tokens"].get<int>() : -1;
}

// Each medium adds its span to the prompt: its soft tokens and two markers.
TEST_F(MediaServer, TakesImagesAndAudioAsContentParts) {
  Running s(options(), server_options());
  auto c = s.client();
  const int text = prompt_tokens(c, chat_with({{"type", "text"}, {"text", ""}}));
  ASSERT_GT(text, 0);
  const int rose = image_tokens("rose.jpg", 140), rose_low = image_tokens("rose.jpg", 70);
  ASSERT_GT(rose, rose_low);
  EXPECT_EQ(prompt_tokens(c, chat_with(image_part(data_file("rose.jpg")))), text + rose + 2);
  EXPECT_EQ(prompt_tokens(c, chat_with(image_part(data_file("wizard.png"), "image/png"))),
            text + image_tokens("wizard.png", 140) + 2);
  // speech.wav, 1.2 s: 30 soft tokens (25 a second).
  EXPECT_EQ(prompt_tokens(c, chat_with(audio_part(data_file("speech.wav")))), text + 30 + 2);
  // Odd formats libsndfile reads: 8-bit µ-law at 8 kHz, 24-bit PCM, stereo at 44.1 kHz, FLAC.
  for (const char* name : {"speech-ulaw-8k.wav", "speech-s24.wav", "speech-stereo-44k.wav"})
    EXPECT_GT(prompt_tokens(c, chat_with(audio_part(data_file(name)))), text + 2) << name;
  EXPECT_GT(prompt_tokens(c, chat_with(audio_part(data_file("speech.flac"), "flac"))), text + 2);
  // A smaller budget for one image ("detail": "low") or the request ("image_tokens").
  json low = image_part(data_file("rose.jpg"));
  low["image_url"]["detail"] = "low";
  EXPECT_EQ(prompt_tokens(c, chat_with(low)), text + rose_low + 2);
  json small_budget = chat_with(image_part(data_file("rose.jpg")));
  small_budget["image_tokens"] = 70;
  EXPECT_EQ(prompt_tokens(c, small_budget), text + rose_low + 2);
  // Two media in one message, in order.
  json both = chat_with(image_part(data_file("rose.jpg")));
  both["messages"][0]["content"].insert(both["messages"][0]["content"].begin(),
                                        audio_part(data_file("speech.wav")));
  EXPECT_EQ(prompt_tokens(c, both), text + rose + 2 + 30 + 2);
}

TEST_F(MediaServer, BadMediaAreOneLine400sAndTheServerKeepsServing) {
  Running s(options(), server_options());
  auto c = s.client();
  const std::string part = "messages[0].content[0]";
  const auto jpeg = data_file("rose.jpg");
  json remote = {{"type", "image_url"}, {"image_url", {{"url", "https://example.com/a.png"}}}};
  expect_400(c, chat_with(remote), part + ".image_url.url", "fetches nothing");
  expect_400(c, chat_with(image_part({})), part, "empty");
  auto truncated = jpeg;
  truncated.resize(jpeg.size() / 3);
  expect_400(c, chat_with(image_part(truncated)), part, "JPEG");
  auto corrupt = jpeg;
  for (size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 64; ++i) corrupt[i] = 0xff;
  expect_400(c, chat_with(image_part(corrupt)), part, "corrupt JPEG");
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'};
  expect_400(c, chat_with(image_part(text)), part, "not a PNG or JPEG");
  // 60000 × 60000 pixels, refused from the header before anything is decoded.
  expect_400(c, chat_with(image_part(jpeg_with_size(jpeg, 60000, 60000))), part, "megapixels");
  json not_base64 = image_part(jpeg);
  not_base64["image_url"]["url"] = "data:image/jpeg;base64,@@@@";
  expect_400(c, chat_with(not_base64), part + ".image_url.url", "base64");
  json wrong_budget = chat_with(image_part(jpeg));
  wrong_budget["image_tokens"] = 100;
  expect_400(c, wrong_budget, "image_tokens", "70, 140, 280, 560 or 1120");
  json too_many_tokens = chat_with(image_part(jpeg));
  too_many_tokens["image_tokens"] = 1120;
  expect_400(c, too_many_tokens, part, "--image-tokens");
  // Audio: not a sound file, a wrong format name, 3 s where the run takes 2.
  expect_400(c, chat_with(audio_part(text)), part, "audio");
  expect_400(c, chat_with(audio_part(data_file("speech.wav"), "aiff")),
             part + ".input_audio.format", "wav, mp3, flac or ogg");
  expect_400(c, chat_with(audio_part(wav(3.0))), part, "--audio-seconds");
  auto cut_wav = data_file("speech.wav");
  cut_wav.resize(30);
  expect_400(c, chat_with(audio_part(cut_wav)), part, "audio");
  // Media only in user messages.
  json system = chat_with(image_part(jpeg));
  system["messages"][0]["role"] = "system";
  expect_400(c, system, "messages[0].content", "only user messages");
  EXPECT_GT(prompt_tokens(c, chat_with(image_part(jpeg))), 60);
}

TEST(MediaServerWithoutProjector, RefusesMediaInOneLine) {
  Running s(small());
  auto c = s.client();
  int status = 0;
  const json r =
      post(c, "/v1/chat/completions",
           chat_with(image_part(testing_util::read_file(mm_testing::data("rose.jpg")))), &status);
  EXPECT_EQ(status, 400) << r.dump();
  const std::string message = r["error"]["message"];
  EXPECT_NE(message.find("--mmproj"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  expect_golden_answer(s);
}

}  // namespace
