// docs/doctor.md lists the rule table exactly as src/doctor/rules.cpp holds it, so the doc cannot
// drift: every rule has its row (id, status, when, cause, action verbatim), every row a rule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "doctor/rules.h"
#include "testing/testing.h"

namespace doctor {
namespace {

// The table row docs/doctor.md should have for a rule (a failure prints it, ready to paste).
std::string expected_row(const Rule& r) {
  return fmt::format("| `{}` | {} | {} | {} | {} |", r.id, status_name(r.status), r.when, r.cause,
                     r.action);
}

std::vector<std::string> doc_lines() {
  std::istringstream in(testing_util::read_text(testing_util::source_dir() / "docs/doctor.md"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(DoctorDocs, EveryRuleHasItsRowVerbatim) {
  const auto lines = doc_lines();
  ASSERT_FALSE(lines.empty());
  for (const Rule& r : rules()) {
    const std::string want = expected_row(r);
    // A '|' would split the markdown cell: the doc would need "\\|" and this test to unescape it.
    for (std::string_view text : {r.when, r.cause, r.action})
      ASSERT_EQ(text.find('|'), std::string_view::npos) << r.id << ": '|' in " << text;
    const std::string key = fmt::format("| `{}` |", r.id);
    const auto row = std::find_if(lines.begin(), lines.end(),
                                  [&](const std::string& l) { return l.rfind(key, 0) == 0; });
    if (row == lines.end()) {
      ADD_FAILURE() << "docs/doctor.md has no row for rule " << r.id << "; add:\n" << want;
    } else {
      EXPECT_EQ(*row, want) << "docs/doctor.md's row for " << r.id
                            << " differs from src/doctor/rules.cpp";
    }
  }
}

TEST(DoctorDocs, EveryRowIsARuleAndEveryCheckHasASection) {
  std::set<std::string> ids;
  for (const Rule& r : rules()) ids.insert(std::string(r.id));
  static const std::regex row(R"(^\| `([a-z-]+\.[a-z-]+)` \|)");
  int rows = 0;
  for (const auto& line : doc_lines()) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    EXPECT_TRUE(ids.count(m[1].str()))
        << "docs/doctor.md lists " << m[1] << ", which src/doctor/rules.cpp does not have";
  }
  EXPECT_EQ(rows, static_cast<int>(ids.size())) << "one row per rule";
  const std::string doc = testing_util::read_text(testing_util::source_dir() / "docs/doctor.md");
  for (std::string_view check : checks())
    EXPECT_NE(doc.find(fmt::format("### {}\n", check)), std::string::npos)
        << "no section for the check " << check;
}

}  // namespace
}  // namespace doctor
