// Process index and count from the launcher's environment.
#include <devtap/backend/process.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <string>

namespace {

devtap::process_info from(const std::map<std::string, std::string>& env) {
  return devtap::detail::process_info_from([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("no launcher: process 0 of 1", "[process]") {
  const auto p = from({});
  CHECK(p.index == 0);
  CHECK(p.count == 1);
}

TEST_CASE("each launcher's variables are read", "[process]") {
  auto p = from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}});
  CHECK((p.index == 3 && p.count == 8));
  p = from({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  CHECK((p.index == 1 && p.count == 2));
  p = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}});
  CHECK((p.index == 5 && p.count == 6));
}

TEST_CASE("Open MPI wins over PMI, PMI over Slurm", "[process]") {
  auto p = from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"PMI_RANK", "2"}, {"PMI_SIZE", "4"},
                 {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  CHECK(p.index == 3);
  p = from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"PMI_RANK", "2"}, {"PMI_SIZE", "4"}});
  CHECK(p.index == 2);
}

TEST_CASE("malformed values are ignored, a missing or small size covers the index", "[process]") {
  auto p = from({{"OMPI_COMM_WORLD_RANK", "x"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}});
  CHECK((p.index == 2 && p.count == 4));
  p = from({{"PMI_RANK", "-1"}});
  CHECK((p.index == 0 && p.count == 1));
  p = from({{"OMPI_COMM_WORLD_RANK", "-0"}, {"PMI_RANK", "3"}, {"PMI_SIZE", "4"}});  // a sign: malformed, even on 0
  CHECK((p.index == 3 && p.count == 4));
  p = from({{"PMI_RANK", "7"}});
  CHECK((p.index == 7 && p.count == 8));
  p = from({{"PMI_RANK", "7"}, {"PMI_SIZE", "2"}});
  CHECK((p.index == 7 && p.count == 8));
  p = from({{"PMI_RANK", "4x"}});
  CHECK((p.index == 0 && p.count == 1));
  p = from({{"PMI_RANK", " 4\n"}});  // white space around a number is no malformation
  CHECK((p.index == 4 && p.count == 5));
  p = from({{"PMI_RANK", "2147483647"}, {"SLURM_PROCID", "3"}});  // its count would overflow: the next launcher's
  CHECK((p.index == 3 && p.count == 4));
  p = from({{"OMPI_COMM_WORLD_RANK", "2147483646"}});
  CHECK((p.index == 2147483646 && p.count == 2147483647));
}
