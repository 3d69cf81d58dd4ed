#pragma once
// A file in the temporary directory for one test, named after the process and a tag, removed
// before and after it (tests of the trace file, the recording and scopes).
#include <filesystem>
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

}  // namespace devtap_test
