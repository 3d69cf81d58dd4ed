#pragma once
/** Forward declarations of devtap's public types, for headers that only name them. */
#include <devtap/config.hpp>

#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
class device;
class client;
class cpu_device;
class cpu_client;
class cpu_context;
class receiver;
class outfeed;
struct receiver_options;
struct receiver_stats;
struct device_stats;
struct shared_t;
enum class overflow_policy : std::uint32_t;
enum class log_level : int;
class backend_error;
class outfeed_error;
class tap_error;
class timeout_error;
template <class T> struct tap_point;
template <class Req, class Rep> struct call_point;
template <class Rep> class call_result;
class call_error;
template <class T> class consumer;
template <class T> class inbox;
template <class... Backends> class registry;
DEVTAP_END_NAMESPACE
