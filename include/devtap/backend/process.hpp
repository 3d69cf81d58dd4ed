#pragma once
/** This process's index and count among the processes of a launcher (MPI, PMI, Slurm). */
#include <devtap/config.hpp>
#include <devtap/detail/text.hpp>

#include <charconv>
#include <cstdlib>
#include <limits>
#include <string_view>

DEVTAP_BEGIN_NAMESPACE

/** Where this process stands among its launcher's processes; {0, 1} without a launcher. */
struct process_info {
  int index = 0;  ///< rank of this process, 0-based
  int count = 1;  ///< number of processes
};

namespace detail {

/** Reads the launcher variables through `getenv` (a `const char*(const char*)` callable), so tests
 * can feed their own. The first launcher whose rank variable is a valid number wins. */
template <class Getenv>
process_info process_info_from(Getenv&& getenv) {
  constexpr struct { const char* rank; const char* size; } launchers[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},  // Open MPI
      {"PMI_RANK", "PMI_SIZE"},                          // MPICH, Intel MPI, Slurm's PMI
      {"SLURM_PROCID", "SLURM_NTASKS"},                  // srun without MPI
  };
  for (const auto& l : launchers) {
    process_info info;
    // The largest int is no rank: the count that covers it would not fit.
    if (!parse_non_negative(getenv(l.rank), info.index) || info.index == std::numeric_limits<int>::max()) continue;
    int count = 0;
    // A missing or inconsistent size still has to cover our own index.
    info.count = parse_non_negative(getenv(l.size), count) && count > info.index ? count : info.index + 1;
    return info;
  }
  return {};
}

}  // namespace detail

/** This process's index and count, from the launcher's environment (read on every call). */
process_info current_process();

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/backend/process_impl.hpp>
#endif
