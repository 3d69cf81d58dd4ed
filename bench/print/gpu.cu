// devtap::print against printf from a CUDA kernel (docs/print.md, issue 6; target: at least 10x
// printf's lines per second). One kernel, BLOCKS x THREADS threads, each printing LINES lines of
// the same content both ways:
//
//   printf          kernel + cudaDeviceSynchronize (which writes the FIFO out); the FIFO is made
//                   large enough to hold every line (by default it keeps 1 MB and drops the rest)
//   devtap kernel   kernel + cudaDeviceSynchronize: the time the device spends printing
//   devtap e2e      until the host has formatted and written every line (rx.flush())
//
// stdout is pointed at /dev/null while printf runs (it writes there at the sync point); devtap
// writes to a FILE on /dev/null. With printf's default FIFO, the same kernel's output is captured
// and its lines counted: how many printf loses, against devtap::print's none. That runs in a child
// process (this program with --printf-loss-only): CUDA refuses a new FIFO size once a kernel that
// calls printf has run, so one process cannot measure both. Exit 77 without a GPU (only then).
// The formatter: gpu_host.cpp.
#include <devtap/devtap.hpp>
#include <devtap/print.hpp>

#include <cuda_runtime.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void with_printf(int lines) {
  const unsigned b = blockIdx.x, t = threadIdx.x;
  for (int i = 0; i < lines; ++i)
    printf("block %u thread %u step %d loss %.4f tag %s\n", b, t, i, 1.0 / (i + 1 + t), "train");
}

__global__ void with_devtap(devtap::printer out, int lines) {
  const unsigned b = blockIdx.x, t = threadIdx.x;
  for (int i = 0; i < lines; ++i)
    devtap::print<"block {} thread {} step {} loss {:.4f} tag {}">(out, b, t, i, 1.0 / (i + 1 + t), "train");
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::fprintf(stderr, "devtap-bench-print-gpu: no usable GPU (%s): %s\n", gpu.reason.c_str(),
                 gpu.nothing_to_run_on() ? "skipped" : "FAILED");
    return gpu.nothing_to_run_on() ? 77 : 1;
  }
  unsigned blocks = 128, threads = 256;  // 262144 lines: 11 MB of printf output
  int lines = 8, reps = 3;
  bool loss_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      blocks = 64;
      lines = 2;
      reps = 1;
    } else if (a == "--blocks" && i + 1 < argc) {
      blocks = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (a == "--lines" && i + 1 < argc) {
      lines = std::atoi(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--printf-loss-only") {
      loss_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--smoke] [--blocks N] [--lines L] [--reps R] [--printf-loss-only]\n", argv[0]);
      return 2;
    }
  }
  devtap::set_log_level(devtap::log_level::warn);
  const double total = static_cast<double>(blocks) * threads * lines;

  // Lines printf keeps with its default FIFO (1 MB): the kernel's output goes to a temporary file,
  // whose lines are counted (the child process of the run below prints that count).
  std::uint64_t printf_kept = 0;
  if (loss_only) {
    std::FILE* capture = std::tmpfile();
    if (capture == nullptr) return 1;
    std::fflush(stdout);
    const int saved = dup(1);
    dup2(fileno(capture), 1);
    with_printf<<<blocks, threads>>>(lines);
    const bool printed = ok(cudaDeviceSynchronize(), "printf kernel (default FIFO)");
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
    if (!printed) return 1;
    std::fprintf(stderr, "printf with its default FIFO: done\n");  // progress on stderr: a hang shows where
    std::rewind(capture);
    for (int c; (c = std::fgetc(capture)) != EOF;) printf_kept += c == '\n';
    std::fclose(capture);
    std::printf("%llu\n", static_cast<unsigned long long>(printf_kept));
    return 0;
  }
  {
    std::string self = "'";  // argv[0] for the shell, single-quoted: a path with spaces or quotes stays one word
    for (const char* c = argv[0]; *c != '\0'; ++c) self += *c == '\'' ? std::string("'\\''") : std::string(1, *c);
    self += '\'';
    const std::string child = self + " --printf-loss-only --blocks " + std::to_string(blocks) +
                              " --lines " + std::to_string(lines);
    std::FILE* kept = popen(child.c_str(), "r");
    unsigned long long n = 0;
    const bool counted = kept != nullptr && std::fscanf(kept, "%llu", &n) == 1;
    if (kept == nullptr || pclose(kept) != 0 || !counted) {
      std::fprintf(stderr, "devtap-bench-print-gpu: the printf loss run (%s) failed\n", child.c_str());
      return 1;
    }
    printf_kept = n;
  }
  if (!ok(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, static_cast<std::size_t>(total) * 256 + (1u << 20)), "printf FIFO"))
    return 1;
  devtap::device* gpu = devtap::devices("cuda")[0];
  std::FILE* devnull = std::fopen("/dev/null", "w");
  if (devnull == nullptr) return 1;

  double printf_best = 0, kernel_best = 0, e2e_best = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up (module load, FIFO, pinned memory)
    // printf: its output goes to stdout at the sync point; stdout points at /dev/null meanwhile.
    std::fflush(stdout);
    const int saved = dup(1);
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, 1);
    double t0 = now_s();
    with_printf<<<blocks, threads>>>(lines);
    const bool printed = ok(cudaDeviceSynchronize(), "printf kernel");
    const double printf_s = now_s() - t0;
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(null_fd);
    if (!printed) return 1;
    std::fprintf(stderr, "round %d: printf %.3f s\n", r, printf_s);

    devtap::receiver rx({.devices = {gpu}, .budget_bytes = std::size_t{64} << 20, .name = "bench-print-gpu"});
    auto prints = devtap::attach_print(rx, {.sink = devnull});
    t0 = now_s();
    with_devtap<<<blocks, threads>>>(prints.on(rx.outfeed(*gpu)), lines);
    if (!ok(cudaDeviceSynchronize(), "devtap kernel")) return 1;
    const double kernel_s = now_s() - t0;
    rx.flush();
    const double e2e_s = now_s() - t0;
    rx.close();
    std::fprintf(stderr, "round %d: devtap::print kernel %.3f s, every line written %.3f s\n", r, kernel_s, e2e_s);
    if (prints.stats().lines != static_cast<std::uint64_t>(total)) {
      std::fprintf(stderr, "devtap::print wrote %llu lines, not %.0f\n", static_cast<unsigned long long>(prints.stats().lines),
                   total);
      return 1;
    }
    if (r == 0) continue;
    printf_best = std::max(printf_best, total / printf_s);
    kernel_best = std::max(kernel_best, total / kernel_s);
    e2e_best = std::max(e2e_best, total / e2e_s);
  }
  std::printf("devtap::print vs printf from one kernel: %u blocks x %u threads x %d lines = %.0f lines, best of %d\n\n",
              blocks, threads, lines, total, reps);
  std::printf("| path | lines/s | vs printf |\n|---|---:|---:|\n");
  std::printf("| printf (kernel + sync) | %.3e | 1.00 |\n", printf_best);
  std::printf("| devtap::print (kernel + sync) | %.3e | %.2f |\n", kernel_best, kernel_best / printf_best);
  std::printf("| devtap::print (until every line is written) | %.3e | %.2f |\n", e2e_best, e2e_best / printf_best);
  std::printf("\nlines lost from %.0f: printf with its default 1 MB FIFO %.0f (%.1f %%), devtap::print 0 (every line counted)\n",
              total, total - static_cast<double>(printf_kept), 100.0 * (total - static_cast<double>(printf_kept)) / total);
  std::fclose(devnull);
  return 0;
}
