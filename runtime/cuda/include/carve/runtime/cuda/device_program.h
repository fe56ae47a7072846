// Device programs (the CUDA backend's side of Program): where a Session with
// SessionOptions::device = cuda puts memory and how it moves host bytes in and out.
// Pure logic, no CUDA types; the executor that runs a device program is internal
// (runtime/cuda/device_executor.*).
//
// Layout of a device program (Program::on_device):
//  - arena: ONE device allocation (materialize() over a CudaAllocator: DeviceResident
//    views by offset, each with its own BufferId); constants: uploaded once at compile;
//  - input/output regions: the caller's device pointers when run() gets DeviceResident
//    buffers (Borrowed, used in place), else device staging buffers owned by the program;
//  - handle region: a DeviceResident BufferHandle in place; a host BufferHandle is
//    mirrored in a device buffer (uploaded before, downloaded after every run);
//  - transfers are launches: first one upload per input (host_input i -> input i) and per
//    host handle, last one download per output and per host handle, so the hazard DAG
//    orders them like any other launch. A run skips the transfer of a device buffer.
//
// Mixed placement (CompileOptions::placement puts nodes on cpu in a cuda Session): their
// kernels are launches with on_host set, whose operands are host regions (arena ->
// host_arena at the same offsets, input -> host_input, output -> host_output, constant ->
// host_constant); wherever a launch reads bytes whose latest write is on the other side, a
// download (device -> host) or upload (host -> device) of exactly those bytes is inserted
// right before it, so the one hazard DAG orders writer -> copy -> reader (and the WAR/WAW
// edges of arena reuse on both sides) like any other launches. An output whose final bytes
// are written on the host is not downloaded (Program::output_on_host).
//
// Thread-safety: pure functions. Errors: kInvalidArgument for a malformed Program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carve/runtime/executor.h"
#include "carve/runtime/program.h"

namespace carve::runtime {

// Appends the transfers described above to a program built for the device
// (program.on_device; launches already bound). `host_handle[h]` says whether graph handle
// h is host memory (mirrored). Inputs are uploaded first, in input order, then handles;
// outputs downloaded last, then handles.
Status add_device_transfers(Program& program, const std::vector<bool>& host_handle);

// Mixed placement as above: `host_launch[l]` (per launch, before add_device_transfers) puts
// kernel launch l on the CPU. Handle ops may run on either side: a handle's value lives on
// the device (a host handle's mirror), a CPU-placed handle op reads and writes its host
// side (the host handle's own memory, or a staging copy for a DeviceResident handle) with
// the copies above, and bytes last written on the host are uploaded at the end of the run.
// kInvalidArgument for a wrong count or a flag on a copy.
Status place_on_host(Program& program, const std::vector<bool>& host_launch);

// Per Program kernel: whether the GPU runs it (a kernel launch not placed on the host
// uses it). The device executor compiles exactly these with NVRTC; kernels only host
// launches use get no module (`carve compile --dry-run` compiles the same set).
std::vector<bool> device_kernels(const Program& program);

// A transfer launch (kind upload or download) that reads `source` and writes `destination`.
Launch make_transfer(std::string name, LaunchKind kind, MemoryRef source, MemoryRef destination);

// Whether a launch moves bytes between host and device (upload/download).
inline bool is_transfer(const Launch& launch) {
  return launch.kind == LaunchKind::kUpload || launch.kind == LaunchKind::kDownload;
}

// The device address of every operand of `launch` for `bases` (the kernel's parameters).
std::vector<uint64_t> launch_addresses(const Program& program, const Launch& launch, const RegionBases& bases);
// Launches (indices) whose addresses differ between two bindings: the kernel nodes a
// replayed CUDA graph must update in place. Transfers are not in the graph: skipped.
std::vector<int32_t> changed_launches(const Program& program, const RegionBases& before, const RegionBases& after);

}  // namespace carve::runtime
