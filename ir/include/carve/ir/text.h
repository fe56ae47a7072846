// Text form of a graph: print() and parse(), with parse(print(g)) == g.
//
// Ownership/lifetime: print returns a new string; parse copies what it needs out of the
// text, so the text may be freed afterwards.
// Thread-safety: pure functions.
// Errors: parse returns kParseError with "line:column: what was expected, found what"
// (1-based; columns count bytes). parse checks syntax, op and dtype names and that every
// name used is defined exactly once; it does not run shape inference, so call verify()
// on the result (the builder and verify() report type errors naming the node).
//
// Grammar (whitespace and newlines are free; '#' starts a comment to end of line):
//   graph   := 'graph' NAME '{' item* '}'
//   item    := 'input'  NAME ':' type
//            | 'const'  NAME ':' type [ '=' 'hex' STRING ]      # raw bytes, 2 hex digits each
//            | 'handle' NAME ':' type
//            | 'output' NAME (',' NAME)*                        # appends graph outputs
//            | NAME '=' OP '(' [NAME (',' NAME)*] ')' [attrs] [ '->' result (',' result)* ]
//   result  := NAME ':' type                                   # a value the node defines
//   type    := DTYPE '[' [INT (',' INT)*] ']'                  # f32[2,3]; f32[] is a scalar
//   attrs   := '{' [NAME '=' attr (',' NAME '=' attr)*] '}'      # printed sorted by name
//   attr    := INT | FLOAT | STRING | '[' INTs ']' | '[' FLOATs ']'
//            | 'f[]'                                            # the empty float list
//   NAME    := IDENT | STRING          IDENT := [A-Za-z_][A-Za-z0-9_.]*
//              (a node named like a keyword -- graph input const handle output -- is quoted)
//   FLOAT   := has '.', 'e' or is inf/nan ("1.0", "-2.5e-07", "-inf")
//   STRING  := '"' with escapes \" \\ \n \t \xHH '"'
// Values may be used before the line defining them (the verifier rejects cycles).
// Example:
//   graph main {
//     handle kv: f32[1,16,64]
//     input x: f32[2,3]
//     const w: f32[3,4] = hex"0000803f..."
//     matmul_0 = matmul(x, w) -> y: f32[2,4]
//     relu_1 = relu(y) -> z: f32[2,4]
//     sp = split(z) {axis=0, sizes=[1,1]} -> a: f32[1,4], b: f32[1,4]
//     output z, a
//   }
//
// print() writes declarations and nodes so that parsing assigns the same ids: values in
// id order, each node on the line where its first output's id falls. Graphs from
// GraphBuilder or parse always satisfy this; for a hand-made graph whose node outputs are
// not numbered in definition order, ids are renumbered (still structurally the same
// graph). Floats print in the shortest form that reads back to the same double.
#pragma once

#include <string>
#include <string_view>

#include "carve/ir/graph.h"
#include "carve/status.h"

namespace carve::ir {

std::string print(const Graph& graph);
Result<Graph> parse(std::string_view text);

}  // namespace carve::ir
