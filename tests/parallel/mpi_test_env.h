// For gtest binaries run under mpirun: MPI initialised before the tests and finalised after them, and the
// caller's world rank and size.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

namespace tpserve::testing_util {

class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { MPI_Init(nullptr, nullptr); }
  void TearDown() override { MPI_Finalize(); }
};
// One per binary: registered by the first translation unit that includes this header.
[[maybe_unused]] inline ::testing::Environment* const kMpiEnvironment =
    ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace tpserve::testing_util
