// GGUF reader on malformed files: each file in tests/data/gguf-malformed/ fails with its error.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;

fs::path malformed_dir() {
  return testing_util::source_dir() / "tests/data/gguf-malformed";
}
fs::path corpus_dir() {
  return testing_util::source_dir() / "fuzz/corpus/gguf";
}

// manifest.tsv: "FILE<TAB>EXPECTED ERROR SUBSTRING" per line; '#' starts a comment line.
std::map<std::string, std::string> read_manifest() {
  std::map<std::string, std::string> out;
  std::istringstream in(testing_util::read_text(malformed_dir() / "manifest.tsv"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << "manifest line without a tab: " << line;
    if (tab == std::string::npos) continue;
    EXPECT_TRUE(out.emplace(line.substr(0, tab), line.substr(tab + 1)).second) << line;
  }
  return out;
}

std::set<std::string> gguf_files_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf") out.insert(entry.path().filename().string());
  }
  return out;
}

TEST(GgufMalformed, EveryFileFailsWithItsOneLineError) {
  const auto manifest = read_manifest();
  ASSERT_GE(manifest.size(), 50u);
  for (const auto& [name, expected] : manifest) {
    const std::string path = (malformed_dir() / name).string();
    auto file = gguf::File::open(path);
    ASSERT_FALSE(file.ok()) << name << " parsed, but should fail with: " << expected;
    const std::string& message = file.error().message();
    EXPECT_EQ(message.rfind("gguf: " + path + ": offset ", 0), 0u)
        << name << ": the error must name the file and the offset first: " << message;
    EXPECT_NE(message.find(expected), std::string::npos)
        << name << "\n  expected: " << expected << "\n  actual:   " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << name << ": not one line: " << message;
    // Parsing the bytes directly must give the same error (open only adds the mapping).
    auto bytes = testing_util::read_file(path);
    auto parsed = gguf::File::parse(bytes, path);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.error().message(), message);
  }
}

TEST(GgufMalformed, ManifestListsEveryFile) {
  const auto manifest = read_manifest();
  std::set<std::string> listed;
  for (const auto& [name, expected] : manifest) listed.insert(name);
  EXPECT_EQ(listed, gguf_files_in(malformed_dir()));
}

// The seeds are written by an encoder independent of src/gguf (scripts/gen_gguf_fixtures.py):
// our reader must accept them and our writer must reproduce them byte for byte.
TEST(GgufMalformed, SeedCorpusIsValidAndRoundTrips) {
  const auto seeds = gguf_files_in(corpus_dir());
  ASSERT_GE(seeds.size(), 10u);
  for (const auto& name : seeds) {
    auto bytes = testing_util::read_file(corpus_dir() / name);
    auto file = gguf::File::parse(bytes, name);
    ASSERT_TRUE(file.ok()) << file.error().message();
    auto written = gguf::Writer::copy_of(*file).write_to_memory();
    ASSERT_TRUE(written.ok()) << name << ": " << written.error().message();
    EXPECT_TRUE(*written == bytes) << name << " differs after a read/write round trip";
  }
}

// The committed fixtures are what the committed script writes (so the script stays the truth).
TEST(GgufMalformed, FixturesMatchTheirGenerator) {
  const std::string python = testing_util::python3();
  if (testing_util::run_command(python + " --version", nullptr) != 0) {
    GTEST_SKIP() << python << " is not installed (scripts/setup.sh installs it)";
  }
  const fs::path out = testing_util::temp_dir();
  const std::string cmd = python + " " +
                          (testing_util::source_dir() / "scripts/gen_gguf_fixtures.py").string() +
                          " --out " + out.string() + " 2>&1";
  std::string log;
  ASSERT_EQ(testing_util::run_command(cmd, &log), 0) << log;
  for (const auto& [committed, generated] :
       {std::pair{malformed_dir(), out / "tests/data/gguf-malformed"},
        std::pair{corpus_dir(), out / "fuzz/corpus/gguf"}}) {
    std::set<std::string> names = gguf_files_in(committed);
    EXPECT_EQ(names, gguf_files_in(generated)) << committed;
    names.insert("manifest.tsv");
    for (const auto& name : names) {
      if (!fs::exists(committed / name) && name == "manifest.tsv") continue;
      EXPECT_TRUE(testing_util::read_file(committed / name) ==
                  testing_util::read_file(generated / name))
          << (committed / name) << " is stale: run scripts/gen_gguf_fixtures.py and commit";
    }
  }
  fs::remove_all(out);
}

}  // namespace
