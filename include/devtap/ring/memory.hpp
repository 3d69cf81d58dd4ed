#pragma once
/** Where a ring's words live. A device allocates its ring through `device::allocate_ring`. */
#include <devtap/ring/layout.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A ring and the views of it: the host reader's, and the producers' (device pointers for CUDA). */
struct ring_allocation {
  virtual ~ring_allocation() = default;
  ring_view host;
  ring_view producer;
  bool producers_wake_reader = true;  // false: the reader polls (CUDA producers cannot notify)
  bool host_can_produce = true;       // false: host threads cannot claim (the tail lives on the GPU)

  /** Bytes claimed so far (the tail): what `receiver::flush` waits for. Never launches device work. */
  virtual std::uint64_t claimed_position() const {
    return std::atomic_ref<std::uint64_t>(host.producer->tail).load(std::memory_order_acquire);
  }
};

/** A ring entirely in ordinary host memory: the cpu backend's, and the tests'. */
struct host_ring_allocation final : ring_allocation {
  explicit host_ring_allocation(std::uint64_t capacity) {
    producer_side_ = std::make_unique<ring_producer_side>();
    consumer_side_ = std::make_unique<ring_consumer_side>();
    data_ = static_cast<std::byte*>(::operator new(capacity, std::align_val_t{64}));
    std::memset(data_, 0, capacity);  // the protocol's invariant: free bytes are zero
    host = ring_view{producer_side_.get(), consumer_side_.get(), data_, capacity};
    producer = host;
  }
  ~host_ring_allocation() override { ::operator delete(data_, std::align_val_t{64}); }

private:
  std::unique_ptr<ring_producer_side> producer_side_;
  std::unique_ptr<ring_consumer_side> consumer_side_;
  std::byte* data_ = nullptr;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
