// The 68 real chat templates × 7 conversations of ../shared/testdata/templates, byte for byte.
#include <gtest/gtest.h>

#include <string>

#include "chat/template.h"
#include "testing/testing.h"

namespace {

using nlohmann::ordered_json;

std::filesystem::path corpus_dir() {
  return testing_util::shared_dir() / "testdata" / "templates";
}

// The fixed clock of the corpus: strftime_now() sees 2025-01-15 10:30:00 (a Wednesday).
std::tm corpus_now() {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 10;
  t.tm_min = 30;
  t.tm_wday = 3;
  t.tm_yday = 14;
  return t;
}

// Where two renderings first differ, with a little context, for the failure message.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i < 40 ? 0 : i - 40;
  return "at byte " + std::to_string(i) +
         "\n  want: " + ordered_json(want.substr(from, 120)).dump() +
         "\n  got:  " + ordered_json(got.substr(from, 120)).dump();
}

struct CorpusRun {
  int passed = 0;
  int total = 0;
  std::vector<std::string> failures;
};

CorpusRun run_corpus(bool mutable_sandbox) {
  auto cases = ordered_json::parse(testing_util::read_text(corpus_dir() / "cases.json"));
  CorpusRun run;
  for (const auto& [stem, info] : cases["templates"].items()) {
    std::string source = testing_util::read_text(corpus_dir() / info["file"].get<std::string>());
    for (const auto& c : cases["cases"]) {
      std::string name = c["name"];
      const auto& want = cases["results"][stem][name];
      if (mutable_sandbox && !want.contains("alternate_if_list_mutation_allowed")) continue;
      ++run.total;
      chat::RenderOptions options;
      options.bos_token = info["bos_token"];
      options.eos_token = info["eos_token"];
      options.add_generation_prompt = c["add_generation_prompt"];
      options.tools = c["tools"];
      options.engine.now = corpus_now();
      options.engine.mutable_sandbox = mutable_sandbox;
      auto got = chat::apply_chat_template(source, c["messages"], options);
      std::string label = stem + " × " + name + ": ";
      const auto& expected_ok = mutable_sandbox ? want["alternate_if_list_mutation_allowed"] : want;
      if (mutable_sandbox || want["ok"].get<bool>()) {
        std::string text =
            testing_util::read_text(corpus_dir() / expected_ok["expected_file"].get<std::string>());
        if (!got) {
          run.failures.push_back(label + "unexpected error: " + got.error().message());
        } else if (*got != text) {
          run.failures.push_back(label + "differs " + first_difference(text, *got));
        } else {
          ++run.passed;
        }
        continue;
      }
      if (got) {
        run.failures.push_back(label + "rendered, but Python raises " +
                               want["error_type"].get<std::string>() + ": " +
                               want["error_message"].get<std::string>());
      } else if (want["error_type"] == "TemplateError" &&
                 got.error().message() !=
                     "chat template: " + want["error_message"].get<std::string>()) {
        run.failures.push_back(label + "raise_exception message differs: " + got.error().message());
      } else {
        ++run.passed;
      }
    }
  }
  return run;
}

TEST(ChatTemplateCorpus, All476RenderingsMatchPythonJinja) {
  CorpusRun run = run_corpus(false);
  for (const auto& f : run.failures) ADD_FAILURE() << f;
  EXPECT_EQ(run.total, 476);
  EXPECT_EQ(run.passed, 476);
  std::printf("corpus: %d of %d template × case combinations match\n", run.passed, run.total);
}

TEST(ChatTemplateCorpus, MutableSandboxRenderingsMatch) {
  CorpusRun run = run_corpus(true);
  for (const auto& f : run.failures) ADD_FAILURE() << f;
  EXPECT_EQ(run.total, 4);
  EXPECT_EQ(run.passed, 4);
}

}  // namespace
