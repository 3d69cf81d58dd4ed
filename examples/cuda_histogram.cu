// Spans of data tapped from blocks into a host consumer that aggregates them.
//
//   cuda_histogram [--values N] [--as-test]
//
// The kernel walks tiles of a device array; for each tile one warp sends the tile's values as a
// `std::span<const float>` with devtap::warp_tap naming the whole warp (its lanes copy the record
// together), and each block sends a small summary with an ordinary tap. The host builds a histogram, moments and
// per-block totals from the spans while the kernel runs, and compares its histogram with the
// one the kernel counted itself. Without a GPU it says so and exits 0 (77 with --as-test).
#include <devtap/devtap.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace {

constexpr int bins = 64;          // over [0, 4): bin = floor(x * 16)
constexpr unsigned tile = 2048;   // values per span: 8 KiB records

struct block_summary {
  std::uint32_t block;
  std::uint32_t tiles;
  std::uint64_t values;
};

__host__ __device__ inline int bin_of(float x) {
  const int b = static_cast<int>(x * 16.0f);  // x * 2^4 is exact: host and device agree
  return b < 0 ? 0 : (b >= bins ? bins - 1 : b);
}

__device__ inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/** Sums of four uniforms in [0, 1): a bell over [0, 4). */
__global__ void generate(float* data, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const std::uint64_t a = mix(2 * i), b = mix(2 * i + 1);
    data[i] = static_cast<float>(a >> 40) * 0x1p-24f + static_cast<float>((a >> 16) & 0xffffff) * 0x1p-24f +
              static_cast<float>(b >> 40) * 0x1p-24f + static_cast<float>((b >> 16) & 0xffffff) * 0x1p-24f;
  }
}

__global__ void tap_tiles(devtap::outfeed out, devtap::tap_point<std::span<const float>> spans,
                          devtap::tap_point<block_summary> summaries, const float* data, std::size_t n,
                          unsigned long long* device_bins) {
  __shared__ unsigned local[bins];
  __shared__ unsigned tiles_here;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  if (threadIdx.x == 0) tiles_here = 0;
  __syncthreads();
  const unsigned warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const std::size_t tiles = (n + tile - 1) / tile;
  std::uint64_t values = 0;
  // Tiles go round the warps of the grid; each warp sends its tile as one record.
  for (std::size_t t = std::size_t{blockIdx.x} * warps + warp; t < tiles; t += std::size_t{gridDim.x} * warps) {
    const std::size_t begin = t * tile, count = n - begin < tile ? n - begin : tile;
    // Every lane of the warp runs this iteration (256-thread blocks, the loop depends on the warp
    // only), so the warp names itself: one record per tile, copied by all its lanes.
    devtap::warp_tap(0xffffffffu, out, spans, std::span<const float>(data + begin, count));
    for (std::size_t i = threadIdx.x % 32; i < count; i += 32) atomicAdd(&local[bin_of(data[begin + i])], 1u);
    if (threadIdx.x % 32 == 0) {
      atomicAdd(&tiles_here, 1u);
      values += count;
    }
  }
  if (threadIdx.x % 32 == 0 && values != 0) atomicAdd(&device_bins[bins], static_cast<unsigned long long>(values));
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&device_bins[b], static_cast<unsigned long long>(local[b]));
  if (threadIdx.x == 0) {
    std::uint64_t total = 0;
    for (int b = 0; b < bins; ++b) total += local[b];
    out.tap(summaries, block_summary{blockIdx.x, tiles_here, total});
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool as_test = false;
  std::size_t n = std::size_t{1} << 24;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--as-test") == 0) {
      as_test = true;
      n = std::size_t{1} << 22;
    } else if (std::strcmp(argv[i], "--values") == 0 && i + 1 < argc) {
      n = static_cast<std::size_t>(std::atoll(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--values N] [--as-test]\n", argv[0]);
      return 2;
    }
  }
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("cuda_histogram: no usable GPU (%s): nothing to aggregate here\n", gpu.reason.c_str());
    if (!gpu.nothing_to_run_on()) return 1;  // a driver is there and CUDA still fails: an error
    return as_test ? 77 : 0;
  }
  devtap::device& gpu = *devtap::devices("cuda")[0];

  float* data = nullptr;
  unsigned long long* device_bins = nullptr;  // bins, then the count of values
  if (cudaMalloc(&data, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&device_bins, (bins + 1) * sizeof(unsigned long long)) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(device_bins, 0, (bins + 1) * sizeof(unsigned long long));
  generate<<<512, 256>>>(data, n);

  // The consumer: one coroutine for the GPU, aggregating spans as they arrive.
  std::vector<std::uint64_t> host_bins(bins, 0);
  std::uint64_t values = 0, records = 0;
  double sum = 0, sum_sq = 0;
  float lo = INFINITY, hi = -INFINITY;
  std::uint64_t summary_values = 0, summary_tiles = 0, summaries = 0;

  devtap::receiver rx({.devices = {&gpu}, .budget_bytes = 32u << 20, .name = "cuda_histogram"});
  auto span_point = rx.attach<std::span<const float>>(
      [&](devtap::inbox<std::span<const float>> in) -> devtap::consumer<std::span<const float>> {
        while (auto s = co_await in.next()) {  // a view of the ring: valid until the next co_await
          ++records;
          for (const float x : *s) {
            ++host_bins[static_cast<std::size_t>(bin_of(x))];
            sum += x;
            sum_sq += static_cast<double>(x) * x;
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
          }
          values += s->size();
        }
      });
  auto summary_point = rx.attach<block_summary>([&](const block_summary& b) {
    ++summaries;
    summary_tiles += b.tiles;
    summary_values += b.values;
  });

  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  tap_tiles<<<2 * sms, 256>>>(rx.outfeed(gpu), span_point, summary_point, data, n, device_bins);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t synced = cudaDeviceSynchronize();
  try {
    rx.close();
  } catch (const std::exception& e) {
    std::printf("close: %s\n", e.what());
    return 1;
  }
  if (launched != cudaSuccess || synced != cudaSuccess) {
    std::printf("kernel failed: %s\n", cudaGetErrorString(launched != cudaSuccess ? launched : synced));
    return 1;
  }
  std::vector<unsigned long long> dev(bins + 1);
  cudaMemcpy(dev.data(), device_bins, dev.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  cudaFree(data);
  cudaFree(device_bins);

  const double mean = values ? sum / static_cast<double>(values) : 0.0;
  const double sd = values ? std::sqrt(sum_sq / static_cast<double>(values) - mean * mean) : 0.0;
  std::uint64_t peak = 1;
  for (auto c : host_bins) peak = c > peak ? c : peak;
  std::printf("%s: %zu values in %llu spans of up to %u (8 KiB records), %llu block summaries\n", gpu.name().c_str(), n,
              static_cast<unsigned long long>(records), tile, static_cast<unsigned long long>(summaries));
  for (int b = 0; b < bins; b += 2) {
    const std::uint64_t c = host_bins[b] + host_bins[b + 1];
    const int width = static_cast<int>(60.0 * static_cast<double>(c) / static_cast<double>(2 * peak));
    std::printf("%5.3f %-60.*s %llu\n", b / 16.0, width,
                "############################################################", static_cast<unsigned long long>(c));
  }
  std::printf("mean %.5f (expected 2), sd %.5f (expected %.5f), min %.5f, max %.5f\n", mean, sd, std::sqrt(4.0 / 12.0),
              lo, hi);

  bool ok = values == n && dev[bins] == n && summary_values == n && summary_tiles == (n + tile - 1) / tile;
  for (int b = 0; b < bins; ++b) ok = ok && host_bins[b] == dev[b];
  std::printf("%s\n", ok ? "host and device histograms agree; every value arrived once"
                         : "MISMATCH between the host's histogram and the device's");
  return ok ? 0 : 1;
}
