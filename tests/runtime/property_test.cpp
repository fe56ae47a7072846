// Properties of random view chains: bounds accepted exactly when inside the parent,
// storage_id constant along the chain, BufferIds all distinct, offsets add up.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <set>
#include <vector>

#include "carve/runtime/buffer.h"

namespace rt = carve::runtime;
using carve::ErrorCode;
using carve::ir::DType;

TEST_CASE("runtime/property/random_view_chains") {
  CHECK(rc::check("view chains keep storage, mint ids, respect bounds", [] {
    const auto total = *rc::gen::inRange<size_t>(0, 512);
    auto base = rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {static_cast<int64_t>(total)});
    RC_ASSERT(base.ok());
    const auto steps = *rc::gen::inRange(1, 8);
    std::set<uint64_t> ids = {base->id().value};
    rt::Buffer current = *base;
    for (int i = 0; i < steps; ++i) {
      // Often in range, sometimes past it (and sometimes near SIZE_MAX).
      const auto offset = *rc::gen::oneOf(rc::gen::inRange<size_t>(0, current.size() + 8),
                                          rc::gen::just(SIZE_MAX - 2));
      const auto size = *rc::gen::inRange<size_t>(0, current.size() + 8);
      auto view = current.view(offset, size);
      const bool inside = offset <= current.size() && size <= current.size() - offset;
      RC_ASSERT(view.ok() == inside);
      if (!inside) {
        RC_ASSERT(view.status().code() == ErrorCode::kOutOfBounds);
        continue;
      }
      RC_ASSERT(view->storage_id() == base->storage_id());
      RC_ASSERT(view->offset() == current.offset() + offset);
      RC_ASSERT(view->size() == size);
      RC_ASSERT(view->total_size() == total);
      RC_ASSERT(view->ownership() == rt::Ownership::kAliased);
      RC_ASSERT(view->is_mutable());
      RC_ASSERT(ids.insert(view->id().value).second);
      current = *view;
    }
  }));
}

TEST_CASE("runtime/property/copy_roundtrip") {
  CHECK(rc::check("copy_in then copy_out returns the same bytes", [](const std::vector<uint8_t>& data) {
    auto b = rt::Buffer::lazy(rt::cpu_allocator(), DType::kU8, {static_cast<int64_t>(data.size())});
    RC_ASSERT(b.ok());
    RC_ASSERT(b->copy_in(std::as_bytes(std::span(data))).ok());
    std::vector<uint8_t> out(data.size());
    RC_ASSERT(b->copy_out(std::as_writable_bytes(std::span(out))).ok());
    RC_ASSERT(out == data);
  }));
}
