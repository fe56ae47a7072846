// Recursive-descent parser for the text form (grammar in text.h). Works on the raw text
// with a byte cursor; line:column is computed only when an error is reported.
#include <fmt/format.h>

#include <charconv>
#include <map>

#include "carve/ir/text.h"
#include "text_internal.h"

namespace carve::ir {
namespace {

using detail::is_ident_char;
using detail::is_ident_start;

bool is_number_start(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.'; }
bool is_number_char(char c) { return is_ident_char(c) || c == '-' || c == '+'; }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Graph> run();

 private:
  // A use of a value name, resolved once every definition has been seen.
  struct Use {
    std::string name;
    size_t pos;
    NodeId node;  // kNoNode for a graph output
  };

  std::string location(size_t pos) const;  // "line:column", both 1-based
  Status error_at(size_t pos, std::string_view message) const;
  Status expected(std::string_view what) const;
  std::string found() const;

  void skip_ws();
  bool at_end() {
    skip_ws();
    return pos_ >= text_.size();
  }
  char peek() {
    skip_ws();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool eat(char c);
  Status expect(char c, std::string_view context);
  bool peek_word(std::string_view word);

  Result<std::string> ident(std::string_view what);
  Result<std::string> name(std::string_view what);
  Result<std::string> string_literal();
  Result<int64_t> integer(std::string_view what);
  Result<TensorType> type();
  Result<Attr> attr_value();
  Result<Attrs> attrs();

  Status define_value(Value value, size_t pos);
  Status declaration(ValueKind kind);
  Status handle_decl();
  Status output_list();
  Status node_line();
  Status resolve();

  std::string_view text_;
  size_t pos_ = 0;
  Graph graph_;
  std::map<std::string, std::pair<ValueId, size_t>, std::less<>> value_defs_;
  std::map<std::string, size_t, std::less<>> node_defs_;
  std::map<std::string, size_t, std::less<>> handle_defs_;
  std::vector<Use> uses_;
};

std::string Parser::location(size_t pos) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("{}:{}", line, col);
}

Status Parser::error_at(size_t pos, std::string_view message) const {
  return Status(ErrorCode::kParseError, fmt::format("{}: {}", location(pos), message));
}

std::string Parser::found() const {
  if (pos_ >= text_.size()) return "end of input";
  char c = text_[pos_];
  size_t end = pos_ + 1;
  if (is_ident_char(c) || is_number_start(c)) {
    while (end < text_.size() && is_number_char(text_[end]) && end - pos_ < 32) ++end;
  }
  return fmt::format("'{}'", text_.substr(pos_, end - pos_));
}

Status Parser::expected(std::string_view what) const {
  return error_at(pos_, fmt::format("expected {}, found {}", what, found()));
}

void Parser::skip_ws() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      return;
    }
  }
}

bool Parser::eat(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

Status Parser::expect(char c, std::string_view context) {
  if (eat(c)) return Status();
  return expected(fmt::format("'{}' {}", c, context));
}

// True (without consuming) when the next token is exactly `word` as an identifier.
bool Parser::peek_word(std::string_view word) {
  skip_ws();
  if (text_.substr(pos_, word.size()) != word) return false;
  size_t end = pos_ + word.size();
  return end >= text_.size() || !is_ident_char(text_[end]);
}

Result<std::string> Parser::ident(std::string_view what) {
  skip_ws();
  if (pos_ >= text_.size() || !is_ident_start(text_[pos_])) return expected(what);
  size_t start = pos_;
  while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
  return std::string(text_.substr(start, pos_ - start));
}

Result<std::string> Parser::name(std::string_view what) {
  if (peek() == '"') return string_literal();
  return ident(what);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> Parser::string_literal() {
  skip_ws();
  if (pos_ >= text_.size() || text_[pos_] != '"') return expected("a string");
  size_t start = pos_++;
  std::string out;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') {
      return error_at(start, "unterminated string (missing closing '\"')");
    }
    char c = text_[pos_++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = pos_ < text_.size() ? text_[pos_++] : '\0';
    if (e == '"' || e == '\\') {
      out += e;
    } else if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'x' && pos_ + 1 < text_.size() && hex_digit(text_[pos_]) >= 0 &&
               hex_digit(text_[pos_ + 1]) >= 0) {
      out += static_cast<char>(hex_digit(text_[pos_]) * 16 + hex_digit(text_[pos_ + 1]));
      pos_ += 2;
    } else {
      return error_at(pos_ - 2, "invalid escape in string (use \\\" \\\\ \\n \\t or \\xHH)");
    }
  }
}

Result<int64_t> Parser::integer(std::string_view what) {
  skip_ws();
  size_t start = pos_;
  if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
  size_t digits = pos_;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
  if (pos_ == digits) {
    pos_ = start;
    return expected(what);
  }
  int64_t v = 0;
  const char* first = text_.data() + start + (text_[start] == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(first, text_.data() + pos_, v);
  if (ec != std::errc() || ptr != text_.data() + pos_) {
    return error_at(start, fmt::format("integer '{}' does not fit in int64",
                                       text_.substr(start, pos_ - start)));
  }
  return v;
}

Result<TensorType> Parser::type() {
  skip_ws();
  size_t at = pos_;
  CARVE_ASSIGN_OR_RETURN(std::string dtype_text, ident("a dtype (f32, i64, ...)"));
  Result<DType> dtype = parse_dtype(dtype_text);
  if (!dtype.ok()) return error_at(at, dtype.status().message());
  CARVE_RETURN_IF_ERROR(expect('[', "to start the shape"));
  std::vector<int64_t> dims;
  if (!eat(']')) {
    do {
      CARVE_ASSIGN_OR_RETURN(int64_t d, integer("a dimension"));
      dims.push_back(d);
    } while (eat(','));
    CARVE_RETURN_IF_ERROR(expect(']', "after the dimensions"));
  }
  return TensorType{*dtype, Shape(std::move(dims))};
}

// One scalar: returns the int or the double, telling which through `is_float`.
struct Number {
  bool is_float;
  int64_t i;
  double f;
};

Result<Attr> Parser::attr_value() {
  char c = peek();
  if (c == '"') {
    CARVE_ASSIGN_OR_RETURN(std::string s, string_literal());
    return Attr(std::move(s));
  }
  if (peek_word("f")) {  // f[]: the empty float list
    ++pos_;
    CARVE_RETURN_IF_ERROR(expect('[', "after 'f' (empty float list f[])"));
    CARVE_RETURN_IF_ERROR(expect(']', "in empty float list f[]"));
    return Attr(std::vector<double>{});
  }
  auto number = [&]() -> Result<Number> {
    skip_ws();
    size_t start = pos_;
    if (pos_ >= text_.size() ||
        !(is_number_start(text_[pos_]) || peek_word("inf") || peek_word("nan"))) {
      return expected("a number");
    }
    while (pos_ < text_.size() && is_number_char(text_[pos_])) ++pos_;
    std::string_view tok = text_.substr(start, pos_ - start);
    std::string_view body = tok[0] == '+' ? tok.substr(1) : tok;
    bool is_int =
        !body.empty() &&
        body.find_first_not_of("0123456789", body[0] == '-' ? 1 : 0) == std::string_view::npos &&
        body != "-";
    Number n{!is_int, 0, 0.0};
    auto [ptr, ec] = is_int ? std::from_chars(body.data(), body.data() + body.size(), n.i)
                            : std::from_chars(body.data(), body.data() + body.size(), n.f);
    if (ec == std::errc::result_out_of_range) {
      return error_at(start, fmt::format("number '{}' is out of range", tok));
    }
    if (ec != std::errc() || ptr != body.data() + body.size()) {
      return error_at(start, fmt::format("invalid number '{}'", tok));
    }
    return n;
  };
  if (c == '[') {
    ++pos_;
    std::vector<Number> items;
    if (!eat(']')) {
      do {
        CARVE_ASSIGN_OR_RETURN(Number n, number());
        items.push_back(n);
      } while (eat(','));
      CARVE_RETURN_IF_ERROR(expect(']', "to close the list"));
    }
    bool any_float = false;
    for (const Number& n : items) any_float |= n.is_float;
    if (!any_float) {
      std::vector<int64_t> ints;
      for (const Number& n : items) ints.push_back(n.i);
      return Attr(std::move(ints));
    }
    std::vector<double> floats;  // a mixed list is a float list
    for (const Number& n : items) floats.push_back(n.is_float ? n.f : static_cast<double>(n.i));
    return Attr(std::move(floats));
  }
  CARVE_ASSIGN_OR_RETURN(Number n, number());
  return n.is_float ? Attr(n.f) : Attr(n.i);
}

Result<Attrs> Parser::attrs() {
  Attrs out;
  if (!eat('{')) return out;
  if (eat('}')) return out;
  do {
    skip_ws();
    size_t at = pos_;
    CARVE_ASSIGN_OR_RETURN(std::string key, name("an attribute name"));
    CARVE_RETURN_IF_ERROR(expect('=', fmt::format("after attribute name '{}'", key)));
    CARVE_ASSIGN_OR_RETURN(Attr value, attr_value());
    if (out.contains(key)) return error_at(at, fmt::format("attribute '{}' is given twice", key));
    out.emplace(std::move(key), std::move(value));
  } while (eat(','));
  CARVE_RETURN_IF_ERROR(expect('}', "to close the attributes"));
  return out;
}

Status Parser::define_value(Value value, size_t pos) {
  auto it = value_defs_.find(value.name);
  if (it != value_defs_.end()) {
    return error_at(pos, fmt::format("value '{}' is already defined at {}", value.name,
                                     location(it->second.second)));
  }
  value.id = graph_.num_values();
  value_defs_.emplace(value.name, std::make_pair(value.id, pos));
  graph_.values.push_back(std::move(value));
  return Status();
}

Status Parser::declaration(ValueKind kind) {
  skip_ws();
  size_t at = pos_;
  CARVE_ASSIGN_OR_RETURN(std::string n, name("a value name"));
  CARVE_RETURN_IF_ERROR(expect(':', fmt::format("after value name '{}'", n)));
  CARVE_ASSIGN_OR_RETURN(TensorType t, type());
  Value v{kNoValue, std::move(n), std::move(t), kind, kNoNode, std::nullopt};
  if (kind == ValueKind::kConstant && eat('=')) {
    skip_ws();
    if (!peek_word("hex")) return expected("hex\"...\" constant data");
    pos_ += 3;
    skip_ws();
    size_t data_at = pos_;
    CARVE_ASSIGN_OR_RETURN(std::string hex, string_literal());
    if (hex.size() % 2 != 0) {
      return error_at(data_at, "constant data must have an even number of hex digits");
    }
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < hex.size(); i += 2) {
      int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
      if (hi < 0 || lo < 0) {
        return error_at(data_at + 1 + i + (hi < 0 ? 0 : 1),
                        "constant data may only hold hex digits");
      }
      bytes.push_back(static_cast<uint8_t>(hi * 16 + lo));
    }
    v.data = std::move(bytes);
  }
  return define_value(std::move(v), at);
}

Status Parser::handle_decl() {
  skip_ws();
  size_t at = pos_;
  CARVE_ASSIGN_OR_RETURN(std::string n, name("a handle name"));
  CARVE_RETURN_IF_ERROR(expect(':', fmt::format("after handle name '{}'", n)));
  CARVE_ASSIGN_OR_RETURN(TensorType t, type());
  if (!handle_defs_.emplace(n, at).second) {
    return error_at(at, fmt::format("handle '{}' is already declared", n));
  }
  graph_.handles.push_back(Handle{std::move(n), std::move(t)});
  return Status();
}

Status Parser::output_list() {
  do {
    skip_ws();
    size_t at = pos_;
    CARVE_ASSIGN_OR_RETURN(std::string n, name("an output value name"));
    uses_.push_back(Use{std::move(n), at, kNoNode});
    graph_.outputs.push_back(kNoValue);
  } while (eat(','));
  return Status();
}

Status Parser::node_line() {
  skip_ws();
  size_t at = pos_;
  CARVE_ASSIGN_OR_RETURN(std::string node_name, name("'input', 'const', 'handle', 'output', "
                                                     "a node name or '}'"));
  if (!node_defs_.emplace(node_name, at).second) {
    return error_at(at, fmt::format("node '{}' is already defined", node_name));
  }
  CARVE_RETURN_IF_ERROR(expect('=', fmt::format("after node name '{}'", node_name)));
  skip_ws();
  size_t op_at = pos_;
  CARVE_ASSIGN_OR_RETURN(std::string op_text, ident("an op name"));
  Result<OpKind> op = op_from_name(op_text);
  if (!op.ok()) return error_at(op_at, op.status().message());
  NodeId id = graph_.num_nodes();
  Node node{id, std::move(node_name), *op, {}, {}, {}};
  CARVE_RETURN_IF_ERROR(expect('(', fmt::format("after op name '{}'", op_text)));
  if (!eat(')')) {
    do {
      skip_ws();
      size_t use_at = pos_;
      CARVE_ASSIGN_OR_RETURN(std::string in, name("an operand name"));
      uses_.push_back(Use{std::move(in), use_at, id});
      node.inputs.push_back(kNoValue);
    } while (eat(','));
    CARVE_RETURN_IF_ERROR(expect(')', "after operand list"));
  }
  CARVE_ASSIGN_OR_RETURN(node.attrs, attrs());
  skip_ws();
  if (text_.substr(pos_, 2) == "->") {
    pos_ += 2;
    do {
      skip_ws();
      size_t out_at = pos_;
      CARVE_ASSIGN_OR_RETURN(std::string out, name("a result name"));
      CARVE_RETURN_IF_ERROR(expect(':', fmt::format("after result name '{}'", out)));
      CARVE_ASSIGN_OR_RETURN(TensorType t, type());
      node.outputs.push_back(graph_.num_values());
      CARVE_RETURN_IF_ERROR(define_value(
          Value{kNoValue, std::move(out), std::move(t), ValueKind::kIntermediate, id, std::nullopt},
          out_at));
    } while (eat(','));
  }
  graph_.nodes.push_back(std::move(node));
  return Status();
}

// Fills the kNoValue placeholders of node inputs and outputs, in the order they were read.
Status Parser::resolve() {
  std::vector<size_t> next_input(graph_.nodes.size(), 0);
  size_t next_output = 0;
  for (const Use& use : uses_) {
    auto it = value_defs_.find(use.name);
    if (it == value_defs_.end()) {
      return error_at(use.pos, fmt::format("unknown value '{}'", use.name));
    }
    ValueId v = it->second.first;
    if (use.node == kNoNode) {
      graph_.outputs[next_output++] = v;
    } else {
      graph_.node(use.node).inputs[next_input[static_cast<size_t>(use.node)]++] = v;
    }
  }
  return Status();
}

Result<Graph> Parser::run() {
  skip_ws();
  if (!peek_word("graph")) return expected("'graph'");
  pos_ += 5;
  CARVE_ASSIGN_OR_RETURN(graph_.name, name("a graph name"));
  CARVE_RETURN_IF_ERROR(expect('{', "to open the graph body"));
  while (true) {
    if (at_end()) return expected("'}' to close the graph");
    if (eat('}')) break;
    if (peek_word("input")) {
      pos_ += 5;
      CARVE_RETURN_IF_ERROR(declaration(ValueKind::kInput));
    } else if (peek_word("const")) {
      pos_ += 5;
      CARVE_RETURN_IF_ERROR(declaration(ValueKind::kConstant));
    } else if (peek_word("handle")) {
      pos_ += 6;
      CARVE_RETURN_IF_ERROR(handle_decl());
    } else if (peek_word("output")) {
      pos_ += 6;
      CARVE_RETURN_IF_ERROR(output_list());
    } else {
      CARVE_RETURN_IF_ERROR(node_line());
    }
  }
  if (!at_end()) return expected("end of input after the graph");
  CARVE_RETURN_IF_ERROR(resolve());
  return std::move(graph_);
}

}  // namespace

Result<Graph> parse(std::string_view text) {
  return no_exceptions("parsing a text-format graph", [&] { return Parser(text).run(); });
}

}  // namespace carve::ir
