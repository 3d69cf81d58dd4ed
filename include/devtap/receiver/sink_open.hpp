#pragma once
/** How a trace or record file is opened and let go (sink_file, record_sink.hpp): the locks that
 *  refuse a second writer, a FIFO without a reader, and this process's own stdout and stderr (internal). */
#include <devtap/config.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <ctime>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A sink's open descriptor and what it is. */
struct sink_descriptor {
  int fd = -1;  // 3 or above: never the slot of a closed stdout or stderr, which the program's output would reach
  bool regular = false;   // a regular file: writes never block, never raise SIGPIPE
  bool own_file = false;  // a regular file opened here: locked, and emptied at start
  int standard = -1;      // STDOUT_FILENO or STDERR_FILENO where it is what that stream writes to (else -1)
  bool adopted = false;   // stdout's or stderr's regular file, written through that stream's open file
  bool shared_socket = false;  // stdout's or stderr's socket (no path reopens one): its flags are not ours to change
  bool registered = false;  // identity is in unlocked_sink_files(): no flock refuses its second writer
  std::pair<dev_t, ino_t> identity{};  // of a registered file
  std::string made;  // the file the open made (through a link: its target), removed if never started
  std::FILE* stream = nullptr;  // on fd
  bool from_first_byte = false;  // read from its first byte (a recording): see start_problem()
};

/** Why an adopted file cannot take a recording now ("" if it can): the recording's reader looks for
 *  its header at byte 0, so the file must hold nothing and its offset be 0. */
inline std::string start_problem(const sink_descriptor& d, const std::string& path) {
  struct ::stat info {};
  if (!d.adopted || !d.from_first_byte) return {};
  const bool fstat_ok = ::fstat(d.fd, &info) == 0;
  const auto at = ::lseek(d.fd, 0, SEEK_CUR);
  if (fstat_ok && info.st_size == 0 && at == 0) return {};
  return "'" + path + "' is the file this process's " + (d.standard == STDOUT_FILENO ? "stdout" : "stderr") +
         " writes to, which holds " + std::to_string(info.st_size) + " bytes already (its offset: " + std::to_string(at) +
         "): a recording must begin at the file's first byte";
}

/** The files this process's sinks write that no flock guards, one sink each: the regular files
 *  written through stdout or stderr (an flock cannot tell two writers of one open file apart, and
 *  would outlive a crash in the shell's), and pipes, FIFOs and sockets (where two writers' bytes
 *  interleave). Never destroyed (sinks close at exit). */
inline std::pair<std::mutex, std::set<std::pair<dev_t, ino_t>>>& unlocked_sink_files() {
  static auto* const files = new std::pair<std::mutex, std::set<std::pair<dev_t, ino_t>>>();
  return *files;
}

/** Registers `d`'s file as written by one sink of this process; false if another already writes it. */
inline bool register_sink_descriptor(sink_descriptor& d, const struct ::stat& info) {
  d.identity = {info.st_dev, info.st_ino};
  auto& [mutex, files] = unlocked_sink_files();
  std::lock_guard lock(mutex);
  d.registered = files.insert(d.identity).second;
  return d.registered;
}

/** Unregisters a file of unlocked_sink_files(), once its sink is done with it. */
inline void release_sink_descriptor(sink_descriptor& d) noexcept {
  if (!d.registered) return;
  d.registered = false;
  auto& [mutex, files] = unlocked_sink_files();
  std::lock_guard lock(mutex);
  files.erase(d.identity);
}

/** While alive, a write into a pipe or socket whose reader is gone fails with EPIPE on this thread
 *  (reported by close()) instead of killing the program with SIGPIPE: the signal is blocked, and the
 *  one such a write raised on this thread is taken back before the thread's mask is restored (none
 *  where the thread blocked SIGPIPE itself, or one was pending before: those stay as they were). */
class sigpipe_held {
public:
  explicit sigpipe_held(bool needed) noexcept {
    if (!needed || ::pthread_sigmask(SIG_BLOCK, &only_sigpipe(), &previous_) != 0) return;
    active_ = true;
    sigset_t pending;
    mine_to_take_ = ::sigismember(&previous_, SIGPIPE) != 1 && ::sigpending(&pending) == 0 &&
                    ::sigismember(&pending, SIGPIPE) != 1;
    errno = 0;  // a write below that fails leaves its own
  }
  ~sigpipe_held() {
    if (!active_) return;
    const int error = errno;  // the write's, for its message
    sigset_t pending;
    if (error == EPIPE && mine_to_take_ && ::sigpending(&pending) == 0 && ::sigismember(&pending, SIGPIPE) == 1) {
      const ::timespec now{};  // (the thread's own pending signal is taken before a process-wide one)
      while (::sigtimedwait(&only_sigpipe(), nullptr, &now) < 0 && errno == EINTR) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    errno = error;
  }
  sigpipe_held(const sigpipe_held&) = delete;
  sigpipe_held& operator=(const sigpipe_held&) = delete;

private:
  static const sigset_t& only_sigpipe() noexcept {
    static const sigset_t set = [] {
      sigset_t s;
      ::sigemptyset(&s);
      ::sigaddset(&s, SIGPIPE);
      return s;
    }();
    return set;
  }
  bool active_ = false;
  bool mine_to_take_ = false;
  sigset_t previous_{};
};

/** `fd` itself, or where it is 0, 1 or 2 (the place of a closed stdin, stdout or stderr, which
 *  the program's own reads or output would reach) a copy at 3 or above, the original closed.
 *  -1 with errno set where no descriptor is free (fd closed then too). Sinks and the recording's
 *  reader both open through it. */
inline int off_standard_streams(int fd) noexcept {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int error = errno;
  ::close(fd);
  errno = error;
  return moved;
}

/** Why `path` could not be opened for writing (errno `error`), with what the system's words mean
 *  where it is this process's stdout or stderr, or a FIFO. */
inline std::string open_problem(const std::string& path, int error, int standard) {
  std::string why = "cannot open '" + path + "' for writing: " + std::strerror(error);
  const char* const stream = standard == STDOUT_FILENO ? "stdout" : "stderr";
  struct ::stat info {};
  if (const int flags = standard >= 0 ? ::fcntl(standard, F_GETFL) : 0; flags < 0)
    why += std::string(" (this process's ") + stream + " is closed)";
  else if (standard >= 0 && (flags & O_ACCMODE) == O_RDONLY)
    why += std::string(" (this process's ") + stream + " is open for reading only)";
  else if (error == ENXIO && ::stat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode))
    why += " (a FIFO that no process has open for reading: start its reader first)";
  return why;
}

/** Opens `path` for a sink, or throws std::invalid_argument beginning with `where` (the option).
 *  Leaves the file as it is: start_file() empties it. `from_first_byte`: the file is read from its
 *  first byte (a recording), so stdout's or stderr's file that already holds output is refused. */
inline sink_descriptor open_sink_descriptor(const std::string& path, const std::string& where, bool from_first_byte) {
  // open() would stop at the NUL and write to a shorter path than the one named.
  if (const auto nul = path.find('\0'); nul != std::string::npos)
    throw std::invalid_argument(where + "the path '" + path.substr(0, nul) + "\\0...' holds a NUL byte (at " +
                                std::to_string(nul) + ")");
  sink_descriptor d;
  d.standard = path == "/dev/stdout" ? STDOUT_FILENO : path == "/dev/stderr" ? STDERR_FILENO : -1;
  // A regular file is locked before it is emptied: a second writer of it (another receiver, or
  // this one's other file option) is refused instead of truncating and interleaving into it. The
  // lock goes with the descriptor, at fclose. A device (/dev/null, a terminal) is shared as
  // before; a file system without flock (some cluster, FUSE or network mounts) goes unlocked.
  // O_NONBLOCK: a FIFO without a reader is refused (ENXIO) instead of waiting for one forever.
  // O_EXCL first: a file this sink makes is removed again if the receiver does not start.
  d.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0666);
  if (d.fd < 0 && errno == EEXIST) d.fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
  else if (d.fd >= 0) d.made = path;
  if (d.fd < 0 && errno == ENOENT) {  // a dangling link (or a file removed meanwhile): made through it
    d.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
    if (char* target = d.fd >= 0 ? ::realpath(path.c_str(), nullptr) : nullptr) {  // the link's target
      d.made = target;
      std::free(target);
    }
  }
  struct ::stat info {};
  if (d.fd < 0 && errno == ENXIO && d.standard >= 0) {  // no path opens a socket again: its descriptor, then
    const int error = errno;
    const int shared = ::fcntl(d.standard, F_DUPFD_CLOEXEC, 3);
    if (shared >= 0 && ::fstat(shared, &info) == 0 && S_ISSOCK(info.st_mode)) d.fd = shared, d.shared_socket = true;
    else if (shared >= 0) ::close(shared);
    errno = error;  // (else a FIFO without a reader: refused below)
  }
  if (d.fd < 0) throw std::invalid_argument(where + open_problem(path, errno, d.standard));
  if ((d.fd = off_standard_streams(d.fd)) < 0) {  // no descriptor above 2 is free
    const int error = errno;
    if (!d.made.empty()) ::unlink(d.made.c_str());
    throw std::invalid_argument(where + open_problem(path, error, d.standard));
  }
  const auto refuse = [&](bool locked_by_another, std::string why = {}) {
    const int error = errno;  // before anything else can change it
    if (!locked_by_another && !d.made.empty()) ::unlink(d.made.c_str());  // (else the other writer's now)
    release_sink_descriptor(d);
    ::close(d.fd);
    if (why.empty()) why = (locked_by_another ? "'" + path + "' is being written by another writer (a receiver's "
                                                             "trace or record file, this one's included): " +
                                                                 std::strerror(error)
                                              : open_problem(path, error, d.standard));
    throw std::invalid_argument(where + why);
  };
  if (::fstat(d.fd, &info) != 0) refuse(false);
  d.regular = S_ISREG(info.st_mode);
  // This process's stdout's or stderr's regular file (/dev/stdout, or the file `>` sent it to):
  // written through that stream's open file, at its offset, as the program's own output is (a
  // descriptor of our own would start at 0 and empty the file); neither emptied, nor locked, nor
  // made here; one sink at a time in this process.
  for (const int standard : {STDOUT_FILENO, STDERR_FILENO}) {  // (2>&1: stdout's, which must be flushed)
    struct ::stat standard_info {};
    if (!d.regular || d.adopted || ::fstat(standard, &standard_info) != 0 || standard_info.st_dev != info.st_dev ||
        standard_info.st_ino != info.st_ino)
      continue;
    const int shared = ::fcntl(standard, F_DUPFD_CLOEXEC, 3);
    if (shared < 0) refuse(false);
    ::close(d.fd);
    d = sink_descriptor{shared, true, false, standard, true, false, false, {}, {}, nullptr, from_first_byte};
    if (!register_sink_descriptor(d, info)) {
      errno = EWOULDBLOCK;
      refuse(true);
    }
    if (standard == STDOUT_FILENO) std::fflush(stdout);  // what the program printed comes first (and counts below)
    if (const std::string problem = start_problem(d, path); !problem.empty()) refuse(true, problem);
  }
  // A pipe, FIFO or socket is not locked (that is for regular files, below): one sink of this process at a time.
  if ((S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode)) && !register_sink_descriptor(d, info))
    refuse(true, "'" + path + "' is a pipe, FIFO or socket that another sink of this process writes (a receiver's trace "
                              "or record file, this one's included): their bytes would interleave");
  d.own_file = d.regular && !d.adopted;
  if (d.own_file && ::flock(d.fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) refuse(true);
  // Writes block again, as any file's (back-pressure from a pipe): only where this open set it.
  const int flags = d.adopted || d.shared_socket ? 0 : ::fcntl(d.fd, F_GETFL);
  if (flags < 0 || ((flags & O_NONBLOCK) != 0 && ::fcntl(d.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) refuse(false);
  // fdopen neither empties nor writes: all that can fail is done before the receiver attaches.
  if ((d.stream = ::fdopen(d.fd, "wb")) == nullptr) refuse(false);
  return d;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
