// run --think and chat --think: the reasoning channel on stderr, the answer on stdout. A template
// whose generation prompt opens <think> when thinking is on makes stories260K's whole greedy reply
// reasoning; the truth is the plain continuation of the same rendered prompt.
#include <gtest/gtest.h>

#include <fstream>

#include "testing/testing.h"

namespace {

using testing_util::headroom;

std::string write_template(const std::filesystem::path& dir) {
  const auto path = dir / "think.jinja";
  std::ofstream(path) << "{% for m in messages %}{{ m['content'] }}{% endfor %}"
                         "{% if enable_thinking %} <think>{% endif %}";
  return path.string();
}

// The greedy continuation of `prompt` (special tokens parsed, as a rendered template is).
std::string continuation(const std::string& prompt, int n) {
  std::string out, err;
  EXPECT_EQ(testing_util::run_command(headroom() + " run --parse-special --temp 0 -n " +
                                          std::to_string(n) + " -p '" + prompt + "'",
                                      &out, &err),
            0)
      << err;
  EXPECT_EQ(out.rfind(prompt, 0), 0u) << out;  // run echoes the prompt, ends with a newline
  return out.substr(prompt.size(), out.size() - prompt.size() - 1);
}

TEST(Think, RunShowsTheReasoningApartFromTheAnswer) {
  const auto dir = testing_util::temp_dir();
  const std::string tmpl = write_template(dir);
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(headroom() + " run --think --chat-template " + tmpl +
                                          " --temp 0 -n 12 -p 'Once upon a time'",
                                      &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "\n");  // everything went to the reasoning channel
  std::string thought = continuation("Once upon a time <think>", 12);
  // Whitespace at either end of the channel is not reasoning.
  thought.erase(0, thought.find_first_not_of(" \n"));
  thought.erase(thought.find_last_not_of(" \n") + 1);
  EXPECT_NE(err.find("thinking: " + thought), std::string::npos) << err << "\nwanted: " << thought;
}

TEST(Think, ChatKeepsTheReasoningOutOfTheAnswer) {
  const auto dir = testing_util::temp_dir();
  const std::string tmpl = write_template(dir);
  std::string out, err;
  ASSERT_EQ(
      testing_util::run_command("printf 'Once upon a time\\n' | " + headroom() +
                                    " chat --think --chat-template " + tmpl + " --temp 0 -n 12",
                                &out, &err),
      0)
      << err;
  EXPECT_EQ(out, "\n");
  EXPECT_NE(err.find("thinking: "), std::string::npos) << err;
  // Without --think the same template answers on stdout.
  ASSERT_EQ(testing_util::run_command("printf 'Once upon a time\\n' | " + headroom() +
                                          " chat --chat-template " + tmpl + " --temp 0 -n 12",
                                      &out, &err),
            0)
      << err;
  EXPECT_GT(out.size(), 1u);
  EXPECT_EQ(err.find("thinking: "), std::string::npos) << err;
}

}  // namespace
