#include <fmt/format.h>

#include "carve/ir/text.h"
#include "text_internal.h"

namespace carve::ir {
namespace {

using detail::is_ident_char;
using detail::is_ident_start;

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool is_ident(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s) {
    if (!is_ident_char(c)) return false;
  }
  return true;
}

std::string name(std::string_view s) { return is_ident(s) ? std::string(s) : quote(s); }

// A node line starts with the node name, so a name spelled like a keyword is quoted there.
std::string node_name(std::string_view s) { return detail::is_keyword(s) ? quote(s) : name(s); }

// fmt's shortest round-trip form, marked as a float when it looks like an int.
std::string format_double(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string format_type(const TensorType& t) {
  return fmt::format("{}[{}]", dtype_name(t.dtype), fmt::join(t.shape.dims(), ","));
}

std::string format_attr(const Attr& a) {
  switch (a.type()) {
    case AttrType::kInt:
      return fmt::format("{}", a.as_int());
    case AttrType::kFloat:
      return format_double(a.as_float());
    case AttrType::kString:
      return quote(a.as_string());
    case AttrType::kInts:
      return fmt::format("[{}]", fmt::join(a.as_ints(), ","));
    case AttrType::kFloats: {
      if (a.as_floats().empty()) return "f[]";
      std::string out = "[";
      for (size_t i = 0; i < a.as_floats().size(); ++i) {
        if (i > 0) out += ',';
        out += format_double(a.as_floats()[i]);
      }
      return out + "]";
    }
  }
  return "?";
}

std::string value_ref(const Graph& g, ValueId id) {
  return g.has_value(id) ? name(g.value(id).name) : fmt::format("\"<invalid value #{}>\"", id);
}

void print_node(const Graph& g, const Node& node, std::string& out) {
  std::vector<std::string> ins;
  for (ValueId v : node.inputs) ins.push_back(value_ref(g, v));
  out += fmt::format("  {} = {}({})", node_name(node.name), op_name(node.op), fmt::join(ins, ", "));
  if (!node.attrs.empty()) {
    std::vector<std::string> attrs;
    for (const auto& [key, value] : node.attrs) {
      attrs.push_back(fmt::format("{}={}", name(key), format_attr(value)));
    }
    out += fmt::format(" {{{}}}", fmt::join(attrs, ", "));
  }
  std::vector<std::string> results;
  for (ValueId v : node.outputs) {
    results.push_back(
        g.has_value(v) ? fmt::format("{}: {}", name(g.value(v).name), format_type(g.value(v).type))
                       : value_ref(g, v));
  }
  if (!results.empty()) out += fmt::format(" -> {}", fmt::join(results, ", "));
  out += '\n';
}

}  // namespace

std::string print(const Graph& g) {
  std::string out = fmt::format("graph {} {{\n", name(g.name));
  for (const Handle& h : g.handles) {
    out += fmt::format("  handle {}: {}\n", name(h.name), format_type(h.type));
  }
  // Walk values in id order; a node is printed when its first output comes up (with any
  // earlier, output-less nodes), so parsing renumbers everything identically.
  NodeId next_node = 0;
  auto print_nodes_through = [&](NodeId last) {
    for (; next_node <= last; ++next_node) print_node(g, g.node(next_node), out);
  };
  for (const Value& v : g.values) {
    switch (v.kind) {
      case ValueKind::kInput:
        out += fmt::format("  input {}: {}\n", name(v.name), format_type(v.type));
        break;
      case ValueKind::kConstant:
        out += fmt::format("  const {}: {}", name(v.name), format_type(v.type));
        if (v.data.has_value()) {
          out += " = hex\"";
          for (uint8_t byte : *v.data) out += fmt::format("{:02x}", byte);
          out += '"';
        }
        out += '\n';
        break;
      case ValueKind::kIntermediate:
        if (g.has_node(v.producer)) {
          print_nodes_through(v.producer);
        } else {
          out += fmt::format("  # undefined value {}: {}\n", name(v.name), format_type(v.type));
        }
        break;
    }
  }
  print_nodes_through(g.num_nodes() - 1);
  if (!g.outputs.empty()) {
    std::vector<std::string> outs;
    for (ValueId v : g.outputs) outs.push_back(value_ref(g, v));
    out += fmt::format("  output {}\n", fmt::join(outs, ", "));
  }
  out += "}\n";
  return out;
}

}  // namespace carve::ir
