#pragma once
/** The exceptions devtap throws. None of them is thrown from a destructor. */
#include <devtap/config.hpp>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** A backend is unknown, failed to initialise, or provides no devices. */
class backend_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/** A tap could not be written: no receiver attached, record too large, `error` overflow policy, or closed. */
class outfeed_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/** One exception raised by a consumer, with where it happened. */
struct consumer_failure {
  std::string device;          ///< e.g. "cpu:1"
  std::string consumer;        ///< consumer name (or "#id")
  std::string message;         ///< what() of the exception, or "unknown exception"
  std::exception_ptr error;    ///< the exception itself
};

/** Thrown by `receiver::close()` when consumers threw or a device's stream was malformed: lists every failure. */
class tap_error : public std::runtime_error {
public:
  tap_error(std::string what, std::vector<consumer_failure> failures)
      : std::runtime_error(std::move(what)), failures_(std::move(failures)) {}
  const std::vector<consumer_failure>& failures() const noexcept { return failures_; }

private:
  std::vector<consumer_failure> failures_;
};

/** A close or flush did not finish within its timeout; names the devices that did not finish. */
class timeout_error : public std::runtime_error {
public:
  timeout_error(std::string what, std::vector<std::string> devices)
      : std::runtime_error(std::move(what)), devices_(std::move(devices)) {}
  const std::vector<std::string>& devices() const noexcept { return devices_; }

private:
  std::vector<std::string> devices_;
};

DEVTAP_END_NAMESPACE
