// emit_group: dispatch a KernelGroup to its emitter family; operand_ptr; and the shared
// helpers of ew_helpers.h (element loads/stores, 16-bit float conversions, loops, tiles,
// broadcast index maps).
#include <llvm/IR/Intrinsics.h>

#include <fmt/format.h>

#include <algorithm>

#include "emit.h"
#include "ew_helpers.h"

namespace carve::jit::detail {

llvm::Value* operand_ptr(EmitContext& ec, ir::ValueId v) {
  for (size_t i = 0; i < ec.group.operands.size() && i < ec.operand_ptrs.size(); ++i) {
    if (ec.group.operands[i].value == v) return ec.operand_ptrs[i];
  }
  return nullptr;
}

Status emit_group(EmitContext& ec) {
  const KernelGroup& group = ec.group;
  if (group.nodes.empty()) return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}' has no nodes", group.name));
  for (ir::NodeId id : group.nodes) {
    if (!ec.graph.has_node(id)) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}' names node id {}, which the graph lacks", group.name, id));
    }
  }
  const ir::Node& anchor = ec.graph.node(group.nodes.front());
  if (ir::is_elementwise(anchor.op)) return emit_elementwise_group(ec);

  bool epilogue_anchor = anchor.op == ir::OpKind::kMatmul || anchor.op == ir::OpKind::kGemm ||
                         anchor.op == ir::OpKind::kConv2d;
  if (group.nodes.size() > 1) {
    if (!epilogue_anchor) {
      return Status(ErrorCode::kUnsupported,
                    fmt::format("group '{}': {} cannot take fused nodes", group.name, ir::describe_node(ec.graph, anchor.id)));
    }
    for (size_t i = 1; i < group.nodes.size(); ++i) {
      const ir::Node& n = ec.graph.node(group.nodes[i]);
      if (!ir::is_elementwise(n.op) || n.outputs.size() != 1) {
        return Status(ErrorCode::kUnsupported,
                      fmt::format("group '{}': fused {} is not elementwise", group.name,
                                  ir::describe_node(ec.graph, group.nodes[i])));
      }
      // every epilogue input is produced in the group or is an operand
      for (ir::ValueId v : n.inputs) {
        bool produced = false;
        for (size_t j = 0; j < i; ++j) {
          for (ir::ValueId o : ec.graph.node(group.nodes[j]).outputs) produced = produced || o == v;
        }
        if (!produced && !operand_ptr(ec, v)) {
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("group '{}': {} reads {}, which is not an operand", group.name,
                                    ir::describe_node(ec.graph, n.id), ir::describe_value(ec.graph, v)));
        }
      }
    }
  }
  Epilogue epilogue = group.nodes.size() > 1 ? make_epilogue(ec) : Epilogue();
  switch (anchor.op) {
    case ir::OpKind::kMatmul:
    case ir::OpKind::kGemm:
      return emit_matmul(ec, anchor, epilogue);
    case ir::OpKind::kConv2d:
      return emit_conv(ec, anchor, epilogue);
    case ir::OpKind::kMaxPool:
    case ir::OpKind::kAvgPool:
      return emit_pool(ec, anchor);
    case ir::OpKind::kReduceSum:
    case ir::OpKind::kReduceMean:
    case ir::OpKind::kReduceMax:
    case ir::OpKind::kSoftmax:
    case ir::OpKind::kLayerNorm:
    case ir::OpKind::kGlobalAvgPool:
    case ir::OpKind::kBatchNorm:
      return emit_reduction(ec, anchor);
    default:
      return emit_layout(ec, anchor);
  }
}

namespace ew {

using llvm::Type;
using llvm::Value;

Type* compute_type(llvm::LLVMContext& ctx, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32:
    case ir::DType::kF16:
    case ir::DType::kBf16:
      return Type::getFloatTy(ctx);
    case ir::DType::kF64: return Type::getDoubleTy(ctx);
    case ir::DType::kI8:
    case ir::DType::kU8: return Type::getInt8Ty(ctx);
    case ir::DType::kI32: return Type::getInt32Ty(ctx);
    case ir::DType::kI64: return Type::getInt64Ty(ctx);
    case ir::DType::kBool: return Type::getInt1Ty(ctx);
  }
  return Type::getInt8Ty(ctx);
}

Type* storage_type(llvm::LLVMContext& ctx, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF16:
    case ir::DType::kBf16: return Type::getInt16Ty(ctx);
    case ir::DType::kBool: return Type::getInt8Ty(ctx);
    default: return compute_type(ctx, dtype);
  }
}

Type* like_shape(Type* elem, Type* like) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

bool is_signed_int(ir::DType dtype) {
  return dtype == ir::DType::kI8 || dtype == ir::DType::kI32 || dtype == ir::DType::kI64;
}

Value* i64c(llvm::IRBuilder<>& b, int64_t v) { return b.getInt64(static_cast<uint64_t>(v)); }

namespace {
Value* iconst(Type* t, uint64_t v) { return llvm::ConstantInt::get(t, v); }
Value* fconst(Type* t, double v) { return llvm::ConstantFP::get(t, v); }
}  // namespace

Value* from_storage(llvm::IRBuilder<>& b, ir::DType dtype, Value* stored) {
  switch (dtype) {
    case ir::DType::kF16: return f16_bits_to_f32(b, stored);
    case ir::DType::kBf16: return bf16_bits_to_f32(b, stored);
    case ir::DType::kBool: return b.CreateICmpNE(stored, llvm::Constant::getNullValue(stored->getType()));
    default: return stored;
  }
}

Value* to_storage(llvm::IRBuilder<>& b, ir::DType dtype, Value* v) {
  switch (dtype) {
    case ir::DType::kF16: return f32_to_f16_bits(b, v);
    case ir::DType::kBf16: return f32_to_bf16_bits(b, v);
    case ir::DType::kBool: return b.CreateZExt(v, like_shape(b.getInt8Ty(), v->getType()));
    default: return v;
  }
}

Value* load_value(llvm::IRBuilder<>& b, ir::DType dtype, Value* base, Value* index) {
  Type* st = storage_type(b.getContext(), dtype);
  Value* p = b.CreateInBoundsGEP(st, base, index);
  auto* ld = b.CreateAlignedLoad(st, p, llvm::Align(static_cast<uint64_t>(ir::dtype_size(dtype))));
  return from_storage(b, dtype, ld);
}

void store_value(llvm::IRBuilder<>& b, ir::DType dtype, Value* base, Value* index, Value* v) {
  Type* st = storage_type(b.getContext(), dtype);
  Value* p = b.CreateInBoundsGEP(st, base, index);
  b.CreateAlignedStore(to_storage(b, dtype, v), p, llvm::Align(static_cast<uint64_t>(ir::dtype_size(dtype))));
}

Value* f32_to_f16_bits(llvm::IRBuilder<>& b, Value* f) {
  Type* i32 = like_shape(b.getInt32Ty(), f->getType());
  Type* i16 = like_shape(b.getInt16Ty(), f->getType());
  Type* f32 = f->getType();
  Value* x = b.CreateBitCast(f, i32);
  Value* sign = b.CreateAnd(x, iconst(i32, 0x80000000u));
  Value* ax = b.CreateXor(x, sign);
  // NaN/Inf/overflow (|x| >= 65536.0): 0x7e00 for NaN, 0x7c00 (inf) otherwise.
  Value* big = b.CreateICmpUGE(ax, iconst(i32, 0x47800000u));
  Value* is_nan = b.CreateICmpUGT(ax, iconst(i32, 0x7f800000u));
  Value* big_bits = b.CreateSelect(is_nan, iconst(i32, 0x7e00), iconst(i32, 0x7c00));
  // Subnormal or zero (|x| < 2^-14): align with a magic add (RNE by the FPU).
  Value* small = b.CreateICmpULT(ax, iconst(i32, 113u << 23));
  Value* magic = fconst(f32, 0.5);
  Value* sum = b.CreateFAdd(b.CreateBitCast(ax, f32), magic);
  Value* small_bits = b.CreateSub(b.CreateBitCast(sum, i32), iconst(i32, 126u << 23));
  // Normal: rebias the exponent and round to nearest even on bit 13.
  Value* odd = b.CreateAnd(b.CreateLShr(ax, iconst(i32, 13)), iconst(i32, 1));
  Value* adj = b.CreateAdd(ax, iconst(i32, static_cast<uint32_t>((15 - 127) << 23) + 0xfffu));
  Value* normal_bits = b.CreateLShr(b.CreateAdd(adj, odd), iconst(i32, 13));
  Value* bits = b.CreateSelect(big, big_bits, b.CreateSelect(small, small_bits, normal_bits));
  bits = b.CreateOr(bits, b.CreateLShr(sign, iconst(i32, 16)));
  return b.CreateTrunc(bits, i16);
}

Value* f16_bits_to_f32(llvm::IRBuilder<>& b, Value* h) {
  Type* i32 = like_shape(b.getInt32Ty(), h->getType());
  Type* f32 = like_shape(b.getFloatTy(), h->getType());
  Value* x = b.CreateZExt(h, i32);
  Value* sign = b.CreateShl(b.CreateAnd(x, iconst(i32, 0x8000)), iconst(i32, 16));
  Value* em = b.CreateAnd(x, iconst(i32, 0x7fff));
  Value* shifted = b.CreateShl(em, iconst(i32, 13));
  Value* special = b.CreateICmpUGE(em, iconst(i32, 0x7c00));
  Value* normal = b.CreateAdd(shifted, b.CreateSelect(special, iconst(i32, 0x70000000u), iconst(i32, 0x38000000u)));
  Value* sub = b.CreateFMul(b.CreateUIToFP(em, f32), fconst(f32, 5.9604644775390625e-8));
  Value* is_sub = b.CreateICmpULT(em, iconst(i32, 0x400));
  Value* mag = b.CreateSelect(is_sub, b.CreateBitCast(sub, i32), normal);
  return b.CreateBitCast(b.CreateOr(mag, sign), f32);
}

Value* f32_to_bf16_bits(llvm::IRBuilder<>& b, Value* f) {
  Type* i32 = like_shape(b.getInt32Ty(), f->getType());
  Type* i16 = like_shape(b.getInt16Ty(), f->getType());
  Value* x = b.CreateBitCast(f, i32);
  Value* is_nan = b.CreateICmpUGT(b.CreateAnd(x, iconst(i32, 0x7fffffffu)), iconst(i32, 0x7f800000u));
  Value* odd = b.CreateAnd(b.CreateLShr(x, iconst(i32, 16)), iconst(i32, 1));
  Value* rounded = b.CreateLShr(b.CreateAdd(b.CreateAdd(x, iconst(i32, 0x7fff)), odd), iconst(i32, 16));
  Value* nan_bits = b.CreateOr(b.CreateAnd(b.CreateLShr(x, iconst(i32, 16)), iconst(i32, 0x8000)), iconst(i32, 0x7fc0));
  return b.CreateTrunc(b.CreateSelect(is_nan, nan_bits, rounded), i16);
}

Value* bf16_bits_to_f32(llvm::IRBuilder<>& b, Value* h) {
  Type* i32 = like_shape(b.getInt32Ty(), h->getType());
  Type* f32 = like_shape(b.getFloatTy(), h->getType());
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(h, i32), iconst(i32, 16)), f32);
}

Value* f64_to_f32_round_odd(llvm::IRBuilder<>& b, Value* d) {
  Type* f32 = like_shape(b.getFloatTy(), d->getType());
  Type* i32 = like_shape(b.getInt32Ty(), d->getType());
  Value* r = b.CreateFPTrunc(d, f32);
  Value* back = b.CreateFPExt(r, d->getType());
  Value* inexact = b.CreateFCmpONE(back, d);
  Value* away = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d));
  Value* bits = b.CreateBitCast(r, i32);
  bits = b.CreateSub(bits, b.CreateZExt(away, i32));
  bits = b.CreateOr(bits, b.CreateZExt(inexact, i32));
  return b.CreateBitCast(bits, f32);
}

Value* i64_to_f64_round_odd(llvm::IRBuilder<>& b, Value* x, bool is_signed) {
  Type* i64 = x->getType();
  Type* f64 = like_shape(b.getDoubleTy(), i64);
  Value* zero = iconst(i64, 0);
  Value* neg = is_signed ? b.CreateICmpSLT(x, zero) : nullptr;
  Value* mag = is_signed ? b.CreateSelect(neg, b.CreateSub(zero, x), x) : x;
  Value* lz = b.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, mag, llvm::ConstantInt::getFalse(b.getContext()));
  // keep 53 bits from the top set bit: shift = max(0, 11 - lz)
  Value* shift = b.CreateSub(iconst(i64, 11), lz);
  shift = b.CreateSelect(b.CreateICmpSGT(shift, zero), shift, zero);
  Value* unit = b.CreateShl(iconst(i64, 1), shift);
  Value* mask = b.CreateSub(unit, iconst(i64, 1));
  Value* sticky = b.CreateICmpNE(b.CreateAnd(mag, mask), zero);
  Value* kept = b.CreateAnd(mag, b.CreateNot(mask));
  kept = b.CreateOr(kept, b.CreateSelect(sticky, unit, zero));
  Value* d = b.CreateUIToFP(kept, f64);
  return is_signed ? b.CreateSelect(neg, b.CreateFNeg(d), d) : d;
}

Value* round_to(llvm::IRBuilder<>& b, ir::DType dtype, Value* v) {
  if (dtype == ir::DType::kF16) return f16_bits_to_f32(b, f32_to_f16_bits(b, v));
  if (dtype == ir::DType::kBf16) return bf16_bits_to_f32(b, f32_to_bf16_bits(b, v));
  return v;
}

Value* round_from_double(llvm::IRBuilder<>& b, ir::DType dtype, Value* d) {
  switch (dtype) {
    case ir::DType::kF64: return d;
    case ir::DType::kF32: return b.CreateFPTrunc(d, like_shape(b.getFloatTy(), d->getType()));
    case ir::DType::kF16:
    case ir::DType::kBf16: return round_to(b, dtype, f64_to_f32_round_odd(b, d));
    default: return d;
  }
}

void emit_for(llvm::IRBuilder<>& b, Value* begin, Value* end, const std::function<void(Value*)>& body,
              const char* name) {
  emit_while(
      b, begin, end,
      [&](Value* iv) {
        body(iv);
        return b.CreateAdd(iv, iconst(iv->getType(), 1), "", /*HasNUW=*/true, /*HasNSW=*/true);
      },
      name);
}

void emit_while(llvm::IRBuilder<>& b, Value* begin, Value* end, const std::function<Value*(Value*)>& body,
                const char* name) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx, std::string(name) + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, std::string(name) + ".exit", fn);
  b.CreateCondBr(b.CreateICmpSLT(begin, end), loop, exit);
  b.SetInsertPoint(loop);
  llvm::PHINode* iv = b.CreatePHI(begin->getType(), 2, name);
  iv->addIncoming(begin, pre);
  Value* next = body(iv);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  b.CreateCondBr(b.CreateICmpSLT(next, end), loop, exit);
  iv->addIncoming(next, latch);
  b.SetInsertPoint(exit);
}

void emit_if(llvm::IRBuilder<>& b, Value* cond, const std::function<void()>& then_body) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  auto* then_bb = llvm::BasicBlock::Create(ctx, "then", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "endif", fn);
  b.CreateCondBr(cond, then_bb, done);
  b.SetInsertPoint(then_bb);
  then_body();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

Range tile_items(EmitContext& ec, int64_t total) {
  llvm::IRBuilder<>& b = ec.b;
  int64_t tiles = std::max<int64_t>(1, ec.group.num_tiles);
  int64_t chunk = total <= 0 ? 0 : (total + tiles - 1) / tiles;
  auto clamp_tile = [&](Value* t) {
    Value* lo = b.CreateSelect(b.CreateICmpSLT(t, i64c(b, 0)), i64c(b, 0), t);
    return b.CreateSelect(b.CreateICmpSGT(lo, i64c(b, tiles)), i64c(b, tiles), lo);
  };
  auto items = [&](Value* t) {
    Value* n = b.CreateMul(clamp_tile(t), i64c(b, chunk), "", true, true);
    return b.CreateSelect(b.CreateICmpSGT(n, i64c(b, total)), i64c(b, total), n);
  };
  return Range{items(ec.tile_begin), items(ec.tile_end)};
}

BroadcastLayout broadcast_layout(const ir::Shape& out, const std::vector<ir::Shape>& operands) {
  BroadcastLayout layout;
  int r = out.rank();
  layout.total = 1;
  for (int j = 0; j < r; ++j) layout.total *= out[j];
  // Per kept output dim: its extent and which operands broadcast along it.
  std::vector<int64_t> dims;
  std::vector<std::vector<bool>> bcast;  // [dim][operand]
  for (int j = 0; j < r; ++j) {
    if (out[j] == 1) continue;
    std::vector<bool> flags;
    for (const ir::Shape& s : operands) {
      int k = j - (r - s.rank());
      int64_t d = k >= 0 ? s[k] : 1;
      flags.push_back(d == 1);
    }
    if (!dims.empty() && bcast.back() == flags) {
      dims.back() *= out[j];
    } else {
      dims.push_back(out[j]);
      bcast.push_back(std::move(flags));
    }
  }
  if (dims.empty()) {
    dims.push_back(layout.total);
    bcast.push_back(std::vector<bool>(operands.size(), false));
  }
  layout.dims = dims;
  layout.strides.assign(operands.size(), std::vector<int64_t>(dims.size(), 0));
  for (size_t k = 0; k < operands.size(); ++k) {
    int64_t stride = 1;
    for (size_t j = dims.size(); j-- > 0;) {
      if (bcast[j][k]) continue;
      layout.strides[k][j] = stride;
      stride *= dims[j];
    }
  }
  return layout;
}

Value* broadcast_offset(llvm::IRBuilder<>& b, const BroadcastLayout& layout, size_t k, Value* linear) {
  const auto& st = layout.strides[k];
  // Contiguous operand (same shape as the output): the offset is the linear index.
  bool identity = true;
  int64_t expect = 1;
  for (size_t j = layout.dims.size(); j-- > 0;) {
    if (st[j] != expect) identity = false;
    expect *= layout.dims[j];
  }
  if (identity) return linear;
  Value* off = i64c(b, 0);
  Value* rest = linear;
  for (size_t j = layout.dims.size(); j-- > 0;) {
    Value* idx = j == 0 ? rest : b.CreateURem(rest, i64c(b, layout.dims[j]));
    if (st[j] != 0) off = b.CreateAdd(off, b.CreateMul(idx, i64c(b, st[j])));
    if (j > 0) rest = b.CreateUDiv(rest, i64c(b, layout.dims[j]));
  }
  return off;
}

}  // namespace ew
}  // namespace carve::jit::detail
