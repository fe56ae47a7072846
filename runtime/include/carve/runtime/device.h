// Devices: where memory lives and where a Session runs. The one device enum of carve.
//
// Contract
//  - DeviceType names a kind of memory and of execution: kCpu is host memory (buffers on
//    it are CPU-accessible); kCuda is CUDA device memory (buffers on it are
//    DeviceResident, the host cannot touch them; bytes cross through the allocator's
//    copy hooks or scheduled transfers).
//  - Device is one device of a type: {kCpu, 0} is the host, {kCuda, i} CUDA ordinal i.
//    Used by SessionOptions::device (where a Session runs), CompileOptions::placement
//    (per node) and Allocator::device_type()/device_id() (where its blocks live).
//  - Pure value types: no state, thread-safe, nothing here fails.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace carve::runtime {

enum class DeviceType : uint8_t { kCpu, kCuda };

// How a CUDA Session runs matmul/gemm/conv2d (SessionOptions::cuda_gemm).
enum class CudaGemm : uint8_t { kAuto, kGenerated, kCublasLt };

// "cpu", "cuda".
std::string_view device_type_name(DeviceType type);

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  std::string to_string() const;  // "cpu", "cuda:0"
};

}  // namespace carve::runtime
