// Mixed CPU/GPU placement of a device program (device_program.h: place_on_host).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "carve/runtime/cuda/device_program.h"

namespace carve::runtime {
namespace {

constexpr int64_t kAll = std::numeric_limits<int64_t>::max();

// Sorted disjoint byte intervals [begin, end).
class Ranges {
 public:
  void add(int64_t b, int64_t e) {
    subtract(b, e);
    spans_.emplace_back(b, e);
    std::sort(spans_.begin(), spans_.end());
  }
  void subtract(int64_t b, int64_t e) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (auto [sb, se] : spans_) {
      if (se <= b || e <= sb) {
        out.emplace_back(sb, se);
        continue;
      }
      if (sb < b) out.emplace_back(sb, b);
      if (e < se) out.emplace_back(e, se);
    }
    spans_ = std::move(out);
  }
  // Parts of [b, e) inside this set.
  std::vector<std::pair<int64_t, int64_t>> intersect(int64_t b, int64_t e) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (auto [sb, se] : spans_)
      if (std::max(b, sb) < std::min(e, se)) out.emplace_back(std::max(b, sb), std::min(e, se));
    return out;
  }
  // Parts of [b, e) outside this set.
  std::vector<std::pair<int64_t, int64_t>> missing(int64_t b, int64_t e) const {
    Ranges r;
    r.spans_ = {{b, e}};
    for (auto [sb, se] : spans_) r.subtract(sb, se);
    return r.spans_;
  }

 private:
  std::vector<std::pair<int64_t, int64_t>> spans_;
};

Region host_region(Region r) {
  switch (r) {
    case Region::kArena: return Region::kHostArena;
    case Region::kInput: return Region::kHostInput;
    case Region::kOutput: return Region::kHostOutput;
    case Region::kConstant: return Region::kHostConstant;
    case Region::kHandle: return Region::kHostHandle;
    default: return r;
  }
}

// Where the valid bytes of every (device region, slot) are: [0] device, [1] host.
struct Residency {
  std::map<std::pair<Region, int32_t>, Ranges> valid[2];

  explicit Residency(const Program& p) {
    // Inputs and constants are valid on both sides (uploaded / the caller's host memory).
    for (size_t i = 0; i < p.inputs.size(); ++i)
      for (auto& side : valid) side[{Region::kInput, static_cast<int32_t>(i)}].add(0, kAll);
    for (size_t c = 0; c < p.constants.size(); ++c)
      for (auto& side : valid) side[{Region::kConstant, static_cast<int32_t>(c)}].add(0, kAll);
    // Handles start on the device (a host handle's mirror is uploaded first, so its host
    // memory is valid too); a device handle's host side is a staging copy, empty at first.
    for (size_t h = 0; h < p.handles.size(); ++h) {
      valid[0][{Region::kHandle, static_cast<int32_t>(h)}].add(0, kAll);
      if (p.handles[h]->memory().is_cpu_accessible()) valid[1][{Region::kHandle, static_cast<int32_t>(h)}].add(0, kAll);
    }
  }
  Ranges& at(int side, const MemoryRef& r) { return valid[side][{r.region, r.slot}]; }
};

Launch transfer_launch(const Launch& reader, const MemoryRef& device_ref, bool to_host) {
  MemoryRef host_ref = device_ref;
  host_ref.region = host_region(device_ref.region);
  std::string name = fmt::format("{}_{}_{}+{}_for_{}", to_host ? "download" : "upload",
                                 region_name(device_ref.region), device_ref.slot, device_ref.offset, reader.name);
  if (to_host) return make_transfer(std::move(name), LaunchKind::kDownload, device_ref, host_ref);
  return make_transfer(std::move(name), LaunchKind::kUpload, host_ref, device_ref);
}

}  // namespace

Status place_on_host(Program& p, const std::vector<bool>& host_launch) {
  if (!p.on_device) return Status(ErrorCode::kInvalidArgument, "place_on_host: not a device program");
  if (host_launch.size() != p.launches.size())
    return Status(ErrorCode::kInvalidArgument, fmt::format("place_on_host: {} flags for {} launches",
                                                           host_launch.size(), p.launches.size()));
  for (size_t l = 0; l < p.launches.size(); ++l) {
    if (!host_launch[l]) continue;
    const Launch& launch = p.launches[l];
    if (launch.kind != LaunchKind::kKernel)
      return Status(ErrorCode::kInvalidArgument, fmt::format("place_on_host: launch {} '{}' is a {}, not a kernel",
                                                             l, launch.name, launch_kind_name(launch.kind)));
  }
  Residency res(p);
  std::vector<Launch> out;
  for (size_t l = 0; l < p.launches.size(); ++l) {
    Launch launch = std::move(p.launches[l]);
    const int side = host_launch[l] ? 1 : 0;
    for (const MemoryRef& r : launch.reads) {
      // Bytes this side lacks but the other side holds: copy exactly those, before the reader.
      for (auto [b, e] : res.at(side, r).missing(r.offset, r.offset + r.bytes))
        for (auto [cb, ce] : res.at(1 - side, r).intersect(b, e)) {
          MemoryRef part = r;
          part.offset = cb;
          part.bytes = ce - cb;
          out.push_back(transfer_launch(launch, part, /*to_host=*/side == 1));
          res.at(side, r).add(cb, ce);
        }
    }
    for (const MemoryRef& w : launch.writes) {
      res.at(side, w).add(w.offset, w.offset + w.bytes);
      res.at(1 - side, w).subtract(w.offset, w.offset + w.bytes);
    }
    if (side == 1) {
      launch.on_host = true;
      for (auto* refs : {&launch.operands, &launch.reads, &launch.writes})
        for (MemoryRef& r : *refs) r.region = host_region(r.region);
    }
    out.push_back(std::move(launch));
  }
  // A handle's value lives on the device between runs (a host handle's is downloaded from
  // there at the end): bytes last written on the host go back up.
  for (size_t h = 0; h < p.handles.size(); ++h) {
    const auto bytes = static_cast<int64_t>(p.handles[h]->byte_size());
    const MemoryRef whole{Region::kHandle, static_cast<int32_t>(h), 0, bytes};
    for (auto [b, e] : res.at(0, whole).missing(0, bytes))
      for (auto [cb, ce] : res.at(1, whole).intersect(b, e)) {
        MemoryRef part = whole;
        part.offset = cb;
        part.bytes = ce - cb;
        Launch end;
        end.name = fmt::format("end_of_run_{}", p.handles[h]->name());
        out.push_back(transfer_launch(end, part, /*to_host=*/false));
        res.at(0, whole).add(cb, ce);
      }
  }
  p.launches = std::move(out);
  p.output_on_host.assign(p.outputs.size(), false);
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const MemoryRef whole{Region::kOutput, static_cast<int32_t>(i), 0, 1};
    p.output_on_host[i] = res.at(0, whole).intersect(0, kAll).empty() && !res.at(1, whole).intersect(0, kAll).empty();
  }
  return Status();
}

}  // namespace carve::runtime
