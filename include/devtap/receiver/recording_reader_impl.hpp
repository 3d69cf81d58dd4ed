#pragma once
// The definitions of the recording's reader (declared in recording.hpp): included by that header
// when header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/receiver/recording.hpp>
#include <devtap/receiver/sink_open.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/tap_info.hpp>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// ---- the reader -------------------------------------------------------------------------------

// Reads fixed-size fields and strings from a span of 8-byte words, each check naming what is short.
struct word_reader {
  const std::byte* data;
  std::size_t size;
  std::size_t at = 0;
  bool ok = true;
  template <class T>
  T get() {
    T v{};
    if (!ok || size - at < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, data + at, sizeof v);
    at += sizeof v;
    return v;
  }
  void align() { at = at + 7 < size ? (at + 7) / 8 * 8 : size; }
  std::string_view bytes(std::size_t n) {
    if (!ok || size - at < n) {
      ok = false;
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(data + at), n);
    at += n;
    return s;
  }
  std::string_view str() {  // as word_appender::str wrote it
    const auto length = get<std::uint32_t>();
    const std::string_view s = bytes(length);
    align();
    return s;
  }
};

DEVTAP_FUNC recording_reader::recording_reader(std::string path) : path_(std::move(path)) {
  if (const auto nul = path_.find('\0'); nul != std::string::npos)  // open() would read a shorter path
    throw std::runtime_error("devtap: cannot open recording '" + path_.substr(0, nul) + "\\0...': the path holds a NUL byte (at " +
                             std::to_string(nul) + ")");
  // O_NONBLOCK: a FIFO is refused below instead of waiting for a writer forever.
  const int fd = off_standard_streams(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) throw std::runtime_error("devtap: cannot open recording '" + path_ + "': " + std::strerror(errno));
  struct ::stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || (file_ = ::fdopen(fd, "rb")) == nullptr) {
    const int error = errno;
    ::close(fd);
    throw std::runtime_error("devtap: cannot read recording '" + path_ + "': " +
                             (S_ISDIR(info.st_mode) ? std::string("it is a directory")
                              : info.st_mode != 0 && !S_ISREG(info.st_mode)
                                  ? std::string("not a regular file (a pipe or a device)")
                                  : std::string(std::strerror(error))));
  }
  try {
    open_file();
  } catch (...) {  // the destructor does not run for a constructor that throws
    std::fclose(file_);
    file_ = nullptr;
    throw;
  }
}

DEVTAP_FUNC void recording_reader::open_file() {
  if (std::fseek(file_, 0, SEEK_END) != 0) throw std::runtime_error("devtap: recording '" + path_ + "' cannot be read: " + std::strerror(errno));
  file_bytes_ = static_cast<std::uint64_t>(std::ftell(file_));
  std::rewind(file_);
  // The header is read once, into the bytes rewind_entries() compares it with later: what is
  // parsed here is what is checked there.
  opened_header_.resize(32);
  char magic[8];
  std::uint32_t version_flags[2];
  std::uint64_t sizes[2];
  const std::size_t fixed_read = std::fread(opened_header_.data(), 1, 32, file_);
  std::memcpy(magic, opened_header_.data(), 8);
  std::memcpy(version_flags, opened_header_.data() + 8, 8);
  std::memcpy(sizes, opened_header_.data() + 16, 16);
  if (fixed_read < 8 || std::memcmp(magic, recording_magic, 8) != 0) {
    throw std::runtime_error("devtap: '" + path_ + "' is not a devtap recording (no recording header)");
  }
  if (fixed_read < 32) throw std::runtime_error("devtap: recording '" + path_ + "': truncated header");
  if (version_flags[0] == 0 || version_flags[0] > recording_version) {
    throw std::runtime_error("devtap: recording '" + path_ + "' has format version " + std::to_string(version_flags[0]) +
                             "; this devtap reads versions 1 to " + std::to_string(recording_version));
  }
  version_ = version_flags[0];
  timestamps_ = (version_flags[1] & recording_timestamps_flag) != 0;
  if (sizes[1] % 8 != 0 || sizes[1] > file_bytes_ - 32) {
    throw std::runtime_error("devtap: recording '" + path_ + "': truncated or damaged header");
  }
  origin_ns_ = sizes[0];
  entries_at_ = 32 + sizes[1];
  // The size was checked against the file's, but a sparse file holds any size in a few blocks.
  try {
    opened_header_.resize(entries_at_);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error("devtap: recording '" + path_ + "': a header of " + std::to_string(sizes[1]) +
                             " bytes, more than this process can hold in memory (a damaged or sparse file)");
  }
  if (std::fread(opened_header_.data() + 32, 1, sizes[1], file_) != sizes[1]) {
    throw std::runtime_error("devtap: recording '" + path_ + "': truncated header");
  }
  word_reader r{opened_header_.data() + 32, sizes[1]};
  receiver_name_ = std::string(r.str());
  const auto count = r.get<std::uint32_t>();
  r.align();
  // Each device costs the replay's consumers a stream (a coroutine frame each): a damaged or
  // hostile count must not turn a small file into gigabytes.
  if (count == 0) throw std::runtime_error("devtap: recording '" + path_ + "': damaged header (it names no device)");
  if (count > max_recorded_devices)
    throw std::runtime_error("devtap: recording '" + path_ + "': damaged header (it names " + std::to_string(count) +
                             " devices; at most " + std::to_string(max_recorded_devices) + " are read)");
  for (std::uint32_t i = 0; i < count && r.ok; ++i) {
    recorded_device d;
    d.id = static_cast<int>(r.get<std::uint32_t>());
    r.align();
    d.platform = std::string(r.str());
    d.name = std::string(r.str());
    devices_.push_back(std::move(d));
  }
  if (!r.ok) {
    throw std::runtime_error("devtap: recording '" + path_ + "': damaged header");
  }
  chunk_header h;
  // Every definition, up front: a consumer is attached by name before any record is read.
  std::fseek(file_, static_cast<long>(entries_at_), SEEK_SET);
  body_at_ = body_bytes_ = 0;
  read_.assign(devices_.size(), 0);
  bool ended = false;
  // Every chunk is read whole here, and every entry of it: damage is found before any record is delivered.
  while (next_chunk(h)) {
    word_reader b{reinterpret_cast<const std::byte*>(body_.data()), body_bytes_};
    if (ended) fail("a chunk after the recording's end chunk");
    // A definition's body is used exactly: a longer length would swallow the chunks after it.
    const auto used_whole = [&] {
      b.align();
      return b.ok && b.at == body_bytes_;
    };
    if (h.type == chunk_type::point) {
      point_description p;
      p.id = b.get<std::uint32_t>();
      p.kind = static_cast<point_kind>(b.get<std::uint32_t>());
      p.fingerprint = b.get<std::uint64_t>();
      p.name = std::string(b.str());
      if (!used_whole()) fail("damaged point definition");
      if (point_index_.emplace(p.id, points_.size()).second) points_.push_back(std::move(p));  // the first one counts
    } else if (h.type == chunk_type::scope_name) {
      const auto id = b.get<std::uint32_t>();
      b.align();
      const std::string_view name = b.str();
      if (!used_whole()) fail("damaged scope name");
      scope_names_[id] = std::string(name);
    } else if (h.type == chunk_type::end && version_ >= 2) {
      if (body_bytes_ != 0) fail("damaged end chunk");
      ended = true;
    } else if (h.type == chunk_type::records) {
      for (recorded_entry e; body_at_ < body_bytes_;) read_entry(e);  // (its points are defined before it)
    } else {
      fail("unknown chunk type " + std::to_string(static_cast<std::uint32_t>(h.type)));
    }
    kept_.push_back({chunk_offset_, h, kept_words_.size(), h.type == chunk_type::records ? body_digest() : 0});
    if (h.type != chunk_type::records)
      kept_words_.insert(kept_words_.end(), body_.begin(), body_.begin() + static_cast<std::ptrdiff_t>(body_bytes_ / 8));
  }
  // Part of a chunk after the end chunk is damage too, not a writer that stopped.
  if (ended && cut_at_ != 0) fail("bytes after the recording's end chunk");
  // Whole chunks and no end: the writer stopped between two chunks (version 1 has no end chunk).
  if (version_ >= 2 && !ended && cut_at_ == 0) cut_at_ = file_bytes_;
  body_bytes_ = body_at_ = 0;
  opened_ = true;
}

DEVTAP_FUNC recording_reader::~recording_reader() {
  if (file_ != nullptr) std::fclose(file_);
}

DEVTAP_FUNC void recording_reader::fail(const std::string& what) const {
  // Once opened, every chunk and entry had been read whole: what fails now was changed since.
  throw std::runtime_error("devtap: recording '" + path_ + "', chunk at byte " + std::to_string(chunk_offset_) + ": " +
                           (opened_ ? "the recording changed since it was opened (" + what + ")" : what));
}

DEVTAP_FUNC void recording_reader::changed() const {
  throw std::runtime_error("devtap: recording '" + path_ + "', chunk at byte " + std::to_string(chunk_offset_) +
                           ": the recording changed since it was opened (truncated, or rewritten by another receiver): "
                           "its records no longer match the definitions read then");
}

DEVTAP_FUNC const point_description* recording_reader::point(std::uint32_t id) const noexcept {
  const auto found = point_index_.find(id);  // (a tree: a hostile file may define a million points)
  return found == point_index_.end() ? nullptr : &points_[found->second];
}

DEVTAP_FUNC bool recording_reader::next_chunk(chunk_header& h) {
  chunk_offset_ = static_cast<std::uint64_t>(std::ftell(file_));
  // The end as open_file() saw it (a recording still being written grows meanwhile, and what it
  // gains has no definitions read for it), or where it found the file cut: what is there now was
  // never read whole and checked.
  if (chunk_offset_ >= file_bytes_ || (opened_ && cut_at_ != 0 && chunk_offset_ >= cut_at_)) {
    if (opened_ && (next_kept_ < kept_.size() || (cut_at_ != 0 && chunk_offset_ != cut_at_))) changed();
    return false;
  }
  h = chunk_header{};
  const std::uint64_t left = file_bytes_ - chunk_offset_;
  const std::size_t got = std::fread(&h, 1, sizeof h, file_);
  if (opened_ && got != sizeof h && left >= sizeof h) changed();  // bytes open() saw are gone: the file shrank
  if (got == sizeof h && h.body_bytes % 8 != 0) fail("damaged chunk header");
  // No writer makes a chunk of 1 TiB (it holds each in memory): such a length is damage (a flipped
  // high byte), not a writer that stopped, and must not hide the rest of the file as a cut would.
  if (got == sizeof h && h.body_bytes >= max_chunk_body_bytes)
    fail("a chunk of " + std::to_string(h.body_bytes) + " bytes, more than any writer makes (a damaged length)");
  // Before where open() found the file cut, every chunk was whole: one that now runs past it changed.
  if (opened_ && cut_at_ != 0 && got == sizeof h &&
      (cut_at_ - chunk_offset_ < sizeof h || h.body_bytes > cut_at_ - chunk_offset_ - sizeof h))
    changed();
  // A chunk the file does not hold whole: its writer stopped there (a crash). What came before is
  // the recording; checked before anything is allocated for the body.
  if (got != sizeof h || left < sizeof h || h.body_bytes > left - sizeof h) {
    // Open() stopped here too, and read every kept chunk before (none now skipped by a longer one).
    if (opened_ && (chunk_offset_ != cut_at_ || next_kept_ < kept_.size())) changed();
    cut_at_ = chunk_offset_;
    return false;
  }
  try {
    body_.resize(h.body_bytes / 8);
  } catch (const std::bad_alloc&) {  // checked against the file's size, which a sparse file fakes
    fail("a chunk of " + std::to_string(h.body_bytes) + " bytes, more than this process can hold in memory (a damaged or sparse file)");
  }
  if (std::fread(body_.data(), 1, h.body_bytes, file_) != h.body_bytes) {
    if (opened_) changed();
    fail("truncated chunk (the recording was cut short)");
  }
  if (h.type == chunk_type::records && h.device >= devices_.size()) fail("records of device " + std::to_string(h.device) + ", which the header does not name");
  body_bytes_ = h.body_bytes;
  body_at_ = 0;
  body_device_ = h.device;
  if (opened_) check_kept(h);
  return true;
}

DEVTAP_FUNC void recording_reader::check_kept(const chunk_header& h) {
  // Chunks are read in order, each where open() read one (none now spans another's place).
  if (next_kept_ >= kept_.size() || kept_[next_kept_].offset != chunk_offset_) changed();
  const kept_chunk& k = kept_[next_kept_++];
  if (k.header.type != h.type || k.header.device != h.device || k.header.body_bytes != h.body_bytes) changed();
  // Before any entry of it is handed over: records of another run in its place, or a body read
  // partly from stdio's buffer of the old file, are refused whole.
  if (h.type == chunk_type::records ? k.digest != body_digest()
                                    : h.body_bytes != 0 && std::memcmp(kept_words_.data() + k.words_at, body_.data(), h.body_bytes) != 0)
    changed();
}

DEVTAP_FUNC std::uint64_t recording_reader::body_digest() const noexcept {
  // FNV-1a over words, each word's high bits folded down: it tells a changed chunk from the one
  // open() read (not an adversary's forgery: the file is trusted that far).
  std::uint64_t digest = 0xcbf29ce484222325u;
  for (std::size_t i = 0; i < body_bytes_ / 8; ++i) {
    digest = (digest ^ body_[i]) * 0x100000001b3u;
    digest ^= digest >> 32;
  }
  return digest;
}

DEVTAP_FUNC void recording_reader::rewind_entries() {
  // A file shrunk since open() (truncated, or rewritten in place by another receiver) is refused
  // before any entry is handed over; one still being written only grows.
  struct ::stat info {};
  if (::fstat(::fileno(file_), &info) != 0)
    throw std::runtime_error("devtap: recording '" + path_ + "' cannot be read: " + std::strerror(errno));
  if (static_cast<std::uint64_t>(info.st_size) < file_bytes_)
    throw std::runtime_error("devtap: recording '" + path_ + "' changed since it was opened: it has " +
                             std::to_string(info.st_size) + " bytes, " + std::to_string(file_bytes_) + " when it was opened");
  // Another recording written at this path since (the program run again) starts with another
  // header (its origin at least): refused before any entry is handed over.
  // (pread, not stdio: a file that fits stdio's buffer would be compared with the buffer's old bytes)
  std::vector<std::byte> header(opened_header_.size());
  if (::pread(::fileno(file_), header.data(), header.size(), 0) != static_cast<::ssize_t>(header.size()) ||
      header != opened_header_)
    throw std::runtime_error("devtap: recording '" + path_ + "' changed since it was opened: its header differs "
                             "(another recording was written at this path)");
  std::fseek(file_, static_cast<long>(entries_at_), SEEK_SET);
  body_bytes_ = body_at_ = 0;
  next_kept_ = 0;
  read_.assign(devices_.size(), 0);
}

DEVTAP_FUNC bool recording_reader::next_entry(recorded_entry& e) {
  while (body_at_ >= body_bytes_) {
    chunk_header h;
    do {
      if (!next_chunk(h)) return false;
    } while (h.type != chunk_type::records);
  }
  read_entry(e);
  return true;
}

DEVTAP_FUNC void recording_reader::read_entry(recorded_entry& e) {
  word_reader r{reinterpret_cast<const std::byte*>(body_.data()), body_bytes_, body_at_};
  const auto word = r.get<std::uint32_t>();
  const auto bytes = r.get<std::uint32_t>();
  e = recorded_entry{};
  e.device = body_device_;
  if (word == recorded_marker_word) {
    e.stamp.time_ns = r.get<std::uint64_t>();
    const auto kind = r.get<std::uint32_t>();
    if (r.ok && kind == 0) fail("a marker of kind 0, which no writer makes (zeros where entries were: a damaged or sparse file)");
    e.is_line = kind == recorded_line_kind;
    e.is_marker = !e.is_line;
    e.marker = static_cast<marker_kind>(kind);
    r.get<std::uint32_t>();
    e.count = r.get<std::uint64_t>();
    e.text = r.bytes(bytes);
  } else {
    e.stamp.stamped = (word & stamped_id_flag) != 0;
    e.id = word & ~stamped_id_flag;
    e.unknown = version_ >= 3 && (bytes & recorded_unknown_flag) != 0;
    e.bytes = bytes & ~recorded_fingerprint_flag & (version_ >= 3 ? ~recorded_unknown_flag : ~std::uint32_t{0});
    if ((bytes & recorded_fingerprint_flag) != 0) {
      e.fingerprint = r.get<std::uint64_t>();
    } else {
      const point_description* p = point(e.id);
      if (p == nullptr) fail("a record of point " + std::to_string(e.id) + ", which no definition names");
      e.fingerprint = p->fingerprint;
    }
    e.stamp.time_ns = r.get<std::uint64_t>();
    e.stamp.sequence = e.stamp.stamped ? r.get<std::uint64_t>() : read_[e.device];
    ++read_[e.device];
    e.payload = reinterpret_cast<const std::byte*>(body_.data()) + r.at;  // 8-aligned: decodes in place
    r.bytes(e.bytes);
  }
  r.align();
  if (!r.ok) fail("truncated entry");
  body_at_ = r.at;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
