// The CUDA backend's arena from runtime.gpu_memory_fraction (host arithmetic, no GPU needed): the fraction's
// share less what is in use, never so much that less than kOutsideArenaBytes stay free beside it, and a
// clear error naming the setting where nothing is left.
#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/backend/cuda/cuda_backend.h"

namespace tpserve {
namespace {

constexpr size_t kGiB = size_t(1) << 30;

std::string error_of(double fraction, size_t total, size_t free) {
  try {
    arena_bytes_for_fraction(fraction, total, free);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaArena, TheFractionsShareLessWhatIsInUse) {
  EXPECT_EQ(arena_bytes_for_fraction(0.9, 100 * kGiB, 99 * kGiB), 89 * kGiB);
  EXPECT_EQ(arena_bytes_for_fraction(0.5, 100 * kGiB, 80 * kGiB), 30 * kGiB);
}

TEST(CudaArena, KeepsRoomOutsideTheArena) {
  // A fraction of 1 (or near it) would take every free byte: graphs, NCCL and cuBLASLt then fail to allocate.
  EXPECT_EQ(arena_bytes_for_fraction(1.0, 100 * kGiB, 99 * kGiB), 99 * kGiB - kOutsideArenaBytes);
  EXPECT_EQ(arena_bytes_for_fraction(0.995, 100 * kGiB, 100 * kGiB), 99 * kGiB);
}

TEST(CudaArena, NothingLeftIsAnErrorNamingTheSetting) {
  EXPECT_NE(error_of(0.5, 100 * kGiB, 40 * kGiB).find("runtime.gpu_memory_fraction 0.5"), std::string::npos);
  EXPECT_NE(error_of(1.0, 100 * kGiB, kGiB / 2).find("kept outside the arena"), std::string::npos);
  EXPECT_NE(error_of(0.0, 100 * kGiB, 99 * kGiB).find("must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of(1.5, 100 * kGiB, 99 * kGiB).find("must be in (0, 1]"), std::string::npos);
}

}  // namespace
}  // namespace tpserve
