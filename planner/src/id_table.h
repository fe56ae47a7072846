// Internal: duplicate-id detection over a growing vector of buffers (not public API).
//
// Open addressing over buffer indices, so an id is hashed and compared in place: a
// node-based std::unordered_map made one allocation (and, keyed by std::string, one copy)
// per buffer, 0.3 s per check at 1M buffers.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <string_view>
#include <vector>

#include "carve/planner/problem.h"

namespace carve::planner::detail {

class IdTable {
 public:
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  // `buffers` is read at every insert, so it may grow between calls (not shrink).
  explicit IdTable(const std::vector<BufferRequest>& buffers, size_t expected = 0)
      : buffers_(buffers) {
    resize_for(expected);
  }

  // Records buffers[i].id; returns the index of an earlier recorded buffer with the same
  // id, or kNone.
  size_t insert(size_t i) {
    if (2 * (count_ + 1) > slots_.size()) resize_for(count_ + 1);
    const std::string_view id = buffers_[i].id;
    const size_t mask = slots_.size() - 1;
    for (size_t s = std::hash<std::string_view>{}(id) & mask;; s = (s + 1) & mask) {
      if (slots_[s] == kNone) {
        slots_[s] = i;
        ++count_;
        return kNone;
      }
      if (buffers_[slots_[s]].id == id) return slots_[s];
    }
  }

 private:
  // At most half the slots used: probes stay short.
  void resize_for(size_t entries) {
    size_t slots = 16;
    while (slots < 2 * entries) slots *= 2;
    if (slots <= slots_.size()) return;
    std::vector<size_t> old = std::move(slots_);
    slots_.assign(slots, kNone);
    const size_t mask = slots - 1;
    for (size_t i : old) {
      if (i == kNone) continue;
      size_t s = std::hash<std::string_view>{}(buffers_[i].id) & mask;
      while (slots_[s] != kNone) s = (s + 1) & mask;
      slots_[s] = i;
    }
  }

  const std::vector<BufferRequest>& buffers_;
  std::vector<size_t> slots_;
  size_t count_ = 0;
};

}  // namespace carve::planner::detail
