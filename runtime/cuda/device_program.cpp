// Device program layout helpers (device_program.h).
#include "carve/runtime/cuda/device_program.h"

#include <fmt/format.h>

namespace carve::runtime {

Launch make_transfer(std::string name, LaunchKind kind, MemoryRef source, MemoryRef destination) {
  Launch l;
  l.name = std::move(name);
  l.kind = kind;
  l.operands = {source, destination};
  l.reads = {source};
  l.writes = {destination};
  return l;
}

namespace {

Result<int64_t> bytes_of(const Program& p, ir::ValueId v) { return p.graph.value(v).type.byte_size(); }

}  // namespace

Status add_device_transfers(Program& p, const std::vector<bool>& host_handle) {
  if (!p.on_device) return Status(ErrorCode::kInvalidArgument, "add_device_transfers: not a device program");
  if (host_handle.size() != p.handles.size())
    return Status(ErrorCode::kInvalidArgument, fmt::format("add_device_transfers: {} handle flags for {} handles",
                                                           host_handle.size(), p.handles.size()));
  std::vector<Launch> first, last;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    CARVE_ASSIGN_OR_RETURN(int64_t bytes, bytes_of(p, p.inputs[i]));
    const auto slot = static_cast<int32_t>(i);
    first.push_back(make_transfer(fmt::format("upload_input_{}", i), LaunchKind::kUpload,
                             {Region::kHostInput, slot, 0, bytes}, {Region::kInput, slot, 0, bytes}));
  }
  for (size_t h = 0; h < p.handles.size(); ++h) {
    if (!host_handle[h]) continue;
    const auto bytes = static_cast<int64_t>(p.handles[h]->byte_size());
    const auto slot = static_cast<int32_t>(h);
    first.push_back(make_transfer(fmt::format("upload_handle_{}", p.handles[h]->name()), LaunchKind::kUpload,
                             {Region::kHostHandle, slot, 0, bytes}, {Region::kHandle, slot, 0, bytes}));
    last.push_back(make_transfer(fmt::format("download_handle_{}", p.handles[h]->name()), LaunchKind::kDownload,
                            {Region::kHandle, slot, 0, bytes}, {Region::kHostHandle, slot, 0, bytes}));
  }
  std::vector<Launch> downloads;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (i < p.output_on_host.size() && p.output_on_host[i]) continue;  // written on the host already
    CARVE_ASSIGN_OR_RETURN(int64_t bytes, bytes_of(p, p.outputs[i]));
    const auto slot = static_cast<int32_t>(i);
    downloads.push_back(make_transfer(fmt::format("download_output_{}", i), LaunchKind::kDownload,
                                 {Region::kOutput, slot, 0, bytes}, {Region::kHostOutput, slot, 0, bytes}));
  }
  downloads.insert(downloads.end(), last.begin(), last.end());
  first.insert(first.end(), std::make_move_iterator(p.launches.begin()), std::make_move_iterator(p.launches.end()));
  first.insert(first.end(), downloads.begin(), downloads.end());
  p.launches = std::move(first);
  return Status();
}

std::vector<bool> device_kernels(const Program& program) {
  std::vector<bool> on_device(program.kernels.size(), false);
  for (const Launch& l : program.launches)
    if (l.kind == LaunchKind::kKernel && !l.on_host) on_device[static_cast<size_t>(l.kernel)] = true;
  return on_device;
}

std::vector<uint64_t> launch_addresses(const Program& program, const Launch& launch, const RegionBases& bases) {
  std::vector<uint64_t> out;
  out.reserve(launch.operands.size());
  for (const MemoryRef& r : launch.operands) out.push_back(reinterpret_cast<uintptr_t>(operand_address(program, bases, r)));
  return out;
}

std::vector<int32_t> changed_launches(const Program& program, const RegionBases& before, const RegionBases& after) {
  std::vector<int32_t> changed;
  for (size_t l = 0; l < program.launches.size(); ++l) {
    const Launch& launch = program.launches[l];
    if (is_transfer(launch)) continue;
    if (launch_addresses(program, launch, before) != launch_addresses(program, launch, after)) changed.push_back(static_cast<int32_t>(l));
  }
  return changed;
}

}  // namespace carve::runtime
