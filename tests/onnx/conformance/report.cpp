// The manifest, the failure reasons, expected_failures.txt and docs/onnx-coverage.md.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "conformance.h"

namespace carve::conformance {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::string one_line(std::string text, size_t limit) {
  std::replace_if(text.begin(), text.end(), [](char ch) { return ch == '\n' || ch == '\t'; }, ' ');
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

}  // namespace

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return "pass";
    case Verdict::kError: return "error";
    case Verdict::kWrong: return "WRONG";
    case Verdict::kNotRun: return "not run";
  }
  return "?";
}

Result<std::vector<Case>> read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.tsv";
  std::ifstream in(path);
  if (!in) return Status(ErrorCode::kIoError, fmt::format("cannot read '{}': run generate.py first", path));
  std::vector<Case> cases;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split(line, '\t');
    if (f.size() != 8)
      return Status(ErrorCode::kParseError, fmt::format("{}:{}: {} fields, expected 8", path, line_no, f.size()));
    Case c{f[0], f[1], f[2], std::atoll(f[3].c_str()), f[4], f[5], {}, {}};
    if (!f[6].empty()) c.inputs = split(f[6], ',');
    c.outputs = split(f[7], ',');
    cases.push_back(std::move(c));
  }
  if (cases.empty()) return Status(ErrorCode::kParseError, fmt::format("{}: no cases", path));
  return cases;
}

std::string failure_reason(const Case& c, const Outcome& outcome) {
  if (outcome.verdict == Verdict::kNotRun) return outcome.detail;
  if (c.domain == "ai.onnx.preview.training") return "training-only";
  if (outcome.verdict == Verdict::kWrong) return "WRONG: " + one_line(outcome.detail, 120);
  // Status::to_string: "Code: <path>/model.onnx: onnx node 'NAME' (Op): what".
  const std::string code = outcome.detail.substr(0, outcome.detail.find(':'));
  std::string m = std::regex_replace(outcome.detail, std::regex(R"(\S*/model\.onnx: )"), "");
  m = one_line(std::regex_replace(m, std::regex(R"(npy '\S*/([^/']+)')"), "npy '$1'"), 400);
  std::smatch match, detail;
  std::string reason;
  if (std::regex_search(m, match, std::regex(R"(onnx opset (\d+) is not supported)"))) {
    reason = std::stoi(match[1]) < 7 ? "opset < 7" : "opset " + match[1].str();
  } else if (std::regex_search(m, match, std::regex(R"(ONNX element type (\w+) has no carve dtype)"))) {
    reason = "unsupported dtype: " + match[1].str();
  } else if (std::regex_search(m, match, std::regex(R"(npy '[^']*': dtype '([^']+)')"))) {
    reason = "unsupported dtype: npy " + match[1].str();
  } else if (std::regex_search(m, std::regex(R"(onnx input '[^']*' is not a tensor)"))) {
    reason = "optional type";
  } else if (std::regex_search(m, match, std::regex(R"(onnx input '([^']*)': given shape (\S+) but the model (.*))"))) {
    // The case's own data contradicts its model (onnx 1.12's bfloat16 CastLike cases
    // declare 'like' with the output's [3, 4] type and feed one element): refusing the
    // input is right, so the list says so instead of calling it a carve error.
    reason = fmt::format("malformed case: input '{}' data {} but the model {}", match[1].str(), match[2].str(),
                         match[3].str());
  } else if (std::regex_search(m, match, std::regex(R"(onnx node '[^']*' \((\w+)\): (.*))"))) {
    const std::string op = match[1], what = match[2];
    if (what.starts_with("operator is not supported"))
      reason = "unsupported op: " + op;
    else if (std::regex_search(what, detail, std::regex(R"(^attribute '(\w+)' is not supported)")))
      reason = fmt::format("unsupported attribute: {}.{}", op, detail[1].str());
    else if (std::regex_search(what, detail, std::regex(R"(^input \d+ \((\w+)\) must be a constant)")))
      reason = fmt::format("constant input required: {}.{}", op, detail[1].str());
    else
      reason = fmt::format("{}: {}: {}", code == "Unsupported" ? "unsupported form" : "error " + code, op,
                           one_line(what, 100));
  } else {
    reason = fmt::format("error {}: {}", code, one_line(m.substr(std::min(m.size(), code.size() + 2)), 100));
  }
  return c.compare == "random" ? "random op: " + reason : reason;
}

Result<std::map<std::string, std::string>> read_expected(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(ErrorCode::kIoError, fmt::format("cannot read '{}'", path));
  std::map<std::string, std::string> expected;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t gap = line.find_first_of(" \t");
    const size_t reason = gap == std::string::npos ? gap : line.find_first_not_of(" \t", gap);
    if (reason == std::string::npos)
      return Status(ErrorCode::kParseError, fmt::format("{}:{}: 'case_name  reason' expected", path, line_no));
    if (!expected.emplace(line.substr(0, gap), line.substr(reason)).second)
      return Status(ErrorCode::kParseError, fmt::format("{}:{}: '{}' listed twice", path, line_no, line.substr(0, gap)));
  }
  return expected;
}

Status write_expected(const std::string& path, const std::vector<Case>& cases, const std::vector<Outcome>& outcomes,
                      const std::string& command) {
  // A WRONG entry's reason is written by hand (what is wrong, and why it is listed): kept.
  std::map<std::string, std::string> kept;
  if (auto old = read_expected(path); old.ok()) kept = std::move(*old);
  std::erase_if(kept, [](const auto& entry) { return !entry.second.starts_with("WRONG"); });
  std::ofstream out(path);
  if (!out) return Status(ErrorCode::kIoError, fmt::format("cannot write '{}'", path));
  out << "# ONNX backend node cases carve does not pass, with the reason (tests/onnx/conformance).\n"
      << "# The test onnx/conformance/node_tests fails on any failure not listed here, on any wrong\n"
      << "# result not listed as WRONG, and on any listed case that now passes.\n"
      << "# Generated by: " << command << "\n";
  size_t width = 0;
  for (size_t i = 0; i < cases.size(); ++i)
    if (outcomes[i].verdict != Verdict::kPass) width = std::max(width, cases[i].name.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    if (outcomes[i].verdict == Verdict::kPass) continue;
    const auto old = kept.find(cases[i].name);
    const std::string reason = outcomes[i].verdict == Verdict::kWrong && old != kept.end()
                                   ? old->second
                                   : failure_reason(cases[i], outcomes[i]);
    out << fmt::format("{:<{}}  {}\n", cases[i].name, width, reason);
  }
  return out ? Status() : Status(ErrorCode::kIoError, fmt::format("writing '{}' failed", path));
}

Status write_doc(const std::string& path, const std::vector<Case>& cases, const std::vector<Outcome>& outcomes,
                 const std::string& command, const std::string& onnx_version, const std::string& note) {
  struct OpRow {
    int passed = 0, total = 0;
    std::map<std::string, int> reasons;
  };
  std::map<std::string, OpRow> ops;
  std::map<std::string, int> categories;  // reason up to its ':' (the op name left out)
  int passed = 0, wrong = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string op = cases[i].domain == "ai.onnx" ? cases[i].op : cases[i].domain + "." + cases[i].op;
    OpRow& row = ops[op];
    ++row.total;
    if (outcomes[i].verdict == Verdict::kPass) {
      ++row.passed, ++passed;
      continue;
    }
    wrong += outcomes[i].verdict == Verdict::kWrong;
    const std::string reason = failure_reason(cases[i], outcomes[i]);
    ++row.reasons[reason];
    ++categories[reason.substr(0, reason.find(':'))];
  }
  std::ofstream out(path);
  if (!out) return Status(ErrorCode::kIoError, fmt::format("cannot write '{}'", path));
  out << "# ONNX operator coverage\n\n"
      << "ONNX " << onnx_version << "'s backend node tests (`onnx.backend.test.case.node`, generated from\n"
      << "Debian's python3-onnx by `tests/onnx/conformance/generate.py`), each imported by carve's\n"
      << "ONNX importer, compiled in a CPU `Session` and run, then compared with ONNX's expected\n"
      << "outputs at ONNX's tolerances (rtol 1e-3, atol 1e-7; dtype and shape exactly). The CTest\n"
      << "test `onnx/conformance/node_tests` checks every case against\n"
      << "`tests/onnx/conformance/expected_failures.txt`.\n\n"
      << "Generated by:\n\n```sh\n" << command << "\n```\n\n"
      << fmt::format("**{} cases: {} pass, {} fail ({} of them a wrong result).**\n\n", cases.size(), passed,
                     cases.size() - static_cast<size_t>(passed), wrong)
      << (note.empty() ? "" : note + "\n\n")
      << "| failure reason | cases |\n|---|---:|\n";
  std::vector<std::pair<std::string, int>> sorted(categories.begin(), categories.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [category, count] : sorted) out << fmt::format("| {} | {} |\n", category, count);
  std::vector<std::pair<std::string, const OpRow*>> gaps;
  for (const auto& [op, row] : ops)
    if (row.passed < row.total) gaps.emplace_back(op, &row);
  std::stable_sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) {
    return a.second->total - a.second->passed > b.second->total - b.second->passed;
  });
  out << "\nThe 30 operators with the most failing cases: ";
  for (size_t i = 0; i < std::min<size_t>(30, gaps.size()); ++i)
    out << (i ? ", " : "") << gaps[i].first << " " << gaps[i].second->total - gaps[i].second->passed;
  out << ".\n";
  out << "\nPer operator (an `_expanded` case, the op's ONNX function body, counts for its op).\n"
      << "Status: supported (every case passes), partial, or missing (none passes), with the\n"
      << "most frequent failure reason.\n\n"
      << "| operator | passed / cases | status | main failure reason |\n|---|---:|---|---|\n";
  for (const auto& [op, row] : ops) {
    const char* status = row.passed == row.total ? "supported" : row.passed > 0 ? "partial" : "missing";
    std::string reason;
    int most = 0;
    for (const auto& [r, n] : row.reasons)
      if (n > most) most = n, reason = r;
    std::replace(reason.begin(), reason.end(), '|', '/');
    out << fmt::format("| {} | {} / {} | {} | {} |\n", op, row.passed, row.total, status, reason);
  }
  return out ? Status() : Status(ErrorCode::kIoError, fmt::format("writing '{}' failed", path));
}

}  // namespace carve::conformance
