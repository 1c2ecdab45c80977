// Counter-based random numbers: a pure function of (seed, counter, index), so that any backend, any rank
// and any replay draws the same value. Used for Gumbel-max sampling (host and device share this code).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TPS_HOST_DEVICE __host__ __device__
#else
#define TPS_HOST_DEVICE
#endif

namespace tpserve {

TPS_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Uniform in the open interval (0, 1) with 53 random bits.
TPS_HOST_DEVICE inline double uniform_open01(uint64_t seed, uint64_t counter, uint64_t index) {
  const uint64_t h =
      mix64(mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ counter) + index * 0xd1b54a32d192ed03ull);
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace tpserve
