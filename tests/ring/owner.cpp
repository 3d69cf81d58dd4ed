// The owned claim (include/devtap/ring/owner.hpp): the first host thread to claim moves the tail
// with a plain store; another thread's first claim ends that, once, without losing or overlapping
// a claim; an owner's claim that fails leaves none under way; and a reader that sleeps is woken
// by an owner's commit (the membarrier stands in for the CAS's fence); a membarrier the kernel
// refuses later settles instead.
#include <devtap/ring/memory.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/ring/read.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <future>
#include <iterator>
#include <thread>
#include <vector>

#include <cerrno>
#include <cstddef>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace devtap::detail;

namespace {
std::uint64_t owner_word(const ring_view& ring) {
  return std::atomic_ref<std::uint64_t>(ring.producer->claim_owner).load(std::memory_order_acquire);
}

// Where this kernel (or a seccomp filter) offers no membarrier, no thread ever owns a ring.
bool expect_ownership() {
  if (!heavy_fence_available()) WARN("no membarrier here: no thread owns a ring");
  return heavy_fence_available();
}

// One record of `payload` bytes (at least 8) carrying (producer, sequence).
bool write_numbered(const ring_view& ring, std::uint32_t producer, std::uint32_t sequence, std::uint32_t payload = 8) {
  std::uint64_t pos;
  if (!try_claim<host_atomics>(ring, record_bytes(payload), pos)) return false;
  const std::uint32_t words[2] = {producer, sequence};
  std::memcpy(ring.payload_at(pos), words, sizeof words);
  commit<host_atomics>(ring, pos, 1, 0, payload);
  return true;
}

// Reads `expected` records from producers 0 and 1, each in its own order; false on anything else.
bool read_numbered(ring_reader& reader, std::uint64_t expected) {
  std::uint32_t next[2] = {0, 0};
  for (std::uint64_t seen = 0; seen < expected;) {
    const record_ref rec = reader.peek();
    if (rec.kind == record_kind::empty) {
      reader.publish();
      std::this_thread::yield();
      continue;
    }
    if (rec.kind == record_kind::malformed) return false;
    if (rec.kind == record_kind::data) {
      std::uint32_t words[2];
      std::memcpy(words, rec.payload, sizeof words);
      if (words[0] > 1 || words[1] != next[words[0]]) return false;
      ++next[words[0]];
      ++seen;
    }
    reader.release(rec);
  }
  reader.publish();
  return reader.peek().kind == record_kind::empty;
}
}  // namespace

TEST_CASE("owner: the first thread to claim owns the ring's claims; another thread's claim ends that for good") {
  host_ring_allocation mem(1024);
  const ring_view& ring = mem.producer;
  CHECK(owner_word(ring) == claim_unowned);
  REQUIRE(write_numbered(ring, 0, 0));
  // Where this kernel (or a seccomp filter) offers no membarrier, no thread ever owns a ring.
  CHECK(owner_word(ring) == (heavy_fence_available() ? this_thread_claim_token() : claim_shared));
  CHECK_FALSE(owner_claim_under_way(ring));
  std::thread([&] { REQUIRE(write_numbered(ring, 1, 0)); }).join();
  CHECK(owner_word(ring) == claim_shared);
  REQUIRE(write_numbered(ring, 0, 1));  // the former owner's claims are CASes now
  CHECK(owner_word(ring) == claim_shared);
  ring_reader reader(mem.host);
  CHECK(read_numbered(reader, 3));
}

TEST_CASE("owner: another thread's first claim waits for the owner's claim under way, then claims after it") {
  if (!expect_ownership()) return;
  host_ring_allocation mem(1024);
  const ring_view& ring = mem.producer;
  REQUIRE(write_numbered(ring, 0, 0));
  REQUIRE(begin_owner_claim(ring));  // the owner between its mark and its tail store, held there
  auto second = std::async(std::launch::async, [&] {
    std::uint64_t pos = 0;
    const bool claimed = try_claim<host_atomics>(ring, record_bytes(8), pos);
    return claimed ? pos : ~std::uint64_t{0};
  });
  CHECK(second.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  CHECK(owner_word(ring) == claim_switching);
  std::uint64_t pos = 0;
  REQUIRE(try_claim_tail<host_atomics, true>(ring, record_bytes(8), pos, false));  // the owner's plain store
  REQUIRE(second.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(second.get() == pos + record_bytes(8));  // after the owner's claim, not over it
  CHECK(owner_word(ring) == claim_shared);
}

TEST_CASE("owner: a second thread's first claim racing the owner's claims loses and overlaps none") {
  constexpr std::uint32_t each = 3000;
  for (int round = 0; round < 40; ++round) {
    host_ring_allocation mem(4096);  // small: claims wrap, pad and wait for space throughout
    const ring_view& ring = mem.producer;
    REQUIRE(write_numbered(ring, 0, 0));  // producer 0 owns the ring
    std::atomic<bool> go{false};
    auto produce = [&](std::uint32_t producer, std::uint32_t first) {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::uint32_t i = first; i < each; ++i) {
        const std::uint32_t payload = 8 + (i % 7) * 8;  // sizes that land the wrap anywhere
        while (!write_numbered(ring, producer, i, payload)) std::this_thread::yield();
      }
    };
    std::thread owner(produce, 0, 1);
    std::thread second([&] {
      // Start a little later each round: the switch meets the owner at another point of its claim.
      for (int k = 0; k < round * 50; ++k) std::this_thread::yield();
      produce(1, 0);
    });
    go.store(true, std::memory_order_release);
    ring_reader reader(mem.host);
    const bool in_order = read_numbered(reader, 2 * std::uint64_t{each});
    owner.join();
    second.join();
    INFO("round " << round);
    REQUIRE(in_order);
    CHECK(owner_word(ring) == claim_shared);
  }
}

TEST_CASE("owner: an owner's claim that finds the ring full leaves no claim under way, with padding or without") {
  host_ring_allocation mem(256);
  const ring_view& ring = mem.producer;
  ring_reader reader(mem.host);
  for (std::uint32_t i = 0; i < 4; ++i) REQUIRE(write_numbered(ring, 0, i, 40));  // 4 x 64 bytes: full
  std::uint64_t pos;
  CHECK_FALSE(try_claim<host_atomics>(ring, record_bytes(8), pos));
  CHECK_FALSE(owner_claim_under_way(ring));
  for (int i = 0; i < 2; ++i) reader.release(reader.peek());  // head 128
  reader.publish();
  // A tail at 256, offset 0... move it to offset 192 first: one record of 64 bytes after two freed.
  REQUIRE(write_numbered(ring, 0, 4, 40));  // tail 320 (offset 64); head 128: 64 bytes free
  for (int i = 0; i < 2; ++i) reader.release(reader.peek());  // head 256
  reader.publish();
  REQUIRE(write_numbered(ring, 0, 5, 40));  // tail 384 (offset 128)
  REQUIRE(write_numbered(ring, 0, 6, 40));  // tail 448 (offset 192); head 256: 64 bytes free
  // 200 bytes (above half the ring) at offset 192: its 64 bytes of padding are claimed alone, then
  // the record finds no room: the owner's claim ends with only the padding stored.
  CHECK_FALSE(try_claim<host_atomics>(ring, 200, pos));
  CHECK(std::atomic_ref<std::uint64_t>(ring.producer->tail).load() == 512);
  CHECK_FALSE(owner_claim_under_way(ring));
  if (heavy_fence_available()) CHECK(owner_word(ring) == this_thread_claim_token());
  // So another thread's first claim does not wait for a claim that is over.
  for (int i = 0; i < 3; ++i) reader.release(reader.peek());  // 4, 5, 6
  reader.publish();
  auto second = std::async(std::launch::async, [&] { return write_numbered(ring, 1, 0); });
  REQUIRE(second.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(second.get());
  CHECK(owner_word(ring) == claim_shared);
  CHECK(reader.peek().kind == record_kind::skip);  // the padding
  reader.release(reader.peek());
  const record_ref rec = reader.peek();
  REQUIRE(rec.kind == record_kind::data);
  std::uint32_t words[2];
  std::memcpy(words, rec.payload, sizeof words);
  CHECK(words[0] == 1);
}

TEST_CASE("owner: a reader that goes to sleep while the owner claims is woken by the commit") {
  // No lost wake: the owner commits one record at a time and waits for it to be read, sometimes
  // long enough for the reader to go to sleep first. A lost wake leaves a record unread.
  host_ring_allocation mem(4096);
  const ring_view& ring = mem.producer;
  REQUIRE(write_numbered(ring, 0, 0));  // this thread owns the ring (where membarrier works)
  std::atomic<std::uint32_t> read{0};
  std::atomic<bool> stop{false};
  std::thread reader_thread([&] {
    ring_reader reader(mem.host);
    for (;;) {
      const record_ref rec = reader.peek();
      if (rec.kind != record_kind::empty) {
        reader.release(rec);
        reader.publish();
        read.fetch_add(1, std::memory_order_release);
        continue;
      }
      if (stop.load(std::memory_order_acquire)) return;
      if (reader_sleep(ring, reader.position(), [&] { return stop.load(std::memory_order_seq_cst); }))
        std::this_thread::yield();  // claimed, not committed yet
    }
  });
  std::uint32_t lost_at = 0;
  for (std::uint32_t i = 1; i <= 3000 && lost_at == 0; ++i) {
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // the reader falls asleep
    REQUIRE(write_numbered(ring, 0, i));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (read.load(std::memory_order_acquire) < i + 1)
      if (std::chrono::steady_clock::now() > deadline) {
        lost_at = i;
        break;
      }
  }
  stop.store(true, std::memory_order_seq_cst);
  wake_reader(ring);
  reader_thread.join();
  CHECK(lost_at == 0);
}

namespace {
const ring_view* ring_for_handler = nullptr;

// Interrupts the thread that makes it with `handler` (SIGUSR1), every `pauses` spin pauses, until stop().
class signals_to_this_thread {
public:
  signals_to_this_thread(void (*handler)(int), int pauses) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    installed_ = sigaction(SIGUSR1, &action, &before_) == 0;
    if (installed_)
      signaller_ = std::thread([this, target = pthread_self(), pauses] {
        while (running_.load()) {
          pthread_kill(target, SIGUSR1);
          for (int k = 0; k < pauses; ++k) cpu_relax();
        }
      });
  }
  ~signals_to_this_thread() { stop(); }
  signals_to_this_thread(const signals_to_this_thread&) = delete;
  signals_to_this_thread& operator=(const signals_to_this_thread&) = delete;
  bool installed() const { return installed_; }
  void stop() {
    running_.store(false);
    if (signaller_.joinable()) signaller_.join();
    if (installed_) sigaction(SIGUSR1, &before_, nullptr);
    installed_ = false;
  }

private:
  struct sigaction before_ {};
  bool installed_ = false;
  std::atomic<bool> running_{true};
  std::thread signaller_;
};

// Whether `numbers`, in any order, are 0, 1, 2, ... each once.
bool dense_from_zero(std::vector<std::uint64_t> numbers) {
  std::sort(numbers.begin(), numbers.end());
  for (std::uint64_t k = 0; k < numbers.size(); ++k)
    if (numbers[k] != k) return false;
  return true;
}
std::atomic<std::uint32_t> handler_sequence{0};
void tap_from_handler(int) {  // producer 1: a signal handler on the owner's thread
  const std::uint32_t next = handler_sequence.load(std::memory_order_relaxed);
  if (write_numbered(*ring_for_handler, 1, next)) handler_sequence.store(next + 1, std::memory_order_relaxed);
}
}  // namespace

TEST_CASE("owner: a signal handler that interrupts the owner's claim and claims too is not overwritten") {
  // The owner's tail store is one instruction that stores only over the tail it read: a handler's
  // claim in between (the same thread, so the owner too) makes it claim again (hostile review).
  host_ring_allocation mem(1 << 16);
  const ring_view& ring = mem.producer;
  ring_for_handler = &ring;
  handler_sequence.store(0);
  std::atomic<bool> producing{true};
  signals_to_this_thread signals(tap_from_handler, 200);
  REQUIRE(signals.installed());
  std::atomic<bool> bad{false};
  std::atomic<std::uint64_t> read{0};
  std::thread reader_thread([&] {
    ring_reader reader(mem.host);
    std::uint32_t next[2] = {0, 0};
    while (producing.load() || reader.peek().kind != record_kind::empty) {
      const record_ref rec = reader.peek();
      if (rec.kind == record_kind::empty) {
        reader.publish();
        continue;
      }
      std::uint32_t words[2] = {2, 0};
      if (rec.kind == record_kind::data) std::memcpy(words, rec.payload, sizeof words);
      if (rec.kind == record_kind::malformed || (rec.kind == record_kind::data && (words[0] > 1 || words[1] != next[words[0]]++))) {
        bad.store(true);
        return;
      }
      reader.release(rec);
      read.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (std::uint32_t i = 0; i < 400000 && !bad.load(); ++i)
    while (!write_numbered(ring, 0, i) && !bad.load()) std::this_thread::yield();
  producing.store(false);
  signals.stop();
  reader_thread.join();
  INFO("records from the handler: " << handler_sequence.load());
  CHECK_FALSE(bad.load());
  CHECK(handler_sequence.load() > 0);
}

TEST_CASE("owner: in a child of fork(), a claim does not wait for an owner's claim the parent left under way") {
  if (!expect_ownership()) return;
  host_ring_allocation mem(1024);
  const ring_view& ring = mem.producer;
  std::atomic<int> step{0};
  std::thread owner([&] {
    REQUIRE(write_numbered(ring, 0, 0));  // this thread owns the ring
    REQUIRE(begin_owner_claim(ring));     // and is between its mark and its tail store
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
    std::uint64_t pos = 0;
    CHECK(try_claim_tail<host_atomics, true>(ring, record_bytes(8), pos, false));
  });
  while (step.load() != 1) std::this_thread::yield();
  const pid_t child = fork();
  if (child == 0) {  // the owner's thread does not exist here: its claim never ends (hostile review: a hang)
    alarm(10);
    std::uint64_t pos = 0;
    _exit(try_claim<host_atomics>(ring, record_bytes(8), pos) ? 0 : 1);
  }
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  step.store(2);
  owner.join();
}

TEST_CASE("owner: the owner's stamp numbers and another thread's first stamp: every number once") {
  // take_host_sequence: the owner counts with a plain store in a marked window, so a second
  // thread's first stamp must wait for it, or both take the same number (or one is lost).
  constexpr std::uint64_t each = 20000;
  for (int round = 0; round < 40; ++round) {
    host_ring_allocation mem(1024);
    const ring_view& ring = mem.producer;
    std::vector<std::uint64_t> owner_numbers, second_numbers;
    owner_numbers.reserve(each);
    second_numbers.reserve(each);
    std::atomic<bool> owned{false};
    std::thread owner([&] {
      owner_numbers.push_back(take_host_sequence(ring));  // the first stamp takes the unowned ring
      owned.store(true);
      while (owner_numbers.size() < each) owner_numbers.push_back(take_host_sequence(ring));
    });
    while (!owned.load()) std::this_thread::yield();
    for (int k = 0; k < round * 20; ++k) std::this_thread::yield();  // meet the owner elsewhere each round
    while (second_numbers.size() < each) second_numbers.push_back(take_host_sequence(ring));
    owner.join();
    INFO("round " << round);
    std::vector<std::uint64_t> all(owner_numbers);
    all.insert(all.end(), second_numbers.begin(), second_numbers.end());
    REQUIRE(dense_from_zero(all));
    CHECK(std::is_sorted(owner_numbers.begin(), owner_numbers.end()));
    CHECK(owner_word(ring) == claim_shared);
  }
}

TEST_CASE("owner: another thread's first stamp waits for the owner's count under way, then counts after it") {
  if (!expect_ownership()) return;
  host_ring_allocation mem(1024);
  const ring_view& ring = mem.producer;
  CHECK(take_host_sequence(ring) == 0);  // this thread owns the ring
  REQUIRE(begin_owner_claim(ring));      // and is inside a count's window, held there
  auto second = std::async(std::launch::async, [&] { return take_host_sequence(ring); });
  CHECK(second.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  std::atomic_ref<std::uint64_t>(ring.producer->taps).store(2, std::memory_order_relaxed);  // the owner's plain count: 1
  end_owner_claim(ring);
  REQUIRE(second.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(second.get() == 2);  // after the owner's number, not the same one
  CHECK(owner_word(ring) == claim_shared);
}

namespace {
std::atomic<std::uint64_t> stamps_in_handler{0};
std::uint64_t handler_numbers[1 << 16];
void stamp_from_handler(int) {  // a signal handler on the owner's thread takes stamp numbers too
  const std::uint64_t k = stamps_in_handler.load(std::memory_order_relaxed);
  if (k < std::size(handler_numbers)) {
    handler_numbers[k] = take_host_sequence(*ring_for_handler);
    stamps_in_handler.store(k + 1, std::memory_order_relaxed);
  }
}
}  // namespace

TEST_CASE("owner: a signal handler that takes stamp numbers on the owner's thread takes none twice") {
  if (!expect_ownership()) return;
  host_ring_allocation mem(1024);
  const ring_view& ring = mem.producer;
  ring_for_handler = &ring;
  stamps_in_handler.store(0);
  std::vector<std::uint64_t> numbers;
  numbers.reserve(1 << 21);
  numbers.push_back(take_host_sequence(ring));  // this thread owns the ring
  REQUIRE(owner_word(ring) == this_thread_claim_token());
  signals_to_this_thread signals(stamp_from_handler, 100);
  REQUIRE(signals.installed());
  while (numbers.size() < (1 << 21)) numbers.push_back(take_host_sequence(ring));
  signals.stop();
  const std::uint64_t from_handler = std::min<std::uint64_t>(stamps_in_handler.load(), std::size(handler_numbers));
  INFO("stamps from the handler: " << from_handler);
  CHECK(from_handler > 0);
  numbers.insert(numbers.end(), handler_numbers, handler_numbers + from_handler);
  CHECK(dense_from_zero(numbers));
  CHECK(owner_word(ring) == this_thread_claim_token());  // the handler is the owner's thread: no switch
}

namespace {
// What a signal handler on the owner's thread does in the cases below, when raise()d inside one of
// the owner's windows (a hostile review's cases: each broke the window protocol or hung).
enum class nested { stamp, claim, stamped_tap };
std::atomic<nested> nested_does{nested::stamp};
void nested_in_window(int) {
  const ring_view& ring = *ring_for_handler;
  if (nested_does.load() != nested::claim) (void)take_host_sequence(ring);
  std::uint64_t pos;
  if (nested_does.load() != nested::stamp && try_claim<host_atomics>(ring, record_bytes(16), pos))
    commit<host_atomics>(ring, pos, 1, 0, 16);
}
// Runs `handler` on this thread now, as SIGUSR1 (installed for this one signal); false if it cannot be installed.
bool raise_into(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  struct sigaction before {};
  if (sigaction(SIGUSR1, &action, &before) != 0) return false;
  raise(SIGUSR1);
  sigaction(SIGUSR1, &before, nullptr);
  return true;
}
// `mem`'s ring, owned by this thread (its first stamp), for nested_in_window doing `does`.
const ring_view& owned_for_handler(host_ring_allocation& mem, nested does) {
  ring_for_handler = &mem.producer;
  nested_does.store(does);
  REQUIRE(take_host_sequence(mem.producer) == 0);
  return mem.producer;
}
void hang_found(int) {
  static const char message[] = "owner.cpp: a handler on the owner's thread and a switching thread wait for each other\n";
  (void)!write(2, message, sizeof message - 1);
  _exit(3);
}
}  // namespace

TEST_CASE("owner: a signal handler's stamp or tap inside the owner's window leaves the window open") {
  if (!expect_ownership()) return;
  for (const nested does : {nested::stamp, nested::claim, nested::stamped_tap}) {
    INFO("the handler: " << static_cast<int>(does));
    host_ring_allocation mem(4096);
    const ring_view& ring = owned_for_handler(mem, does);
    REQUIRE(begin_owner_claim(ring));         // a claim or count of the owner's, after its look
    REQUIRE(raise_into(nested_in_window));  // the handler runs there, and its own window nests in it
    CHECK(owner_claim_under_way(ring));  // a handler's claim once closed it (the window was measured by the tail)
    auto second = std::async(std::launch::async, [&] {
      std::uint64_t pos = 0;
      return try_claim<host_atomics>(ring, record_bytes(8), pos) ? pos : ~std::uint64_t{0};
    });
    CHECK(second.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);  // it waits for the owner
    CHECK(owner_word(ring) == claim_switching);
    std::uint64_t pos = 0;
    REQUIRE(try_claim_tail<host_atomics, true>(ring, record_bytes(8), pos, false));  // the owner's plain claim
    REQUIRE(second.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK(second.get() == pos + record_bytes(8));
  }
}

TEST_CASE("owner: a signal handler's stamp or tap on the owner's thread while another thread switches does not hang") {
  if (!expect_ownership()) return;
  for (const nested does : {nested::stamp, nested::claim, nested::stamped_tap}) {
    INFO("the handler: " << static_cast<int>(does));
    host_ring_allocation mem(4096);
    const ring_view& ring = owned_for_handler(mem, does);
    REQUIRE(begin_owner_claim(ring));  // the owner's claim under way
    std::thread second([&] { (void)take_host_sequence(ring); });  // a first stamp elsewhere: switching, waits
    for (int k = 0; k < 2000 && owner_word(ring) != claim_switching; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(owner_word(ring) == claim_switching);
    signal(SIGALRM, hang_found);
    alarm(10);
    REQUIRE(raise_into(nested_in_window));  // the handler waited for the switch, which waited for the claim it interrupted
    alarm(0);
    std::uint64_t pos = 0;
    CHECK(try_claim_tail<host_atomics, true>(ring, record_bytes(8), pos, false));  // the interrupted claim goes on
    second.join();
    CHECK(owner_word(ring) == claim_shared);
  }
}

namespace {
// In a child: from here on every thread's membarrier fails with `error` (EPERM as under a seccomp
// filter a sandbox installs after devtap registered). False where seccomp is not offered.
bool refuse_membarrier(int error) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(error) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program) == 0;
}

// The child's half of the case below: 0 when it held, else the exit code of the check that failed.
int membarrier_refused_child() {  // exits at once on a failed check: threads may still run
  constexpr std::uint32_t each = 3000;
  alarm(60);
  host_ring_allocation owned(1024), raced(4096);
  if (!write_numbered(owned.producer, 0, 0)) _exit(10);  // this thread owns `owned`
  std::atomic<int> step{0};
  std::thread owner([&] {  // and this one `raced`, before the filter
    write_numbered(raced.producer, 0, 0);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
    for (std::uint32_t i = 1; i < each; ++i)
      while (!write_numbered(raced.producer, 0, i, 8 + (i % 7) * 8)) std::this_thread::yield();
  });
  while (step.load() != 1) std::this_thread::yield();
  if (owner_word(raced.producer) == claim_shared) _exit(11);
  if (!refuse_membarrier(EPERM)) _exit(2);
  if (heavy_fence_lost.load() != 0) _exit(12);

  // A reader's look at an owned ring: the refused fence settles, and the look sees the claim.
  const auto before = std::chrono::steady_clock::now();
  if (claimed_tail(owned.host) != record_bytes(8)) _exit(13);
  if (std::chrono::steady_clock::now() - before < std::chrono::nanoseconds(settle_fence_ns)) _exit(14);
  if (heavy_fence_lost.load() != EPERM) _exit(15);

  // A second thread's first claim ends an ownership while the owner claims: still none lost or overlapped.
  step.store(2);
  std::thread second([&] {
    for (std::uint32_t i = 0; i < each; ++i)
      while (!write_numbered(raced.producer, 1, i, 8 + (i % 5) * 8)) std::this_thread::yield();
  });
  ring_reader reader(raced.host);
  const bool in_order = read_numbered(reader, 2 * std::uint64_t{each});
  owner.join();
  second.join();
  if (!in_order) _exit(16);
  if (owner_word(raced.producer) != claim_shared) _exit(17);

  // No ring becomes owned any more, and a reader reports the loss once.
  host_ring_allocation later(1024);
  if (!write_numbered(later.producer, 0, 0) || owner_word(later.producer) != claim_shared) _exit(18);
  if (heavy_fence_lost_unreported() != EPERM || heavy_fence_lost_unreported() != 0) _exit(19);
  return 0;
}

// The half of the ENOMEM case below: each fence settles, and nothing is lost for good.
int membarrier_short_of_memory_child() {
  alarm(60);
  host_ring_allocation owned(1024);
  if (!write_numbered(owned.producer, 0, 0) || owner_word(owned.producer) == claim_shared) _exit(10);
  if (!refuse_membarrier(ENOMEM)) _exit(2);
  const auto before = std::chrono::steady_clock::now();
  if (claimed_tail(owned.host) != record_bytes(8)) _exit(11);
  if (std::chrono::steady_clock::now() - before < std::chrono::nanoseconds(settle_fence_ns)) _exit(12);
  if (heavy_fence_lost.load() != 0 || heavy_fence_lost_unreported() != 0) _exit(13);
  host_ring_allocation later(1024);  // rings are still owned
  if (!write_numbered(later.producer, 0, 0) || owner_word(later.producer) == claim_shared) _exit(14);
  return 0;
}

// Runs `child` in a forked child and checks its exit code: 0 held, 2 no seccomp here.
void in_child_without_membarrier(int (*child)()) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());  // the filter stays in the child
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) {
    WARN("no seccomp here: a refused membarrier cannot be tested");
    return;
  }
  INFO("the child's exit code names its failed check");
  CHECK(WEXITSTATUS(status) == 0);
}
}  // namespace

TEST_CASE("owner: a membarrier refused after registration settles instead, and no ring is owned from then on") {
  if (!expect_ownership()) return;
  in_child_without_membarrier(membarrier_refused_child);
}

TEST_CASE("owner: a membarrier short of memory settles that fence alone, and rings are still owned") {
  if (!expect_ownership()) return;
  in_child_without_membarrier(membarrier_short_of_memory_child);
}
