// ONNX's backend node tests through carve: the cases generate.py writes, one verdict each,
// the expected-failures list they are checked against, and the coverage document.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "carve/status.h"

namespace carve::conformance {

// One line of generate.py's manifest.tsv.
struct Case {
  std::string name, op, domain;
  int64_t opset = 0;
  std::string kind;     // "tensor", or why the data was not written ("sequence type", ...)
  std::string compare;  // "allclose" or "random"
  std::vector<std::string> inputs, outputs;
};

Result<std::vector<Case>> read_manifest(const std::string& dir);

enum class Verdict {
  kPass,
  kError,   // carve refused the case with a Status (unsupported op, dtype, ...)
  kWrong,   // it ran and a result differs: a bug
  kNotRun,  // data carve cannot take (sequence, optional, string types)
};
std::string_view verdict_name(Verdict verdict);

struct Outcome {
  Verdict verdict = Verdict::kPass;
  std::string detail;  // the Status, the mismatch, or the kind
};

// The list's category for a failed case: "unsupported op: Resize", "training-only", ...
std::string failure_reason(const Case& c, const Outcome& outcome);

// expected_failures.txt: "case_name  reason" per line, '#' comments.
Result<std::map<std::string, std::string>> read_expected(const std::string& path);
// Rewrites `path` with every failing case; a WRONG entry keeps the reason `path` gave it.
Status write_expected(const std::string& path, const std::vector<Case>& cases, const std::vector<Outcome>& outcomes,
                      const std::string& command);
Status write_doc(const std::string& path, const std::vector<Case>& cases, const std::vector<Outcome>& outcomes,
                 const std::string& command, const std::string& onnx_version, const std::string& note);

}  // namespace carve::conformance
