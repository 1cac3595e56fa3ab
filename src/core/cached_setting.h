// core/cached_setting.h — a process-wide enum setting read once: the first get() asks `read` (the
// host's default or an environment variable's value, which may throw a usage error) and keeps the
// answer; set() overrides it (tests and benchmarks compare the values). Thread-safe: concurrent
// first readers agree on one value.
#pragma once
#include <atomic>

namespace stretch {

template <class E>
class CachedSetting {
 public:
  template <class Read>
  E get(const Read& read) {
    int v = value_.load(std::memory_order_relaxed);
    if (v == kUnset) {
      v = static_cast<int>(read());
      int expected = kUnset;
      if (!value_.compare_exchange_strong(expected, v)) v = expected;
    }
    return static_cast<E>(v);
  }
  void set(E e) { value_.store(static_cast<int>(e)); }

 private:
  static constexpr int kUnset = -1;
  std::atomic<int> value_{kUnset};
};

}  // namespace stretch
