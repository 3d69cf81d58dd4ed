#pragma once
// A file in the temporary directory for one test, named after the process and a tag, removed
// before and after it (tests of the trace file, the recording and scopes); reading and writing one whole.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include <unistd.h>

namespace devtap_test {

struct temp_file {
  std::string path;
  explicit temp_file(const std::string& tag)
      : path((std::filesystem::temp_directory_path() / ("devtap-test-" + std::to_string(::getpid()) + "-" + tag)).string()) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
};

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/** In place (std::ios::trunc keeps the inode), as a receiver rewriting the path does. */
inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace devtap_test
