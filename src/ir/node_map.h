// A map keyed by node pointers for one pass over a graph (ordering an
// evaluation, planning its fusion): open addressing in one array, so an
// insert allocates nothing (std::unordered_map allocates a list node per
// element, which was most of a small graph's host cost), and the first few
// dozen entries live inline, so a small graph allocates nothing at all.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace pyflame {

template <class V>
class NodeMap {
 public:
  NodeMap() = default;
  NodeMap(const NodeMap&) = delete;
  NodeMap& operator=(const NodeMap&) = delete;

  // The value of k, or null.
  V* find(const void* k) {
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (slots_[i].key == k) return &slots_[i].value;
      if (!slots_[i].key) return nullptr;
    }
  }
  const V* find(const void* k) const { return const_cast<NodeMap*>(this)->find(k); }
  bool contains(const void* k) const { return find(k) != nullptr; }
  // Inserts (k, v) unless k is present; the entry, and whether it is new.
  std::pair<V*, bool> insert(const void* k, V v) {
    if ((size_ + 1) * 4 > (mask_ + 1) * 3) grow();
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (slots_[i].key == k) return {&slots_[i].value, false};
      if (!slots_[i].key) {
        slots_[i] = {k, std::move(v)};
        ++size_;
        return {&slots_[i].value, true};
      }
    }
  }
  V& operator[](const void* k) { return *insert(k, V{}).first; }
  size_t size() const { return size_; }
  // Room for n entries without growing again (an empty map only).
  void reserve(size_t n) {
    size_t cap = mask_ + 1;
    while (n * 4 > cap * 3) cap *= 2;
    if (cap == mask_ + 1 || size_) return;
    heap_ = std::make_unique<Slot[]>(cap);
    slots_ = heap_.get();
    mask_ = cap - 1;
  }

 private:
  struct Slot {
    const void* key = nullptr;
    V value{};
  };
  static constexpr size_t kInline = 64;

  size_t slot(const void* k) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9E3779B97F4A7C15ull >> 32) & mask_;
  }
  void grow() {
    const size_t cap = (mask_ + 1) * 2;
    auto next = std::make_unique<Slot[]>(cap);
    Slot* old = slots_;
    const size_t old_cap = mask_ + 1;
    slots_ = next.get();
    mask_ = cap - 1;
    size_ = 0;
    for (size_t i = 0; i < old_cap; ++i) {
      if (old[i].key) insert(old[i].key, std::move(old[i].value));
    }
    heap_ = std::move(next);
  }

  Slot inline_[kInline];
  std::unique_ptr<Slot[]> heap_;
  Slot* slots_ = inline_;
  size_t mask_ = kInline - 1;
  size_t size_ = 0;
};

// A set of node pointers (NodeMap without values).
class NodeSet {
 public:
  bool insert(const void* k) { return map_.insert(k, Empty{}).second; }
  bool contains(const void* k) const { return map_.contains(k); }
  size_t size() const { return map_.size(); }

 private:
  struct Empty {};
  NodeMap<Empty> map_;
};

}  // namespace pyflame
