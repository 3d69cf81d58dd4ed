#pragma once
/** Where a receiver's records go besides its consumers: the trace file (trace_writer.hpp) and the
 *  recording (recording.hpp) implement `record_sink`; each device's reader feeds them (internal). */
#include <devtap/config.hpp>
#include <devtap/receiver/sink_open.hpp>
#include <devtap/tap/tap_info.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

struct consumer_entry;

/** The id of a record no consumer has, in words ("unknown consumer id 7", "unknown handler id 7"),
 *  for the log, the trace and close()'s report alike. An id still carrying the stamp flag came from
 *  a producer that stamps, into a receiver without timestamps (dispatch leaves the flag): say so. */
inline std::string unknown_id_text(std::uint32_t id) {
  const std::string plain = std::to_string(id & ~(call_id_flag | stamped_id_flag));
  return ((id & call_id_flag) ? "unknown handler id " : "unknown consumer id ") + plain +
         ((id & stamped_id_flag) ? " (stamped, and this receiver takes no timestamps)" : "");
}

/** What a point's records are, so that a sink draws each kind its own way. */
enum class point_kind : std::uint32_t { tap = 1, call = 2, print = 3, scope = 4 };

/** Marks on a device's track that are not records. */
enum class marker_kind : std::uint32_t {
  dropped = 1,  // taps the device did not write (`drop` policy, a full ring): `count` of them
  lost = 2,     // records close() did not deliver (it gave up on the device)
  error = 3,    // a consumer threw, a record did not match its consumer, the stream failed
};

constexpr std::string_view marker_name(marker_kind k) noexcept {
  switch (k) {
    case marker_kind::dropped: return "dropped";
    case marker_kind::lost: return "lost";
    case marker_kind::error: return "error";
  }
  return "marker";
}

/** A point as a sink knows it: the id records carry (flags cleared), its name, type and kind. */
struct point_description {
  std::uint32_t id = 0;
  point_kind kind = point_kind::tap;
  std::uint64_t fingerprint = 0;
  std::string name;
};

/** One record as a sink receives it. `stamp.time_ns` is always set: the device's time when
 *  `stamp.stamped`, else when the reader read it. `point` is null for an id no consumer has. */
struct sink_record {
  std::size_t device = 0;
  std::uint32_t id = 0;           // without the stamp flag; calls keep theirs
  std::uint64_t fingerprint = 0;  // the record's own (a mismatched record differs from its point's)
  record_stamp stamp{};
  const std::byte* payload = nullptr;  // after the stamp
  std::size_t bytes = 0;
  std::uint64_t dropped = 0;  // the device's taps not written so far (`drop` policy, a full ring)
};

/** A receiver's record sink. `record` and `end` for a device come from that device's reader only
 *  (`end` is its last call); `marker` and `line` from it (`from_reader`) or from any other thread;
 *  `close` once the readers finished or were given up on. */
class record_sink {
public:
  virtual ~record_sink() = default;
  /** The receiver opened: empties the file and writes what was written before (its header). A sink
   *  destroyed without start() leaves the file as it found it (one it created is removed). */
  virtual void start() = 0;
  /** `entry` (null for an unknown id) describes the value; `point` is its description. True when
   *  the device's buffer is full: its reader then calls write_out(device) once it has handed in what
   *  merged consumers set aside (the write may block, and nothing it read may be hidden from the
   *  merge meanwhile). */
  [[nodiscard]] virtual bool record(const sink_record& rec, const point_description* point, const consumer_entry* entry) = 0;
  /** A text line a device printed (devtap::print), at `time_ns`. */
  virtual void line(std::size_t device, std::uint64_t time_ns, std::string_view text, bool from_reader) = 0;
  virtual void marker(std::size_t device, std::uint64_t time_ns, marker_kind kind, std::uint64_t count,
                      std::string_view text, bool from_reader) = 0;
  /** A point was attached (before any record of it can exist). */
  virtual void define(const point_description& point) = 0;
  /** A kernel's scope id gets a name (receiver::name_scope). */
  virtual void name_scope(std::uint32_t id, std::string_view name) = 0;
  /** The device's stream ended; `dropped`: its taps not written, in all. */
  virtual void end(std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) = 0;
  /** The device's reader, when flush() asks: writes what the device's buffer holds to the file and
   *  hands the file's buffer to the system. */
  virtual void write_out(std::size_t device) = 0;
  /** Writes what is buffered and closes the file; the first write error, as a message (empty: none).
   *  Writes into a pipe or a device wait until `pipe_deadline` at most (close()'s deadline).
   *  A reader's write that still holds the file at `give_up_at` (a pipe nobody reads) leaves the
   *  file as it is, without its end, closed when the sink goes; the message says so. */
  virtual std::string close(std::chrono::steady_clock::time_point give_up_at,
                            std::chrono::steady_clock::time_point pipe_deadline) = 0;
};

/** One device's buffer in a sink. Its reader appends to `own` without a lock (a lock per record
 *  cost 12 % of a 16 B stream); other threads add to a side buffer under a mutex, which the reader
 *  takes in before its next entry (`take_foreign`). Once the reader has `ended`, `own` is close()'s;
 *  a reader close() gave up on while it was stuck in a consumer keeps it (it is not written). */
template <class Buffer>
struct device_buffer {
  Buffer own;
  std::atomic<bool> ended{false};   // the reader's last call is done: release, paired with take_all's acquire
  std::atomic<bool> closed{false};  // close() took what it could: the reader adds nothing more

  void take_foreign() {  // the reader, before it appends
    if (!has_foreign_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(foreign_mutex_);
    own.insert(own.end(), foreign_.begin(), foreign_.end());
    foreign_.clear();
    has_foreign_.store(false, std::memory_order_relaxed);
  }
  template <class Fn>
  void add_foreign(Fn&& append) {  // any other thread
    std::lock_guard lock(foreign_mutex_);
    if (closed.load(std::memory_order_relaxed)) return;
    append(foreign_);
    has_foreign_.store(true, std::memory_order_release);
  }
  Buffer take_all(bool& reader_stuck) {  // close(): the reader's part if it has ended, then the others'
    Buffer out;
    reader_stuck = !ended.load(std::memory_order_acquire);
    if (!reader_stuck) out = std::move(own);
    std::lock_guard lock(foreign_mutex_);
    closed.store(true, std::memory_order_relaxed);
    out.insert(out.end(), foreign_.begin(), foreign_.end());
    foreign_ = Buffer{};
    return out;
  }

private:
  std::mutex foreign_mutex_;
  Buffer foreign_;
  std::atomic<bool> has_foreign_{false};
};

/** What the two file sinks share: the file and its first error, and one device_buffer per device.
 *  `Buffer` is what a device's reader appends to (text for the trace, 8-byte words for a recording). */
template <class Buffer>
class sink_file {
protected:
  struct track : device_buffer<Buffer> {
    std::uint64_t dropped = 0;  // taps not written, as far as markers told (the reader's)
  };

  /** Opens `path` for writing (open_sink_descriptor), or throws std::invalid_argument beginning with `where` (e.g.
   *  "devtap: receiver_options::trace_file: "); `what` names the file in later errors ("trace file").
   *  Leaves the file as it is until start_file(): a receiver that fails to open after this (a device
   *  already attached) must not have emptied it. */
  sink_file(const std::string& path, std::string_view what, std::string_view where, std::size_t devices, bool from_first_byte)
      : path_(path), what_(what), where_(where) {
    for (std::size_t i = 0; i < devices; ++i) tracks_.push_back(std::make_unique<track>());  // before the file: nothing to leak
    opened_ = open_sink_descriptor(path, where_, from_first_byte);
    file_ = opened_.stream;
  }
  ~sink_file() {
    if (!started_) discard_file();        // never started: as it was
    else if (file_ != nullptr) close_file();  // the sink's close() did not run
  }

  /** Empties the file and writes what was written before (the header), at once: a run that dies
   *  later leaves a file that names its devices and says where it was cut. */
  void start_file() {
    const auto lock = lock_file();
    if (started_ || file_ == nullptr) return;
    if (opened_.own_file && ::ftruncate(::fileno(file_), 0) != 0)  // (an I/O error: nothing else fails here)
      throw std::invalid_argument(where_ + "cannot empty '" + path_ + "': " + std::strerror(errno));
    if (opened_.adopted && opened_.standard == STDOUT_FILENO) std::fflush(stdout);  // what the program printed comes first
    if (const std::string problem = start_problem(opened_, path_); !problem.empty())  // (printed since the open)
      throw std::invalid_argument(where_ + problem);
    started_ = true;
    write_locked(before_start_.data(), before_start_.size());
    before_start_ = std::string();
    flush_locked();
  }

  /** A sink never started: closes the file as it found it (nothing was written to it), and
   *  removes it if this sink made it. */
  void discard_file() noexcept {
    if (started_ || file_ == nullptr) return;
    if (!opened_.made.empty()) ::unlink(opened_.made.c_str());
    close_file();
    closed_ = true;
  }

  /** The reader's track for `device`: null if unknown or closed; else with the foreign entries taken in. */
  track* reader_track(std::size_t device) {
    if (device >= tracks_.size()) return nullptr;
    track& t = *tracks_[device];
    if (t.closed.load(std::memory_order_relaxed) || t.ended.load(std::memory_order_relaxed)) return nullptr;
    t.take_foreign();
    return &t;
  }

  /** file_mutex_ held. After the first error, writes nothing more. */
  void write_locked(const void* data, std::size_t bytes) {
    if (file_ == nullptr || closed_ || left_.load(std::memory_order_relaxed) || !error_.empty() || bytes == 0) return;
    if (!started_) return (void)before_start_.append(static_cast<const char*>(data), bytes);  // until start_file()
    const sigpipe_held quiet(!opened_.regular);
    if (pipe_deadline_ != std::chrono::steady_clock::time_point::max()) return write_before_deadline(data, bytes);
    if (std::fwrite(data, 1, bytes, file_) != bytes)
      error_ = "writing " + what_ + " '" + path_ + "' failed: " + std::strerror(errno);
  }

  /** file_mutex_ held: hands what stdio buffers to the system (a crash of the process keeps it). */
  void flush_locked() {
    const sigpipe_held quiet(!opened_.regular);
    if (file_ != nullptr && started_ && !closed_ && !left_.load(std::memory_order_relaxed) && error_.empty() &&
        std::fflush(file_) != 0)
      error_ = "writing " + what_ + " '" + path_ + "' failed: " + std::strerror(errno);
  }

  /** close()'s first half: every device's buffer (`lost(buffer, device)` adds the marker that says
   *  what a reader stuck in a consumer still held is missing). Then lock file_mutex_ and write them. */
  template <class Lost>
  std::vector<Buffer> take_all_tracks(Lost lost) {
    std::vector<Buffer> out;
    for (std::size_t d = 0; d < tracks_.size(); ++d) {
      bool stuck = false;
      out.push_back(tracks_[d]->take_all(stuck));
      if (stuck) lost(out.back(), d);
    }
    return out;
  }

  /** close()'s lock on the file, taken by `give_up_at`; false when a reader's write still holds it
   *  (the file is then left, `left_message()` says why). After that, true with nothing to write. */
  bool lock_for_close(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point give_up_at,
                      std::chrono::steady_clock::time_point pipe_deadline) {
    if (!opened_.regular) give_up_at = std::min(give_up_at, pipe_deadline);  // another thread's write may be stuck in it
    lock = std::unique_lock(file_mutex_, std::defer_lock);
    close_waits_.store(true, std::memory_order_relaxed);  // a thread that writes all along lets it in (lock_file)
    if (give_up_at == std::chrono::steady_clock::time_point::max()) lock.lock();
    // Polled, not a timed mutex: TSan (clang 16) does not see pthread_mutex_clocklock take the lock.
    while (!lock.owns_lock() && !lock.try_lock() && std::chrono::steady_clock::now() < give_up_at)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    close_waits_.store(false, std::memory_order_relaxed);
    if (!lock.owns_lock()) left_.store(true, std::memory_order_relaxed);
    if (!opened_.regular && lock.owns_lock()) pipe_deadline_ = pipe_deadline;  // close()'s own writes below, bounded too
    return lock.owns_lock() && !left_.load(std::memory_order_relaxed);
  }
  std::string left_message() const {
    return "writing " + what_ + " '" + path_ + "' did not finish by close()'s deadline (a pipe nobody reads?): the "
           "file is left without its end";
  }

  /** close()'s writes into a pipe or device (file_mutex_ held): without blocking, each waited for
   *  with poll() until pipe_deadline_, so a pipe nobody reads any more does not hold close() for ever.
   *  stdio's buffer is empty here: every writer flushes before it lets go of the file. */
  void write_before_deadline(const void* data, std::size_t bytes) {
    const int fd = ::fileno(file_);
    // (stdout's socket: its open file is the program's too, whose flags stay as they are)
    if (const int flags = opened_.shared_socket ? -1 : ::fcntl(fd, F_GETFL); flags >= 0 && (flags & O_NONBLOCK) == 0)
      ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    const char* next = static_cast<const char*>(data);
    bool refused_when_ready = false;  // a device may say it has room and still refuse: no spinning on it
    while (bytes != 0) {
      const ssize_t written = opened_.shared_socket ? ::send(fd, next, bytes, MSG_DONTWAIT | MSG_NOSIGNAL) : ::write(fd, next, bytes);
      if (written > 0) {
        next += written;
        bytes -= static_cast<std::size_t>(written);
        continue;
      }
      if (written < 0 && errno == EINTR) continue;
      if (written < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        error_ = "writing " + what_ + " '" + path_ + "' failed: " + std::strerror(errno);
        return;
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(pipe_deadline_ - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        error_ = left_message();
        return;
      }
      if (refused_when_ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ::pollfd wait{fd, POLLOUT, 0};
      refused_when_ready = ::poll(&wait, 1, static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), 1000))) > 0;
    }
  }

  /** close()'s last step, file_mutex_ held: closes the file (once); the first error, as a message. */
  std::string close_locked() {
    if (!started_) discard_file();  // the receiver never opened: nothing to complete
    if (closed_ || file_ == nullptr) return error_;
    closed_ = true;
    if (close_file() != 0 && error_.empty()) error_ = "closing " + what_ + " '" + path_ + "' failed: " + std::strerror(errno);
    return error_;
  }
  int close_file() noexcept {
    const sigpipe_held quiet(!opened_.regular);  // (fflush writes what stdio still holds)
    // Let go between the last write and the close: before it, another sink could write in between;
    // after it, the file may be gone and its inode another file's by then, refused as taken.
    const bool flushed = std::fflush(file_) == 0;
    const int error = errno;
    release_sink_descriptor(opened_);
    const int result = std::fclose(file_);
    file_ = nullptr;
    if (flushed) return result;
    errno = error;  // the write's, for the message (and sigpipe_held)
    return EOF;
  }
  std::vector<std::unique_ptr<track>> tracks_;
  std::mutex file_mutex_;  // close() waits for it until a deadline (lock_for_close): not on a pipe nobody reads
  /** file_mutex_ for every writer but close(): std::mutex is not fair, and a thread that writes all
   *  along (name_scope in a loop) kept close() from it until its deadline. */
  std::unique_lock<std::mutex> lock_file() {
    while (close_waits_.load(std::memory_order_relaxed)) std::this_thread::yield();
    return std::unique_lock(file_mutex_);
  }
  std::atomic<bool> close_waits_{false};
  std::atomic<bool> left_{false};  // close() gave up on the file: it is closed as it is when the sink goes

private:
  std::FILE* file_ = nullptr;  // locked; emptied and written only from start_file() on
  bool started_ = false;
  sink_descriptor opened_;     // what the file is (own_file: locked, and emptied at start)
  // Set by close() for a pipe or device: its writes wait until then at most (write_before_deadline).
  std::chrono::steady_clock::time_point pipe_deadline_ = std::chrono::steady_clock::time_point::max();
  std::string before_start_;  // what was written before start_file() (the header)
  std::string path_;
  std::string what_;   // "trace file" or "record file"
  std::string where_;  // what the open's errors begin with: the option ("devtap: receiver_options::trace_file: ")
  std::string error_;  // the first write error (file_mutex_)
  bool closed_ = false;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
