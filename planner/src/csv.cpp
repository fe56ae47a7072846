// MiniMalloc CSV reader/writer (see csv.h for the format and error contract).
#include "carve/file.h"
#include "carve/planner/csv.h"

#include "id_table.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace carve::planner {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (true) {
    size_t comma = line.find(',', pos);
    if (comma == std::string_view::npos) {
      fields.push_back(trim(line.substr(pos)));
      break;
    }
    fields.push_back(trim(line.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return fields;
}

std::optional<int64_t> parse_int(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

Status parse_error(size_t line, std::string msg) {
  return Status(ErrorCode::kParseError, fmt::format("line {}: {}", line, msg));
}

}  // namespace

Result<Problem> parse_minimalloc_csv(std::string_view text) {
  return no_exceptions("MiniMalloc CSV", [&]() -> Result<Problem> {
    Problem problem;
    size_t line_no = 0;
    size_t pos = 0;
    bool have_header = false;
    size_t n_columns = 0;
    int col_id = -1, col_lower = -1, col_upper = -1, col_size = -1, col_align = -1;
    std::vector<size_t> line_of;  // line of each buffer, for the duplicate message
    detail::IdTable ids(problem.buffers);

    while (pos <= text.size()) {
      size_t nl = text.find('\n', pos);
      std::string_view raw = text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos);
      pos = (nl == std::string_view::npos) ? text.size() + 1 : nl + 1;
      ++line_no;
      if (trim(raw).empty()) continue;
      std::vector<std::string_view> fields = split_commas(raw);

      if (!have_header) {
        have_header = true;
        n_columns = fields.size();
        for (size_t c = 0; c < fields.size(); ++c) {
          std::string_view name = fields[c];
          int* slot = nullptr;
          if (name == "id") slot = &col_id;
          else if (name == "lower") slot = &col_lower;
          else if (name == "upper") slot = &col_upper;
          else if (name == "size") slot = &col_size;
          else if (name == "alignment") slot = &col_align;
          if (slot == nullptr) continue;  // extra column: ignored
          if (*slot != -1) return parse_error(line_no, fmt::format("column '{}' appears twice", name));
          *slot = static_cast<int>(c);
        }
        std::string missing;
        auto need = [&](int col, const char* name) {
          if (col == -1) missing += (missing.empty() ? "" : ", ") + std::string(name);
        };
        need(col_id, "id");
        need(col_lower, "lower");
        need(col_upper, "upper");
        need(col_size, "size");
        if (!missing.empty()) {
          return parse_error(line_no, fmt::format("header lacks required column(s) {} (expected "
                                                  "id,lower,upper,size[,alignment])",
                                                  missing));
        }
        continue;
      }

      if (fields.size() != n_columns) {
        return parse_error(line_no, fmt::format("expected {} fields, found {}", n_columns, fields.size()));
      }
      BufferRequest b;
      b.id = std::string(fields[col_id]);
      if (b.id.empty()) return parse_error(line_no, "empty id");
      auto number = [&](int col, const char* name, int64_t& out) -> Status {
        std::optional<int64_t> v = parse_int(fields[col]);
        if (!v) {
          return parse_error(line_no, fmt::format("{} '{}' of buffer '{}' is not an integer", name,
                                                  fields[col], b.id));
        }
        out = *v;
        return Status();
      };
      CARVE_RETURN_IF_ERROR(number(col_lower, "lower", b.start));
      CARVE_RETURN_IF_ERROR(number(col_upper, "upper", b.end));
      CARVE_RETURN_IF_ERROR(number(col_size, "size", b.size));
      if (col_align != -1) CARVE_RETURN_IF_ERROR(number(col_align, "alignment", b.alignment));
      if (b.size < 0) {
        return parse_error(line_no, fmt::format("buffer '{}' has negative size {}", b.id, b.size));
      }
      if (b.start >= b.end) {
        return parse_error(line_no, fmt::format("buffer '{}' has lower {} >= upper {} (the interval "
                                                "[lower,upper) is half-open)",
                                                b.id, b.start, b.end));
      }
      if (b.alignment < 1) {
        return parse_error(line_no, fmt::format("buffer '{}' has alignment {} < 1", b.id, b.alignment));
      }
      problem.buffers.push_back(std::move(b));
      line_of.push_back(line_no);
      const size_t first = ids.insert(problem.buffers.size() - 1);
      if (first != detail::IdTable::kNone) {
        return parse_error(line_no, fmt::format("duplicate id '{}' (first on line {})",
                                                problem.buffers.back().id, line_of[first]));
      }
    }
    if (!have_header) {
      return parse_error(1, "empty input: expected a header id,lower,upper,size[,alignment]");
    }
    return problem;
  });
}

Result<Problem> read_minimalloc_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kIoError, fmt::format("cannot open '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status(ErrorCode::kIoError, fmt::format("error reading '{}'", path));
  Result<Problem> r = parse_minimalloc_csv(ss.str());
  if (!r.ok()) return r.status().with_context(path);
  return r;
}

Result<std::string> write_minimalloc_csv(const Problem& problem, const MemoryPlan& plan) {
  if (plan.offsets.size() != problem.buffers.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("plan has {} offsets for {} buffers", plan.offsets.size(),
                              problem.buffers.size()));
  }
  bool with_alignment = false;
  for (const BufferRequest& b : problem.buffers) {
    if (b.alignment != 1) with_alignment = true;
    if (b.id.empty() || b.id.find_first_of(",\"\r\n") != std::string::npos) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("buffer id '{}' cannot be written to CSV (empty, or holds a comma, "
                                "quote or line break)",
                                b.id));
    }
  }
  std::string out = with_alignment ? "id,lower,upper,size,alignment,offset\n" : "id,lower,upper,size,offset\n";
  out.reserve(out.size() + problem.buffers.size() * 40);
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const BufferRequest& b = problem.buffers[i];
    if (with_alignment) {
      fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{}\n", b.id, b.start, b.end, b.size,
                     b.alignment, plan.offsets[i]);
    } else {
      fmt::format_to(std::back_inserter(out), "{},{},{},{},{}\n", b.id, b.start, b.end, b.size,
                     plan.offsets[i]);
    }
  }
  return out;
}

Status write_minimalloc_csv_file(const std::string& path, const Problem& problem,
                                 const MemoryPlan& plan) {
  CARVE_ASSIGN_OR_RETURN(std::string text, write_minimalloc_csv(problem, plan));
  return write_file(path, text);
}

}  // namespace carve::planner
