// Second oracle: Python's jinja2 (configured as Hugging Face does) renders new conversations
// across every corpus template, and headroom must produce the same bytes or the same failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "chat/template.h"
#include "testing/testing.h"

namespace {

using nlohmann::ordered_json;

using testing_util::python3;

std::tm oracle_now() {  // jinja_oracle.py fixes strftime_now() at 2025-01-15 10:30:00
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mday = 15;
  t.tm_hour = 10;
  t.tm_min = 30;
  t.tm_wday = 3;
  t.tm_yday = 14;
  return t;
}

bool python_jinja_available() {
  std::string out;
  return testing_util::run_command(python3() + " -c 'import jinja2' 2>/dev/null", &out) == 0;
}

struct OracleRun {
  int total = 0;
  int matched = 0;
  int rendered = 0;
  std::vector<std::string> failures;
};

// Renders every template × case with jinja_oracle.py and with headroom, and compares.
OracleRun run_oracle(const ordered_json& templates, const ordered_json& cases) {
  ordered_json job = {{"templates", templates}, {"cases", cases}, {"mutable_sandbox", false}};
  auto tmp = testing_util::temp_dir();
  std::ofstream(tmp / "job.json") << job.dump();
  std::string out, err;
  std::string cmd = python3() + " " +
                    (testing_util::source_dir() / "tests/chat/jinja_oracle.py").string() + " " +
                    (tmp / "job.json").string() + " " + (tmp / "out.json").string();
  OracleRun run;
  if (testing_util::run_command(cmd, &out, &err) != 0) {
    run.failures.push_back("jinja_oracle.py failed: " + err);
    return run;
  }
  auto python = ordered_json::parse(testing_util::read_text(tmp / "out.json"));
  std::filesystem::remove_all(tmp);
  for (const auto& tpl : templates) {
    std::string stem = tpl["name"];
    for (const auto& c : cases) {
      std::string name = c["name"];
      ++run.total;
      chat::RenderOptions options;
      options.bos_token = tpl["bos_token"];
      options.eos_token = tpl["eos_token"];
      options.add_generation_prompt = c.value("add_generation_prompt", true);
      options.tools = c.value("tools", ordered_json());
      if (c.contains("extra")) options.extra = c["extra"];
      options.engine.now = oracle_now();
      auto ours =
          chat::apply_chat_template(tpl["source"].get<std::string>(), c["messages"], options);
      const auto& want = python[stem][name];
      std::string label = stem + " × " + name + ": ";
      if (want["ok"].get<bool>()) {
        if (!ours) {
          run.failures.push_back(label + "Python renders, we fail: " + ours.error().message());
        } else if (*ours != want["text"].get<std::string>()) {
          run.failures.push_back(label +
                                 "output differs\n  python: " + ordered_json(want["text"]).dump() +
                                 "\n  ours:   " + ordered_json(*ours).dump());
        } else {
          ++run.matched;
          ++run.rendered;
        }
      } else if (ours) {
        run.failures.push_back(label + "we render, Python raises " +
                               want["error_type"].get<std::string>() + ": " +
                               want["error_message"].get<std::string>());
      } else if (want["error_type"] == "TemplateError" &&
                 ours.error().message() !=
                     "chat template: " + want["error_message"].get<std::string>()) {
        run.failures.push_back(label +
                               "raise_exception message differs: " + ours.error().message());
      } else {
        ++run.matched;
      }
    }
  }
  return run;
}

TEST(ChatTemplateOracle, NewConversationsMatchPythonJinjaOnAllTemplates) {
  if (!python_jinja_available()) {
    GTEST_SKIP() << python3()
                 << " with python3-jinja2 is not installed (apt install python3-jinja2)";
  }
  auto dir = testing_util::shared_dir() / "testdata" / "templates";
  auto corpus = ordered_json::parse(testing_util::read_text(dir / "cases.json"));
  auto conversations = ordered_json::parse(
      testing_util::read_text(testing_util::source_dir() / "tests/chat/oracle_conversations.json"));
  ordered_json templates = ordered_json::array();
  for (const auto& [stem, info] : corpus["templates"].items()) {
    templates.push_back({{"name", stem},
                         {"source", testing_util::read_text(dir / info["file"].get<std::string>())},
                         {"bos_token", info["bos_token"]},
                         {"eos_token", info["eos_token"]}});
  }
  OracleRun run = run_oracle(templates, conversations["cases"]);
  for (const auto& f : run.failures) ADD_FAILURE() << f;
  std::printf(
      "oracle: %d of %d template × conversation combinations match Python jinja2 "
      "(%d rendered, %d errors on both sides)\n",
      run.matched, run.total, run.rendered, run.matched - run.rendered);
  EXPECT_EQ(run.matched, run.total);
  EXPECT_GE(run.total, 68 * 8);
}

// Small templates that exercise one engine feature each (filters, methods, printing, scoping).
TEST(ChatTemplateOracle, EngineProbesMatchPythonJinja) {
  if (!python_jinja_available()) {
    GTEST_SKIP() << python3()
                 << " with python3-jinja2 is not installed (apt install python3-jinja2)";
  }
  auto probes = ordered_json::parse(
      testing_util::read_text(testing_util::source_dir() / "tests/chat/oracle_probes.json"));
  ordered_json templates = ordered_json::array();
  int i = 0;
  for (const auto& source : probes["templates"]) {
    templates.push_back({{"name", "probe" + std::to_string(++i)},
                         {"source", source},
                         {"bos_token", "<s>"},
                         {"eos_token", "</s>"}});
  }
  ordered_json extra = probes["variables"];
  ordered_json messages = extra["messages"];
  extra.erase("messages");
  ordered_json cases = ordered_json::array();
  cases.push_back({{"name", "probe"}, {"messages", messages}, {"extra", extra}});
  OracleRun run = run_oracle(templates, cases);
  for (const auto& f : run.failures) ADD_FAILURE() << f;
  std::printf("probes: %d of %d match Python jinja2\n", run.matched, run.total);
  EXPECT_EQ(run.matched, run.total);
}

}  // namespace
