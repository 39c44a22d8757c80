// --mmproj on the command line: plan prices a projector and says what an image costs, run takes
// images and clips (and proves its allocations against the plan), and every bad input — a broken
// image, media without a projector, a projector that is not one or is made for another model —
// is a one-line error with exit code 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mm/mm_testing.h"
#include "testing/testing.h"

namespace {

using testing_util::headroom;

class MediaCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // The projectors first: making one (once, then cached) empties this test's temp_dir.
    projector_ = mm_testing::tiny_projector("--clamp").string();
    narrow_projector_ = mm_testing::tiny_projector("--text-embd 64").string();
    model_ = (testing_util::temp_dir() / "tiny-e.gguf").string();
    std::string out, err;
    ASSERT_EQ(testing_util::run_command(
                  headroom() + " synth --arch gemma4 --shape tiny-e -o " + model_, &out, &err),
              0)
        << err;
  }
  // `headroom COMMAND -m tiny-e --mmproj tiny ARGS`: its exit code, stdout and stderr.
  int run(const std::string& command, const std::string& args, std::string* out, std::string* err,
          const std::string& projector = "") {
    return testing_util::run_command(headroom() + " " + command + " -m " + model_ + " --mmproj " +
                                         (projector.empty() ? projector_ : projector) + " " + args,
                                     out, err);
  }
  std::string model_, projector_, narrow_projector_;
};

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - start);
}

// inspect on a projector: each encoder's shape as tests/reference/synth_mmproj.py's "tiny" writes
// it (SHAPES["tiny"]: vision 48 wide, 3 heads, FFN 96, 2 layers, 16 px patches; audio 64 wide,
// 4 heads, 2 layers, convolutions 128/4, output 96, depthwise kernel 5; text 128 wide).
TEST_F(MediaCli, InspectDescribesTheProjector) {
  std::string out, err;
  ASSERT_EQ(
      testing_util::run_command(headroom() + " inspect " + projector_ + " --json", &out, &err), 0)
      << err;
  const nlohmann::json p = nlohmann::json::parse(out)["architecture"]["projector"];
  EXPECT_EQ(p["projects_to"], 128);
  const nlohmann::json& v = p["vision"];
  EXPECT_EQ(v["layers"], 2);
  EXPECT_EQ(v["embedding_length"], 48);
  EXPECT_EQ(v["heads"], 3);
  EXPECT_EQ(v["head_dim"], 16);
  EXPECT_EQ(v["ffn_length"], 96);
  EXPECT_EQ(v["patch_size"], 16);
  EXPECT_EQ(v["clipped_linears"], true);
  const nlohmann::json& a = p["audio"];
  EXPECT_EQ(a["layers"], 2);
  EXPECT_EQ(a["embedding_length"], 64);
  EXPECT_EQ(a["heads"], 4);
  EXPECT_EQ(a["mel_bins"], 128);
  EXPECT_EQ(a["conv_channels"], nlohmann::json::array({128, 4}));
  EXPECT_EQ(a["conv_kernel"], 5);
  EXPECT_EQ(a["output_length"], 96);
  EXPECT_EQ(a["sample_rate"], 16000);
  // The text form says the same in words.
  ASSERT_EQ(testing_util::run_command(headroom() + " inspect " + projector_, &out, &err), 0) << err;
  EXPECT_NE(out.find("vision encoder: 2 layers, width 48, 3 heads x 16"), std::string::npos) << out;
  EXPECT_NE(out.find("audio encoder: 2 layers, width 64, 4 heads x 16"), std::string::npos) << out;
}

TEST_F(MediaCli, PlanSaysWhatAnImageAndAClipCost) {
  std::string out, err;
  ASSERT_EQ(run("plan", "--image-tokens 70 --audio-seconds 2", &out, &err), 0) << err;
  EXPECT_NE(out.find("vision encoder"), std::string::npos) << out;
  EXPECT_NE(out.find("audio encoder"), std::string::npos) << out;
  EXPECT_NE(out.find("media: an image of the largest budget takes 70 tokens"), std::string::npos)
      << out;
  EXPECT_NE(out.find("a 2 s clip takes 50 tokens"), std::string::npos) << out;
  // The default budget (280) and a 30 s clip do not fit tiny-e's 256-token context: refused.
  EXPECT_EQ(run("plan", "", &out, &err), 2);
  EXPECT_NE(err.find("does not fit a context of 256"), std::string::npos) << err;
}

TEST_F(MediaCli, RunTakesImagesAndClipsAsPlanned) {
  std::string out, err;
  const std::string image = mm_testing::data("rose.jpg").string();
  const std::string clip = mm_testing::data("speech.wav").string();
  ASSERT_EQ(run("run",
                "--image-tokens 70 --audio-seconds 2 --image " + image + " --audio " + clip +
                    " -p 'Say what you see and hear: <|image|> <|audio|>' -n 3 --temp 0 "
                    "--verify-plan",
                &out, &err),
            0)
      << err;
  // 60 soft tokens of the rose, 30 of the clip, their markers and the text.
  EXPECT_NE(err.find("prompt 1"), std::string::npos) << err;
  EXPECT_NE(err.find("generated 3 tok"), std::string::npos) << err;
  // Every class allocated as planned, the encoders and the media rows included.
  const size_t loaded = err.find("after loading:");
  ASSERT_NE(loaded, std::string::npos) << err;
  const std::string verification = err.substr(loaded);
  for (const char* cls : {"weights", "activations", "media rows"}) {
    const size_t at = verification.find(std::string("\n") + cls);
    ASSERT_NE(at, std::string::npos) << cls << "\n" << verification;
    const std::string line = verification.substr(at + 1, verification.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find("100.00%"), std::string::npos) << line;
  }
}

TEST_F(MediaCli, BadInputIsOneLineErrors) {
  std::string out, err;
  const std::string cmyk = mm_testing::data("rose-cmyk.jpg").string();
  EXPECT_EQ(
      run("run", "--image-tokens 70 --audio-seconds 2 --image " + cmyk + " -p hi", &out, &err), 2);
  EXPECT_EQ(last_line(err),
            cmyk + ": image: CMYK JPEG images are not supported — convert it to RGB");
  // Two images, one placeholder.
  const std::string rose = mm_testing::data("rose.jpg").string();
  EXPECT_EQ(run("run",
                "--image-tokens 70 --audio-seconds 2 --image " + rose + " --image " + rose +
                    " -p 'look <|image|>'",
                &out, &err),
            2);
  EXPECT_NE(last_line(err).find("1 image placeholder but 2 images were given"), std::string::npos)
      << err;
  // A text model where the projector goes; a projector for a 64-wide model.
  EXPECT_EQ(run("run", "-p hi", &out, &err, model_), 2);
  EXPECT_NE(last_line(err).find("not 'clip'"), std::string::npos) << err;
  EXPECT_EQ(run("run", "--image-tokens 70 --audio-seconds 2 -p hi", &out, &err, narrow_projector_),
            2);
  EXPECT_NE(last_line(err).find("64"), std::string::npos) << err;
  // Media without a projector, a budget without one.
  EXPECT_EQ(testing_util::run_command(
                headroom() + " run -m " + model_ + " --image " + rose + " -p hi", &out, &err),
            2);
  EXPECT_NE(last_line(err).find("start it with --mmproj"), std::string::npos) << err;
  EXPECT_EQ(testing_util::run_command(
                headroom() + " run -m " + model_ + " --image-tokens 280 -p hi", &out, &err),
            2);
  EXPECT_NE(last_line(err).find("need --mmproj"), std::string::npos) << err;
}

}  // namespace
