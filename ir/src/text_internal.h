// Lexical rules shared by the printer and the parser; not part of the public API.
#pragma once

#include <string_view>

namespace carve::ir::detail {

inline bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

// Words that begin an item line; a node name spelled like one is printed quoted.
inline bool is_keyword(std::string_view s) {
  return s == "graph" || s == "input" || s == "const" || s == "handle" || s == "output";
}

}  // namespace carve::ir::detail
