// The helper kit of the LLVM emitters (emit_util.h); the float rounding helpers are in
// emit_util_float.cpp.
#include "emit_util.h"

#include <llvm/IR/Intrinsics.h>

#include <fmt/format.h>

#include <cmath>

namespace carve::jit::detail::util {

using llvm::Type;
using llvm::Value;

Type* compute_type(EmitContext& ec, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32:
    case ir::DType::kF16:
    case ir::DType::kBf16: return Type::getFloatTy(ec.ctx);
    case ir::DType::kF64: return Type::getDoubleTy(ec.ctx);
    case ir::DType::kI8:
    case ir::DType::kU8: return Type::getInt8Ty(ec.ctx);
    case ir::DType::kI16:
    case ir::DType::kU16: return Type::getInt16Ty(ec.ctx);
    case ir::DType::kI32:
    case ir::DType::kU32: return Type::getInt32Ty(ec.ctx);
    case ir::DType::kI64:
    case ir::DType::kU64: return Type::getInt64Ty(ec.ctx);
    case ir::DType::kBool: return Type::getInt1Ty(ec.ctx);
  }
  return Type::getInt8Ty(ec.ctx);
}

Type* storage_type(EmitContext& ec, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF16:
    case ir::DType::kBf16: return Type::getInt16Ty(ec.ctx);
    case ir::DType::kBool: return Type::getInt8Ty(ec.ctx);
    default: return compute_type(ec, dtype);
  }
}

Type* like_shape(Type* elem, Type* like) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

bool is_fp(ir::DType dtype) { return ir::is_float(dtype); }
bool is_signed_int(ir::DType dtype) { return ir::is_integer(dtype) && !ir::is_unsigned_int(dtype); }

uint64_t saturated_int_bits(ir::DType d, double v) {
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  const int bits = static_cast<int>(ir::dtype_size(d)) * 8;
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (ir::is_unsigned_int(d)) {
    if (t <= 0) return 0;
    if (t >= std::ldexp(1.0, bits)) return mask;  // max + 1, exact
    return static_cast<uint64_t>(t);
  }
  const double half = std::ldexp(1.0, bits - 1);  // -min = max + 1, exact
  if (t <= -half) return (uint64_t{1} << (bits - 1)) & mask;  // the minimum's bits
  if (t >= half) return mask >> 1;
  return static_cast<uint64_t>(static_cast<int64_t>(t)) & mask;
}

Value* i64c(EmitContext& ec, int64_t v) { return ec.b.getInt64(static_cast<uint64_t>(v)); }
Value* intc(Type* t, uint64_t v) { return llvm::ConstantInt::get(t, v); }
Value* fpc(Type* t, double v) { return llvm::ConstantFP::get(t, v); }

Value* elem_ptr(EmitContext& ec, ir::DType dtype, Value* base, Value* index) {
  return ec.b.CreateInBoundsGEP(storage_type(ec, dtype), base, index);
}

static llvm::Align elem_align(ir::DType dtype) {
  return llvm::Align(static_cast<uint64_t>(ir::dtype_size(dtype)));
}

Value* load_elem(EmitContext& ec, ir::DType dtype, Value* base, Value* index) {
  Value* v = ec.b.CreateAlignedLoad(storage_type(ec, dtype), elem_ptr(ec, dtype, base, index),
                                    elem_align(dtype));
  return from_storage(ec, dtype, v);
}

void store_elem(EmitContext& ec, ir::DType dtype, Value* base, Value* index, Value* v) {
  ec.b.CreateAlignedStore(to_storage(ec, dtype, v), elem_ptr(ec, dtype, base, index),
                          elem_align(dtype));
}

Value* load_n(EmitContext& ec, ir::DType dtype, Value* base, Value* index, int lanes) {
  if (lanes == 0) return load_elem(ec, dtype, base, index);
  Type* vt = vec_type(storage_type(ec, dtype), lanes);
  return from_storage(ec, dtype, load_vec(ec, vt, elem_ptr(ec, dtype, base, index)));
}

void store_n(EmitContext& ec, ir::DType dtype, Value* base, Value* index, Value* v) {
  if (v->getType()->isVectorTy()) {
    store_vec(ec, to_storage(ec, dtype, v), elem_ptr(ec, dtype, base, index));
  } else {
    store_elem(ec, dtype, base, index, v);
  }
}

static bool is_float_value(Value* v) { return v->getType()->getScalarType()->isFloatingPointTy(); }

Value* add(EmitContext& ec, Value* a, Value* b) {
  return is_float_value(a) ? ec.b.CreateFAdd(a, b) : ec.b.CreateAdd(a, b);
}
Value* mul(EmitContext& ec, Value* a, Value* b) {
  return is_float_value(a) ? ec.b.CreateFMul(a, b) : ec.b.CreateMul(a, b);
}
Value* mul_add(EmitContext& ec, Value* a, Value* b, Value* c) {
  if (is_float_value(a))
    return ec.b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, c});
  return ec.b.CreateAdd(ec.b.CreateMul(a, b), c);
}

Value* max(EmitContext& ec, ir::DType dtype, Value* a, Value* b) {
  Value* lt;
  if (is_float_value(a)) {
    // b > a ? b : a (ties keep a, like the reference), NaN if either is NaN.
    Value* r = ec.b.CreateSelect(ec.b.CreateFCmpOGT(b, a), b, a);
    return ec.b.CreateSelect(ec.b.CreateFCmpUNO(a, b), ec.b.CreateFAdd(a, b), r);
  } else if (is_signed_int(dtype)) {
    lt = ec.b.CreateICmpSLT(a, b);
  } else {
    lt = ec.b.CreateICmpULT(a, b);
  }
  return ec.b.CreateSelect(lt, b, a);
}

Value* zero(Type* t) { return llvm::Constant::getNullValue(t); }

Value* lowest(EmitContext& ec, ir::DType dtype, Type* t) {
  (void)ec;
  Type* s = t->getScalarType();
  llvm::Constant* c;
  if (s->isFloatingPointTy()) {
    c = llvm::ConstantFP::getInfinity(s, /*Negative=*/true);
  } else if (is_signed_int(dtype)) {
    c = llvm::ConstantInt::get(s, llvm::APInt::getSignedMinValue(s->getIntegerBitWidth()));
  } else {
    c = llvm::ConstantInt::get(s, 0);
  }
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t))
    return llvm::ConstantVector::getSplat(vt->getElementCount(), c);
  return c;
}

Value* splat(EmitContext& ec, int lanes, Value* scalar) {
  return ec.b.CreateVectorSplat(static_cast<unsigned>(lanes), scalar);
}

llvm::VectorType* vec_type(Type* elem, int lanes) {
  return llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes));
}

Value* load_vec(EmitContext& ec, Type* vt, Value* ptr) {
  return ec.b.CreateAlignedLoad(vt, ptr, llvm::Align(vt->getScalarSizeInBits() / 8));
}

void store_vec(EmitContext& ec, Value* v, Value* ptr) {
  ec.b.CreateAlignedStore(v, ptr, llvm::Align(v->getType()->getScalarSizeInBits() / 8));
}

Value* splat_like(EmitContext& ec, Value* scalar, int lanes) {
  return lanes == 0 ? scalar : splat(ec, lanes, scalar);
}

Value* horizontal(EmitContext& ec, Value* v, const std::function<Value*(Value*, Value*)>& f) {
  auto* vt = llvm::cast<llvm::FixedVectorType>(v->getType());
  unsigned n = vt->getNumElements();
  while (n > 1) {
    unsigned h = n / 2;
    std::vector<int> lo, hi;
    for (unsigned i = 0; i < h; ++i) {
      lo.push_back(static_cast<int>(i));
      hi.push_back(static_cast<int>(i + h));
    }
    v = f(ec.b.CreateShuffleVector(v, lo), ec.b.CreateShuffleVector(v, hi));
    n = h;
  }
  return ec.b.CreateExtractElement(v, static_cast<uint64_t>(0));
}

Value* exp(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  if (!t->getScalarType()->isDoubleTy()) return exp_f32(ec, x);
  Type* it = like_shape(Type::getInt64Ty(ec.ctx), t);
  auto c = [&](double v) { return fpc(t, v); };
  const double hi = 709.0, lo = -708.0;
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, c(hi)), c(hi), x);
  xc = b.CreateSelect(b.CreateFCmpOLT(xc, c(lo)), c(lo), xc);
  Value* n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {t}, {b.CreateFMul(xc, c(M_LOG2E))});
  // r = x - n*ln2 in two parts (Cody-Waite).
  Value* r = mul_add(ec, n, c(-6.93147180369123816490e-01), xc);
  r = mul_add(ec, n, c(-1.90821492927058770002e-10), r);
  // Taylor series to r^13/13!; |r| <= ln2/2 keeps the error below 1e-17.
  double coef = 1.0;
  std::vector<double> cs;
  for (int k = 0; k <= 13; ++k) {
    cs.push_back(1.0 / coef);
    coef *= (k + 1);
  }
  Value* p = c(cs[13]);
  for (int k = 12; k >= 0; --k) p = mul_add(ec, p, r, c(cs[static_cast<size_t>(k)]));
  // 2^n through the exponent bits.
  Value* ni = b.CreateFPToSI(n, it);
  const int mant = 52;
  const int64_t bias = 1023;
  // n can reach bias+1 at the top of the range (x near hi): split the scale in two.
  Value* half_bits = b.CreateShl(
      b.CreateAdd(b.CreateAShr(ni, llvm::ConstantInt::get(it, 1)),
                  llvm::ConstantInt::get(it, static_cast<uint64_t>(bias))),
      llvm::ConstantInt::get(it, static_cast<uint64_t>(mant)));
  Value* s1 = b.CreateBitCast(half_bits, t);
  Value* rest = b.CreateSub(ni, b.CreateAShr(ni, llvm::ConstantInt::get(it, 1)));
  Value* s2 = b.CreateBitCast(
      b.CreateShl(b.CreateAdd(rest, llvm::ConstantInt::get(it, static_cast<uint64_t>(bias))),
                  llvm::ConstantInt::get(it, static_cast<uint64_t>(mant))),
      t);
  Value* y = b.CreateFMul(b.CreateFMul(p, s1), s2);
  // Saturate outside the range, keep NaN.
  y = b.CreateSelect(b.CreateFCmpOGT(x, c(hi)), llvm::ConstantFP::getInfinity(t), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, c(lo)), c(0.0), y);
  y = b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
  return y;
}

Value* min_i64(EmitContext& ec, Value* a, Value* b) {
  return ec.b.CreateSelect(ec.b.CreateICmpSLT(a, b), a, b);
}
Value* max_i64(EmitContext& ec, Value* a, Value* b) {
  return ec.b.CreateSelect(ec.b.CreateICmpSGT(a, b), a, b);
}

std::vector<Value*> for_range_carry(
    EmitContext& ec, Value* begin, Value* end, int64_t step, std::vector<Value*> init,
    const std::function<std::vector<Value*>(Value*, const std::vector<Value*>&)>& body,
    const char* name) {
  auto& b = ec.b;
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ec.ctx, std::string(name) + ".head", ec.fn);
  auto* bodyb = llvm::BasicBlock::Create(ec.ctx, std::string(name) + ".body", ec.fn);
  auto* exit = llvm::BasicBlock::Create(ec.ctx, std::string(name) + ".exit", ec.fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* iv = b.CreatePHI(b.getInt64Ty(), 2, name);
  iv->addIncoming(begin, pre);
  std::vector<llvm::PHINode*> phis;
  std::vector<Value*> carried;
  for (Value* v : init) {
    llvm::PHINode* p = b.CreatePHI(v->getType(), 2);
    p->addIncoming(v, pre);
    phis.push_back(p);
    carried.push_back(p);
  }
  b.CreateCondBr(b.CreateICmpSLT(iv, end), bodyb, exit);
  b.SetInsertPoint(bodyb);
  std::vector<Value*> next = body(iv, carried);
  Value* inc = b.CreateAdd(iv, i64c(ec, step), "", /*HasNUW=*/false, /*HasNSW=*/true);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  b.CreateBr(header);
  iv->addIncoming(inc, latch);
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  b.SetInsertPoint(exit);
  return carried;
}

void for_range(EmitContext& ec, Value* begin, Value* end, int64_t step,
               const std::function<void(Value*)>& body, const char* name) {
  for_range_carry(
      ec, begin, end, step, {},
      [&](Value* iv, const std::vector<Value*>&) {
        body(iv);
        return std::vector<Value*>{};
      },
      name);
}

// iv = begin; while (iv < end) iv = body(iv): the body picks the next iv (> iv). Rotated:
// the guard tests begin < end once, the latch tests next < end.
static void while_range(EmitContext& ec, Value* begin, Value* end, const std::function<Value*(Value*)>& body,
                        const char* name = "r") {
  auto& b = ec.b;
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ec.ctx, std::string(name) + ".body", ec.fn);
  auto* exit = llvm::BasicBlock::Create(ec.ctx, std::string(name) + ".exit", ec.fn);
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

void for_rows(EmitContext& ec, Value* lo, Value* hi, int64_t width,
              const std::function<void(Value* row)>& row,
              const std::function<void(Value* row_start, Value* col)>& item) {
  auto& b = ec.b;
  while_range(ec, lo, hi, [&](Value* i) -> Value* {
    Value* w = i64c(ec, width);
    Value* r = b.CreateUDiv(i, w);
    Value* row_start = b.CreateMul(r, w);
    Value* col = b.CreateSub(i, row_start);
    Value* remaining = b.CreateSub(hi, row_start);
    Value* col_end = b.CreateSelect(b.CreateICmpSLT(remaining, w), remaining, w);
    row(r);
    for_range(ec, col, col_end, 1, [&](Value* c) { item(row_start, c); }, "c");
    return b.CreateAdd(row_start, col_end);
  });
}

std::vector<Value*> unravel(EmitContext& ec, Value* linear, const std::vector<int64_t>& dims) {
  std::vector<Value*> idx(dims.size());
  Value* rest = linear;
  for (size_t j = dims.size(); j-- > 0;) {
    idx[j] = j == 0 ? rest : ec.b.CreateURem(rest, i64c(ec, dims[j]));
    if (j > 0) rest = ec.b.CreateUDiv(rest, i64c(ec, dims[j]));
  }
  return idx;
}

Value* strided_offset(EmitContext& ec, Value* base, const std::vector<Value*>& idx,
                      const std::vector<int64_t>& strides) {
  for (size_t j = idx.size(); j-- > 0;) {
    if (strides[j] != 0) base = ec.b.CreateAdd(base, ec.b.CreateMul(idx[j], i64c(ec, strides[j])));
  }
  return base;
}

void if_then(EmitContext& ec, Value* cond, const std::function<void()>& then_body) {
  if_then_else(ec, cond, then_body, nullptr);
}

// Without an else body the false edge goes straight to the join block.
void if_then_else(EmitContext& ec, Value* cond, const std::function<void()>& then_body,
                  const std::function<void()>& else_body) {
  auto* thenb = llvm::BasicBlock::Create(ec.ctx, "then", ec.fn);
  auto* elseb = else_body ? llvm::BasicBlock::Create(ec.ctx, "else", ec.fn) : nullptr;
  auto* join = llvm::BasicBlock::Create(ec.ctx, "join", ec.fn);
  ec.b.CreateCondBr(cond, thenb, elseb ? elseb : join);
  ec.b.SetInsertPoint(thenb);
  then_body();
  ec.b.CreateBr(join);
  if (elseb) {
    ec.b.SetInsertPoint(elseb);
    else_body();
    ec.b.CreateBr(join);
  }
  ec.b.SetInsertPoint(join);
}

Value* entry_alloca(EmitContext& ec, Type* t, int64_t count, const char* name) {
  llvm::IRBuilder<> eb(&ec.fn->getEntryBlock(), ec.fn->getEntryBlock().begin());
  auto* a = eb.CreateAlloca(t, eb.getInt64(static_cast<uint64_t>(count)), name);
  a->setAlignment(llvm::Align(64));
  return a;
}

// The call's tiles [tile_begin, tile_end) clamped to [0, num_tiles).
static Range tile_range(EmitContext& ec, int64_t num_tiles) {
  return {max_i64(ec, ec.tile_begin, i64c(ec, 0)), min_i64(ec, ec.tile_end, i64c(ec, num_tiles))};
}

Range tile_items(EmitContext& ec, int64_t total) {
  int64_t tiles = std::max<int64_t>(1, ec.group.num_tiles);
  int64_t chunk = total <= 0 ? 0 : (total + tiles - 1) / tiles;
  Range t = tile_range(ec, tiles);
  auto items = [&](Value* tile) {
    return min_i64(ec, ec.b.CreateMul(tile, i64c(ec, chunk), "", true, true), i64c(ec, total));
  };
  return {items(t.lo), items(t.hi)};
}

StoreTarget store_target(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue) {
  ir::ValueId v = node.outputs[0];
  if (epilogue) v = ec.graph.node(ec.group.nodes.back()).outputs[0];
  return {operand_ptr(ec, v), ec.graph.value(v).type.dtype};
}

void store_result(EmitContext& ec, const StoreTarget& target, ir::DType anchor_dtype,
                  const Epilogue& epilogue, Value* v, Value* linear, Value* last_dim_index) {
  // The epilogue (make_epilogue) takes and returns kit compute types; an f16/bf16 anchor
  // result is rounded to its dtype first, as the unfused node would store it.
  if (epilogue) v = epilogue(ec, round_to(ec, anchor_dtype, v), linear, last_dim_index);
  store_n(ec, target.dtype, target.ptr, linear, v);
}

void epilogue_in_place(EmitContext& ec, const StoreTarget& target, const Epilogue& epilogue, Value* lo,
                       int64_t n, int lanes) {
  auto finish = [&](Value* i, int ln) {
    Value* at = ec.b.CreateAdd(lo, i);
    store_n(ec, target.dtype, target.ptr, at, epilogue(ec, load_n(ec, target.dtype, target.ptr, at, ln), at, nullptr));
  };
  const int64_t vec_end = n / lanes * lanes;
  if (vec_end > 0) for_range(ec, i64c(ec, 0), i64c(ec, vec_end), lanes, [&](Value* i) { finish(i, lanes); }, "ev");
  if (vec_end < n) for_range(ec, i64c(ec, vec_end), i64c(ec, n), 1, [&](Value* i) { finish(i, 0); }, "es");
}

int64_t units_per_kernel_tile(EmitContext& ec, int64_t units) {
  int64_t t = std::max<int64_t>(1, ec.group.num_tiles);
  return std::max<int64_t>(1, (units + t - 1) / t);
}

void for_units(EmitContext& ec, int64_t units,
               const std::function<void(Value* tile, Value* unit)>& body) {
  if (units <= 0) return;
  int64_t chunk = units_per_kernel_tile(ec, units);
  Range tr = tile_range(ec, std::max<int64_t>(1, ec.group.num_tiles));
  for_range(ec, tr.lo, tr.hi, 1, [&](Value* t) {
    Value* ub = ec.b.CreateMul(t, i64c(ec, chunk));
    Value* ue = min_i64(ec, ec.b.CreateAdd(ub, i64c(ec, chunk)), i64c(ec, units));
    for_range(ec, ub, ue, 1, [&](Value* u) { body(t, u); }, "u");
  }, "t");
}

bool output_may_alias(EmitContext& ec, ir::ValueId v) {
  for (size_t i = 0; i < ec.group.operands.size(); ++i) {
    const KernelOperand& op = ec.group.operands[i];
    if (op.value != v || op.role != OperandRole::kOutput) continue;
    for (const auto& [a, b] : ec.group.may_alias) {
      if (a == static_cast<int32_t>(i) || b == static_cast<int32_t>(i)) return true;
    }
  }
  return false;
}

void copy_run(EmitContext& ec, Type* t, Value* dst, Value* src, Value* n) {
  int lanes = std::max(1, ec.vector_width_f32 * 32 / static_cast<int>(t->getPrimitiveSizeInBits()));
  Type* vt = vec_type(t, lanes);
  auto& b = ec.b;
  Value* nv = b.CreateMul(b.CreateSDiv(n, i64c(ec, lanes)), i64c(ec, lanes));
  for_range(ec, i64c(ec, 0), nv, lanes, [&](Value* j) {
    store_vec(ec, load_vec(ec, vt, b.CreateGEP(t, src, j)), b.CreateGEP(t, dst, j));
  }, "cv");
  for_range(ec, nv, n, 1, [&](Value* j) {
    b.CreateStore(b.CreateLoad(t, b.CreateGEP(t, src, j)), b.CreateGEP(t, dst, j));
  }, "cs");
}

double attr_float(const ir::Node& n, const char* name, double fallback) {
  return ir::float_attr_or(n.attrs, name, fallback);
}

int64_t attr_int(const ir::Node& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  return it != n.attrs.end() && it->second.is_int() ? it->second.as_int() : fallback;
}

std::vector<int64_t> attr_ints(const ir::Node& n, const char* name, std::vector<int64_t> fallback) {
  auto it = n.attrs.find(name);
  return it != n.attrs.end() && it->second.is_ints() ? it->second.as_ints() : fallback;
}

}  // namespace carve::jit::detail::util
