// Device names (device.h).
#include "carve/runtime/device.h"

#include <fmt/format.h>

namespace carve::runtime {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return "cuda";
  }
  return "unknown";
}

std::string Device::to_string() const {
  return type == DeviceType::kCpu ? std::string("cpu") : fmt::format("{}:{}", device_type_name(type), index);
}

}  // namespace carve::runtime
