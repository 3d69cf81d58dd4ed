// The one translation unit of devtap's compiled mode (Meson: -Dcompiled=true): the definitions of
// every *_impl.hpp, strong, plus the registries every program instantiates the same way. Programs
// then compile against declarations, with DEVTAP_COMPILED=1 (the `devtap` dependency passes it).
// Built with DEVTAP_WITH_CUDA=1 for the devtap-cuda library, without it for devtap. It also holds
// devtap::print's host formatter ({fmt}), so programs need not include print_host.hpp.
#define DEVTAP_BUILDING_LIBRARY 1
#include <devtap/devtap.hpp>
#include <devtap/print_host.hpp>

#include <devtap/backend/cpu_impl.hpp>
#include <devtap/backend/default_impl.hpp>
#include <devtap/backend/device_impl.hpp>
#include <devtap/backend/executor_impl.hpp>
#include <devtap/backend/process_impl.hpp>
#include <devtap/detail/text_impl.hpp>
#include <devtap/log_impl.hpp>
#include <devtap/receiver/options_impl.hpp>
#include <devtap/receiver/reader_impl.hpp>
#include <devtap/receiver/receiver_impl.hpp>
#include <devtap/receiver/recording_impl.hpp>
#include <devtap/receiver/recording_reader_impl.hpp>
#include <devtap/receiver/trace_writer_impl.hpp>
#include <devtap/replay_impl.hpp>
#include <devtap/receiver/report_impl.hpp>
#include <devtap/tap/outfeed_impl.hpp>
#if defined(DEVTAP_WITH_CUDA)
#include <devtap/backend/cuda_impl.hpp>
#include <devtap/cuda/ring_allocation_impl.hpp>
#endif

DEVTAP_BEGIN_NAMESPACE
template class registry<cpu_backend>;
#if defined(DEVTAP_WITH_CUDA)
template class registry<cpu_backend, cuda_backend>;
#endif
DEVTAP_END_NAMESPACE
