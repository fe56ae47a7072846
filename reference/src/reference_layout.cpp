// Reference kernels: data movement (concat, split, slice, transpose, pad, gather,
// gather_elements), views and the state ops. All of them move whole elements as bytes, so
// they work for every dtype.
#include <algorithm>

#include <fmt/format.h>

#include "reference_internal.h"

namespace carve::reference::ref {
namespace {

using ir::OpKind;

const uint8_t* bytes_of(const void* p) { return static_cast<const uint8_t*>(p); }
uint8_t* bytes_of(void* p) { return static_cast<uint8_t*>(p); }

size_t element_size(const ir::TensorType& t) { return static_cast<size_t>(ir::dtype_size(t.dtype)); }
size_t byte_count(const ir::TensorType& t) { return static_cast<size_t>(count(t.shape)) * element_size(t); }

Status concat(const Ctx& ctx) {
  const ir::TensorType& ty = ctx.out_type(0);
  const int rank = ty.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", 0), rank);
  const int64_t outer = dims_product(ty.shape, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(dims_product(ty.shape, axis + 1, rank)) * element_size(ty);
  uint8_t* out = bytes_of(ctx.out[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < ctx.in.size(); ++i) {
      const size_t chunk = static_cast<size_t>(ctx.in_type(i).shape[axis]) * inner_bytes;
      copy_bytes(out, bytes_of(ctx.in[i]) + static_cast<size_t>(o) * chunk, chunk);
      out += chunk;
    }
  }
  return Status();
}

Status split(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const int rank = tx.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", 0), rank);
  const int64_t outer = dims_product(tx.shape, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(dims_product(tx.shape, axis + 1, rank)) * element_size(tx);
  const uint8_t* in = bytes_of(ctx.in[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < ctx.out.size(); ++i) {
      const size_t chunk = static_cast<size_t>(ctx.out_type(i).shape[axis]) * inner_bytes;
      copy_bytes(bytes_of(ctx.out[i]) + static_cast<size_t>(o) * chunk, in, chunk);
      in += chunk;
    }
  }
  return Status();
}

// Copies every element of the output from the input at base + sum(index[d] * strides[d]).
void gather_strided(const Ctx& ctx, int64_t base, std::vector<int64_t> strides) {
  const ir::TensorType& ty = ctx.out_type(0);
  const size_t size = element_size(ty);
  const int64_t n = count(ty.shape);
  // A dim of extent 1 never steps; zeroing its stride keeps huge steps from overflowing.
  for (int d = 0; d < ty.shape.rank(); ++d) {
    if (ty.shape[d] == 1) strides[static_cast<size_t>(d)] = 0;
  }
  IndexWalker walk(ty.shape, {std::move(strides)});
  for (int64_t i = 0; i < n; ++i, walk.next()) {
    std::memcpy(bytes_of(ctx.out[0]) + static_cast<size_t>(i) * size,
                bytes_of(ctx.in[0]) + static_cast<size_t>(base + walk.offset(0)) * size, size);
  }
}

Status slice(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const ir::TensorType& ty = ctx.out_type(0);
  if (count(ty.shape) == 0) return Status();
  const int rank = tx.shape.rank();
  const std::vector<int64_t> starts = ctx.attr_ints("starts", {});
  const std::vector<int64_t> ends = ctx.attr_ints("ends", {});
  std::vector<int64_t> axes(starts.size());
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  axes = ctx.attr_ints("axes", axes);
  const std::vector<int64_t> steps = ctx.attr_ints("steps", std::vector<int64_t>(starts.size(), 1));
  // Per dim: first index and step (the whole dim, step 1, when not sliced). Clamping as
  // in shape inference (ONNX Slice).
  std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const auto a = static_cast<size_t>(normalize_axis(axes[i], rank));
    const int64_t d = tx.shape[static_cast<int>(a)];
    int64_t s = starts[i];
    if (s < 0) s += d;
    s = steps[i] > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
    first[a] = s;
    step[a] = steps[i];
  }
  const std::vector<int64_t> in_strides = row_major_strides(tx.shape);
  int64_t base = 0;
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
    base += first[d] * in_strides[d];
    // Only used when the output dim is > 1, so |step| < the input dim and this fits.
    if (ty.shape[static_cast<int>(d)] > 1) strides[d] = step[d] * in_strides[d];
  }
  gather_strided(ctx, base, std::move(strides));
  return Status();
}

Status transpose(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const int rank = tx.shape.rank();
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) reversed[static_cast<size_t>(i)] = rank - 1 - i;
  const std::vector<int64_t> perm = ctx.attr_ints("perm", reversed);
  const std::vector<int64_t> in_strides = row_major_strides(tx.shape);
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (size_t i = 0; i < strides.size(); ++i) strides[i] = in_strides[static_cast<size_t>(perm[i])];
  gather_strided(ctx, 0, std::move(strides));
  return Status();
}

Status pad(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const ir::TensorType& ty = ctx.out_type(0);
  const size_t size = element_size(ty);
  const std::vector<int64_t> pads = ctx.attr_ints("pads", {});
  const std::vector<uint8_t> fill = encode_double(ty.dtype, ctx.attr_float("value", 0.0));
  uint8_t* out = bytes_of(ctx.out[0]);
  const int64_t n_out = count(ty.shape);
  for (int64_t i = 0; i < n_out; ++i) std::memcpy(out + static_cast<size_t>(i) * size, fill.data(), size);
  const std::vector<int64_t> out_strides = row_major_strides(ty.shape);
  int64_t base = 0;
  for (size_t d = 0; d < out_strides.size(); ++d) base += pads[d] * out_strides[d];
  const int64_t n_in = count(tx.shape);
  IndexWalker walk(tx.shape, {out_strides});
  for (int64_t i = 0; i < n_in; ++i, walk.next()) {
    std::memcpy(out + static_cast<size_t>(base + walk.offset(0)) * size,
                bytes_of(ctx.in[0]) + static_cast<size_t>(i) * size, size);
  }
  return Status();
}

// Index `raw` (position i of the indices) along an axis of `extent`, a negative one
// counted from the end; kOutOfBounds naming it when outside.
Result<int64_t> checked_index(const Ctx& ctx, int64_t raw, size_t i, int64_t extent, int axis, const ir::Shape& shape) {
  const int64_t idx = raw < 0 ? raw + extent : raw;
  if (idx >= 0 && idx < extent) return idx;
  return ctx.error(ErrorCode::kOutOfBounds,
                   fmt::format("index {} (at flat position {} of indices) is out of range [{}, {}) for axis {} of {}", raw,
                               i, -extent, extent, axis, shape.to_string()));
}

Status gather(const Ctx& ctx) {
  const ir::TensorType& data = ctx.in_type(0);
  const ir::TensorType& ti = ctx.in_type(1);
  const int rank = data.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", 0), rank);
  const int64_t outer = dims_product(data.shape, 0, axis);
  const int64_t extent = data.shape[axis];
  const size_t inner_bytes = static_cast<size_t>(dims_product(data.shape, axis + 1, rank)) * element_size(data);
  std::vector<int64_t> indices = load_i64(ti.dtype, ctx.in[1], count(ti.shape));
  // Check every index before writing anything.
  for (size_t i = 0; i < indices.size(); ++i) {
    CARVE_ASSIGN_OR_RETURN(indices[i], checked_index(ctx, indices[i], i, extent, axis, data.shape));
  }
  uint8_t* out = bytes_of(ctx.out[0]);
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* slab = bytes_of(ctx.in[0]) + static_cast<size_t>(o * extent) * inner_bytes;
    for (int64_t idx : indices) {
      copy_bytes(out, slab + static_cast<size_t>(idx) * inner_bytes, inner_bytes);
      out += inner_bytes;
    }
  }
  return Status();
}

// out[i] = data[i with i[axis] = indices[i]]; like gather, every index is checked (after
// wrapping a negative one) before anything is written.
Status gather_elements(const Ctx& ctx) {
  const ir::TensorType& data = ctx.in_type(0);
  const ir::TensorType& ti = ctx.in_type(1);
  const int rank = data.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", 0), rank);
  const int64_t extent = data.shape[axis];
  const size_t size = element_size(data);
  std::vector<int64_t> strides = row_major_strides(data.shape);
  const int64_t axis_stride = strides[static_cast<size_t>(axis)];
  strides[static_cast<size_t>(axis)] = 0;  // the axis coordinate comes from the index
  const std::vector<int64_t> indices = load_i64(ti.dtype, ctx.in[1], count(ti.shape));
  std::vector<int64_t> src(indices.size());
  IndexWalker walk(ti.shape, {strides});
  for (size_t i = 0; i < indices.size(); ++i, walk.next()) {
    CARVE_ASSIGN_OR_RETURN(const int64_t idx, checked_index(ctx, indices[i], i, extent, axis, data.shape));
    src[i] = walk.offset(0) + idx * axis_stride;
  }
  for (size_t i = 0; i < src.size(); ++i) {
    std::memcpy(bytes_of(ctx.out[0]) + i * size, bytes_of(ctx.in[0]) + static_cast<size_t>(src[i]) * size, size);
  }
  return Status();
}

}  // namespace

Status run_layout(const Ctx& ctx) {
  switch (ctx.node.op) {
    case OpKind::kConcat: return concat(ctx);
    case OpKind::kSplit: return split(ctx);
    case OpKind::kSlice: return slice(ctx);
    case OpKind::kTranspose: return transpose(ctx);
    case OpKind::kPad: return pad(ctx);
    case OpKind::kGather: return gather(ctx);
    case OpKind::kGatherElements: return gather_elements(ctx);
    case OpKind::kGatherNd:
    case OpKind::kScatterNd:
    case OpKind::kTopK: return run_index(ctx);
    case OpKind::kNonZero:
    case OpKind::kUnique:
    case OpKind::kNonMaxSuppression: return run_dynamic(ctx);
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity:
      // Views: same bytes, new shape. memmove, so an aliased input/output is fine.
      if (ctx.out[0] != ctx.in[0]) copy_bytes(ctx.out[0], ctx.in[0], byte_count(ctx.in_type(0)));
      return Status();
    default: break;
  }
  return ctx.error(ErrorCode::kInternal, "not a layout op");
}

Status run_state(const Ctx& ctx) {
  const std::string name = ctx.attr_string("handle");
  const ir::Handle* decl = ctx.graph.find_handle(name);
  if (decl == nullptr) {
    return ctx.error(ErrorCode::kNotFound, fmt::format("handle '{}' is not declared", name));
  }
  auto it = ctx.handles->find(name);
  if (it == ctx.handles->end()) {
    return ctx.error(ErrorCode::kNotFound, fmt::format("handle '{}' has no state", name));
  }
  HostTensor& state = it->second;
  const size_t want = byte_count(decl->type);
  if (state.type != decl->type || state.bytes.size() != want) {
    return ctx.error(ErrorCode::kInvalidArgument,
                     fmt::format("handle '{}' is declared {} but its state is {} ({} bytes)",
                                 name, decl->type.to_string(), state.type.to_string(),
                                 state.bytes.size()));
  }
  switch (ctx.node.op) {
    case OpKind::kReadHandle:
      copy_bytes(ctx.out[0], state.bytes.data(), want);
      return Status();
    case OpKind::kWriteHandle:
      copy_bytes(state.bytes.data(), ctx.in[0], want);
      return Status();
    case OpKind::kWriteHandleAt: {
      const ir::TensorType& tv = ctx.in_type(0);
      const int rank = decl->type.shape.rank();
      const int axis = normalize_axis(ctx.attr_int("axis", 0), rank);
      int64_t pos = 0;
      std::memcpy(&pos, ctx.in[1], sizeof(pos));
      const int64_t len = tv.shape[axis];
      const int64_t extent = decl->type.shape[axis];
      if (pos < 0 || pos > extent - len) {  // pos + len > extent, without overflow
        return ctx.error(ErrorCode::kOutOfBounds,
                         fmt::format("pos {} is out of range: writing {} along axis {} of "
                                     "handle '{}' {} needs 0 <= pos <= {}",
                                     pos, tv.shape.to_string(), axis, name,
                                     decl->type.to_string(), extent - len));
      }
      const int64_t outer = dims_product(tv.shape, 0, axis);
      const size_t inner_bytes =
          static_cast<size_t>(dims_product(tv.shape, axis + 1, rank)) * element_size(tv);
      const size_t chunk = static_cast<size_t>(len) * inner_bytes;
      for (int64_t o = 0; o < outer; ++o) {
        copy_bytes(state.bytes.data() + static_cast<size_t>(o * extent + pos) * inner_bytes,
                   bytes_of(ctx.in[0]) + static_cast<size_t>(o) * chunk, chunk);
      }
      return Status();
    }
    default: break;
  }
  return ctx.error(ErrorCode::kInternal, "not a state op");
}

}  // namespace carve::reference::ref
