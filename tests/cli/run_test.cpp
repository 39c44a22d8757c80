// headroom run / chat as a user drives them: golden text, seeds, refusals, Ctrl-C.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "testing/testing.h"
#include "tokenizer/tokenizer.h"

namespace {

using testing_util::headroom;

TEST(Run, GreedyTextIsTheGoldenContinuation) {
  auto g = nlohmann::json::parse(
      testing_util::read_text(testing_util::shared_dir() / "models/stories260K.golden.json"));
  const auto& c = g["cases"][0];
  auto file = gguf::File::open((testing_util::shared_dir() / "models/stories260K.gguf").string());
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  std::vector<int32_t> ids = c["greedy_generated_ids"].get<std::vector<int32_t>>();
  ids.resize(40);
  std::string out, err;
  const int rc = testing_util::run_command(
      headroom() + " run -p 'Once upon a time' -n 40 --temp 0 --kv-type-k f32 --kv-type-v f32",
      &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(out, "Once upon a time" + tok->decode(ids) + "\n");
  EXPECT_NE(err.find("plan for"), std::string::npos) << "the plan is printed before loading";
  EXPECT_NE(err.find("generated 40 tok"), std::string::npos) << err;
  EXPECT_NE(err.find("first token"), std::string::npos) << err;
}

TEST(Run, SameSeedSameTextOtherSeedOtherText) {
  auto sample = [](int seed) {
    std::string out, err;
    EXPECT_EQ(testing_util::run_command(
                  headroom() + " run -p 'The dog' -n 30 --temp 1.0 --seed " + std::to_string(seed),
                  &out, &err),
              0)
        << err;
    return out;
  };
  const std::string a = sample(11);
  EXPECT_EQ(a, sample(11));
  EXPECT_NE(a, sample(12));
}

// --draft-model with a Gemma 4 assistant drafter: the plan lists what the drafter costs, the text
// is the one without it, and the evidence line counts the drafts; beside a GPU plan it is planned
// in the GPU's memory with its staging on the host; a drafter file alone, or a drafter beside a
// plan split between the CPU and a GPU, is refused with what to do instead.
TEST(Run, ADraftModelLeavesTheTextAsItIsAndIsPlanned) {
  const auto dir = testing_util::temp_dir();
  const std::string target = (dir / "tiny-e.gguf").string(), drafter = (dir / "mtp.gguf").string();
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(
                headroom() + " synth --arch gemma4 --shape tiny-e -o " + target, &out, &err),
            0)
      << err;
  testing_util::write_assistant(target, drafter);
  ASSERT_FALSE(HasFailure());
  const std::string run =
      headroom() + " run -m " + target + " -p 'Once upon a time' -n 24 --temp 0";
  std::string plain, plain_err, drafted, drafted_err;
  ASSERT_EQ(testing_util::run_command(run, &plain, &plain_err), 0) << plain_err;
  ASSERT_EQ(testing_util::run_command(run + " --draft-model " + drafter, &drafted, &drafted_err), 0)
      << drafted_err;
  EXPECT_EQ(drafted, plain);
  for (const char* item : {"drafter", "drafter activations", "draft hidden states"})
    EXPECT_NE(drafted_err.find(item), std::string::npos) << item << " in the plan\n" << drafted_err;
  EXPECT_NE(drafted_err.find("drafts: "), std::string::npos) << drafted_err;
  EXPECT_NE(testing_util::run_command(run + " --draft 0 --draft-model " + drafter, &out, &err), 0);
  EXPECT_NE(err.find("--draft 0 turns drafting off"), std::string::npos) << err;
  EXPECT_NE(testing_util::run_command(headroom() + " run -m " + drafter + " -p hi", &out, &err), 0);
  EXPECT_NE(err.find("--draft-model"), std::string::npos) << err;
  const std::string gpu_plan =
      headroom() + " plan -m " + target + " --draft-model " + drafter + " --assume-gpu 1G@100";
  ASSERT_EQ(testing_util::run_command(gpu_plan, &out, &err), 0) << err;
  for (const char* line :
       {"drafter activations                gpu", "drafter staging (page-locked)      cpu"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << " in the plan\n" << out;
  }
  EXPECT_NE(testing_util::run_command(gpu_plan + " --ple-on-host", &out, &err), 0);
  EXPECT_NE(err.find("splits them between the CPU and the GPU"), std::string::npos) << err;
  EXPECT_NE(err.find("--draft-model"), std::string::npos) << err;
}

// --draft-model with a small model of the same vocabulary (here the model itself, which drafts
// what it picks): the plan lists the draft model's own KV cache, the text is the one without it,
// every draft is kept; a model of another vocabulary is refused with what to do; beside a GPU it is
// planned in the GPU's memory.
TEST(Run, ASmallDraftModelLeavesTheTextAsItIsAndKeepsItsOwnCache) {
  const std::string target = (testing_util::temp_dir() / "tiny-e.gguf").string();
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(
                headroom() + " synth --arch gemma4 --shape tiny-e -o " + target, &out, &err),
            0)
      << err;
  const std::string run =
      headroom() + " run -m " + target + " -p 'Once upon a time' -n 24 --temp 0";
  std::string plain, plain_err, drafted, drafted_err;
  ASSERT_EQ(testing_util::run_command(run, &plain, &plain_err), 0) << plain_err;
  ASSERT_EQ(testing_util::run_command(run + " --draft-model " + target, &drafted, &drafted_err), 0)
      << drafted_err;
  EXPECT_EQ(drafted, plain);
  for (const char* item : {"drafter kv cache", "drafter activations", "drafter logits"})
    EXPECT_NE(drafted_err.find(item), std::string::npos) << item << " in the plan\n" << drafted_err;
  const size_t at = drafted_err.find("drafts: ");
  ASSERT_NE(at, std::string::npos) << drafted_err;
  int kept = 0, total = 0;
  ASSERT_EQ(std::sscanf(drafted_err.c_str() + at, "drafts: %d of %d kept", &kept, &total), 2);
  EXPECT_GT(total, 0);
  EXPECT_EQ(kept, total);
  const std::string stories = (testing_util::shared_dir() / "models/stories260K.gguf").string();
  EXPECT_NE(testing_util::run_command(run + " --draft-model " + stories, &out, &err), 0);
  EXPECT_NE(err.find("does not share the vocabulary"), std::string::npos) << err;
  // Beside a GPU plan it goes whole into the GPU's memory (its logits, staging and bookkeeping
  // on the host).
  ASSERT_EQ(testing_util::run_command(headroom() + " plan -m " + target + " --draft-model " +
                                          target + " --assume-gpu 1G@100 --json",
                                      &out, &err),
            0)
      << err;
  const auto plan = nlohmann::json::parse(out);
  std::set<std::pair<std::string, int>> placed;  // (item, device)
  for (const auto& item : plan["items"])
    placed.emplace(item["name"].get<std::string>(), item["device"].get<int>());
  for (const auto& [name, device] :
       std::set<std::pair<std::string, int>>{{"weights: drafter", 1},
                                             {"drafter activations", 1},
                                             {"drafter kv cache", 1},
                                             {"drafter logits", 0},
                                             {"drafter staging (page-locked)", 0},
                                             {"drafter kv bookkeeping", 0}}) {
    EXPECT_TRUE(placed.contains({name, device})) << name << " on device " << device << "\n" << out;
  }
}

TEST(Run, PromptLongerThanTheContextIsRefusedWithBothCounts) {
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "Once upon a time ";
  std::string out, err;
  const int rc =
      testing_util::run_command(headroom() + " run --ctx 64 -p '" + prompt + "'", &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("tokens but the context holds 64"), std::string::npos) << err;
}

TEST(Run, RefusesAPlanThatDoesNotFit) {
  std::string out, err;
  const int rc = testing_util::run_command(
      headroom() + " run -p hi --ctx 2048 --slots 64 --cpu-mem 4M", &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("does not fit"), std::string::npos) << err;
}

// The interrupt is sent once the prompt shows (the handler is in place by then): a fixed delay
// raced a slow start, and a background job's SIGINT is ignored until the handler replaces that.
TEST(Run, CtrlCStopsGenerationCleanly) {
  std::string out, err;
  const auto text = testing_util::temp_dir() / "interrupted.txt";
  const std::string cmd = "sh -c '" + headroom() +
                          " run -p \"Once upon a time\" -n -1 --ctx 100000 > " + text.string() +
                          " & pid=$!; i=0; while [ ! -s " + text.string() +
                          " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
                          "kill -INT $pid; wait $pid'";
  const int rc = testing_util::run_command(cmd, &out, &err);
  out = testing_util::read_text(text);
  EXPECT_EQ(rc, 130) << err;
  EXPECT_NE(err.find("interrupted"), std::string::npos) << err;
  EXPECT_EQ(out.rfind("Once upon a time", 0), 0u);
}

TEST(Chat, TwoTurnsWithATemplate) {
  std::string out, err;
  const int rc = testing_util::run_command("printf 'Hello\\nTell me a story\\n' | " + headroom() +
                                               " chat --chat-template chatml --temp 0 -n 8",
                                           &out, &err);
  ASSERT_EQ(rc, 0) << err;
  size_t lines = 0;
  for (size_t p = err.find("generated 8 tok"); p != std::string::npos;
       p = err.find("generated 8 tok", p + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << err;
}

TEST(Chat, ModelWithoutATemplateSaysWhatToPass) {
  std::string out, err;
  const int rc = testing_util::run_command("printf 'Hi\\n' | " + headroom() + " chat", &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--chat-template"), std::string::npos) << err;
}

}  // namespace
