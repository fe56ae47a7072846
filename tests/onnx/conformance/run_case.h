// One node case through carve's importer and a Session.
#pragma once

#include <string>

#include "carve/runtime/session.h"
#include "conformance.h"

namespace carve::conformance {

// Imports DIR/<case>/model.onnx (input shapes from in<i>.npy), compiles it in `session`,
// runs it (cancelled after `seconds`) and compares every output with out<i>.npy: dtype
// and shape exactly, floats with numpy's allclose at ONNX's tolerances (rtol 1e-3, atol
// 1e-7, NaN equal to NaN), integers and bools exactly, random ops by value range only.
Outcome run_case(const Case& c, const std::string& dir, runtime::Session& session, double seconds);

}  // namespace carve::conformance
