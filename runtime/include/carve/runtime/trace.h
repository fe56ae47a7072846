// Execution trace of a parallel run as Chrome / Perfetto trace-event JSON
// (load in ui.perfetto.dev or chrome://tracing).
//
// {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {schedule stats}}: one
// "X" (complete) event per task, named after its launch, on pid 1 with one tid per
// worker thread (tid = arena slot + 1), ts/dur in microseconds from the run's start;
// args: task, launch, chunk, tiles [begin, end), reads/writes (each {storage
// "region:slot", region, slot, begin, end, buffer}) and storages (the distinct storage
// ids touched). "M" metadata events name the process and each worker thread.
// Needs RunRecord::timings: run with ParallelRunOptions::record_trace (or check_hazards).
// Thread-safety: pure functions; write_trace_json writes one file.
#pragma once

#include <string>

#include "carve/runtime/program.h"
#include "carve/runtime/schedule.h"
#include "carve/status.h"

namespace carve::runtime {

// The JSON text. kInvalidArgument when `record` has no timings or they do not match the
// schedule.
Result<std::string> trace_json(const Program& program, const Schedule& schedule, const RunRecord& record);
// trace_json written to `path` (kIoError when it cannot be written).
Status write_trace_json(const std::string& path, const Program& program, const Schedule& schedule,
                        const RunRecord& record);

}  // namespace carve::runtime
