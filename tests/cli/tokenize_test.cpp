// headroom tokenize / detokenize: output, defaults, and exit code 2 with one stderr line on bad
// input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/writer.h"
#include "testing/testing.h"

namespace {

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

using testing_util::Ran;
using testing_util::run_headroom;

std::string vocab(const char* name) {
  return quote((testing_util::shared_dir() / "models/vocab" / name).string());
}

// The ids of `tokenize` text output: the first column of each line.
std::vector<int32_t> ids_of(const std::string& out) {
  std::vector<int32_t> ids;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) ids.push_back(std::stoi(line));
  return ids;
}

void expect_bad_input(const Ran& r) {
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

TEST(CliTokenize, DefaultModelMatchesGoldenPromptIds) {
  Ran r = run_headroom("tokenize -p 'Once upon a time'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(ids_of(r.out), std::vector<int32_t>({1, 403, 407, 261, 378}));
  EXPECT_NE(r.out.find("\" Once\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"<s>\"  (control)"), std::string::npos) << r.out;
}

TEST(CliTokenize, NoBosJsonAndFileInput) {
  auto dir = testing_util::temp_dir();
  { std::ofstream(dir / "prompt.txt") << "Zoo"; }
  Ran r = run_headroom("tokenize --no-bos --json -f " + quote((dir / "prompt.txt").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 3u);
  EXPECT_EQ(json[0]["id"], 410);
  EXPECT_EQ(json[0]["piece"], " ");
  EXPECT_EQ(json[0]["text"], "\xE2\x96\x81");
  EXPECT_EQ(json[1]["id"], 469);
  EXPECT_EQ(json[2]["id"], 347);
}

TEST(CliTokenize, ByteTokensShownEscaped) {
  Ran r = run_headroom("tokenize --no-bos -p '🦙'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\"\\xF0\"  (byte)"), std::string::npos) << r.out;
}

TEST(CliTokenize, ParseSpecialOnlyWhenAsked) {
  const std::string model = vocab("ggml-vocab-gemma-3-reconstructed.gguf");
  Ran plain = run_headroom("tokenize -m " + model + " --no-bos -p '<start_of_turn>user'");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_NE(ids_of(plain.out).front(), 105);
  Ran special =
      run_headroom("tokenize -m " + model + " --parse-special -p '<bos><start_of_turn>user'");
  ASSERT_EQ(special.rc, 0) << special.err;
  auto ids = ids_of(special.out);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 2);  // <bos> once: the file's add_bos does not double it
  EXPECT_EQ(ids[1], 105);
}

TEST(CliDetokenize, PrintsText) {
  Ran r = run_headroom("detokenize --ids 1,403,407,261,378");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time\n");
  Ran special = run_headroom("detokenize --special --ids 1,403");
  EXPECT_EQ(special.out, "<s> Once\n");
  Ran gpt2 =
      run_headroom("detokenize -m " + vocab("ggml-vocab-gpt-2.gguf") + " --ids '15496, 995'");
  ASSERT_EQ(gpt2.rc, 0) << gpt2.err;
  EXPECT_EQ(gpt2.out, "Hello world\n");
}

TEST(CliDetokenize, BadIdsAreBadInput) {
  expect_bad_input(run_headroom("detokenize --ids 1,x"));
  expect_bad_input(run_headroom("detokenize --ids 1,-3"));
  expect_bad_input(run_headroom("detokenize --ids 1,512"));  // stories260K has 512 tokens
  Ran r = run_headroom("detokenize --ids 99999");
  expect_bad_input(r);
  EXPECT_NE(r.err.find("99999"), std::string::npos);
}

TEST(CliTokenize, BadInputsExitTwo) {
  expect_bad_input(run_headroom("tokenize"));
  expect_bad_input(run_headroom("tokenize -m /nonexistent.gguf -p hi"));
  expect_bad_input(run_headroom("tokenize -f /nonexistent.txt"));

  // A file whose tokenizer model headroom does not implement.
  auto file = gguf::File::open(
      (testing_util::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf").string());
  ASSERT_TRUE(file.ok());
  auto writer = gguf::Writer::copy_of(*file);
  writer.set("tokenizer.ggml.model", gguf::MetaValue::string("t5"));
  auto path = testing_util::temp_dir() / "t5.gguf";
  ASSERT_TRUE(writer.write(path.string()).ok());
  Ran r = run_headroom("tokenize -m " + quote(path.string()) + " -p hi");
  expect_bad_input(r);
  EXPECT_NE(r.err.find("unsupported tokenizer model 't5'"), std::string::npos) << r.err;
}

}  // namespace
