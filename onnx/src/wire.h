// Parsing a serialized ModelProto without copying its weights. Protobuf copies every
// bytes field it parses, and the main graph's initializers' raw_data is nearly all of a
// model file: parse_leaving_raw_data parses everything else with protobuf and leaves each
// of those raw_data fields where it lies in the serialized bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "context.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace carve::onnx::detail {

// Parses `bytes` into `model` (which must be empty) with the raw_data field of each
// initializer of the main graph left out; raw[i] gets model.graph().initializer(i)'s,
// a span of `bytes`. False when the bytes are not a well-formed protobuf message
// (`model` is then unspecified): the caller parses them whole for protobuf's verdict.
bool parse_leaving_raw_data(std::span<const uint8_t> bytes, ::onnx::ModelProto& model, std::vector<RawData>& raw);

// Drops the pages that lie wholly inside `bytes` from this process's memory. Only for
// bytes of a read-only private file mapping whose contents are not read again: the
// pages stay in the page cache, and a later read would fault them back in.
void drop_mapped_pages(std::span<const uint8_t> bytes);

}  // namespace carve::onnx::detail
