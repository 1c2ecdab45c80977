// The MPI communicator's collectives on random data against values computed locally from every rank's
// (reproducible) inputs; the topology checks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <random>

#include "common/error.h"
#include "parallel/mpi_communicator.h"
#include "parallel/topology.h"
#include "tests/parallel/mpi_test_env.h"

namespace tpserve::parallel {
namespace {

// Rank r's input: reproducible on every rank, so each can compute the expected result alone.
std::vector<float> input_of(int rank, size_t n, int salt) {
  std::mt19937 rng(1000 * salt + rank);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

TEST(MpiCommunicator, Collectives) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const int p = comm->size(), r = comm->rank();
  const size_t n = 1000 + 7;

  std::vector<float> sum = input_of(r, n, 1);
  comm->all_reduce_sum(sum.data(), n, DType::kF32);
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int k = 0; k < p; ++k) want += input_of(k, n, 1)[i];
    ASSERT_NEAR(sum[i], want, 1e-5f) << i;
  }

  std::vector<float> gathered(n * p);
  comm->all_gather(input_of(r, n, 2).data(), gathered.data(), n, DType::kF32);
  for (int k = 0; k < p; ++k)
    EXPECT_EQ(std::vector<float>(gathered.begin() + k * n, gathered.begin() + (k + 1) * n),
              input_of(k, n, 2));

  std::vector<float> scattered(n);
  comm->reduce_scatter_sum(input_of(r, n * p, 3).data(), scattered.data(), n, DType::kF32);
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int k = 0; k < p; ++k) want += input_of(k, n * p, 3)[r * n + i];
    ASSERT_NEAR(scattered[i], want, 1e-5f);
  }

  std::vector<float> exchanged(n * p);
  comm->all_to_all(input_of(r, n * p, 4).data(), exchanged.data(), n, DType::kF32);
  for (int k = 0; k < p; ++k) {
    const auto theirs = input_of(k, n * p, 4);
    EXPECT_EQ(std::vector<float>(exchanged.begin() + k * n, exchanged.begin() + (k + 1) * n),
              std::vector<float>(theirs.begin() + r * n, theirs.begin() + (r + 1) * n));
  }

  std::vector<int32_t> ids = {r, r, r};
  comm->broadcast(ids.data(), ids.size() * sizeof(int32_t), p - 1);
  EXPECT_EQ(ids, (std::vector<int32_t>{p - 1, p - 1, p - 1}));
  comm->barrier();
}

TEST(Topology, FromMpiAndChecks) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Topology t = discover_topology(size, size);
  EXPECT_EQ(t.world_size, size);
  EXPECT_EQ(t.local_size, size);  // one host
  EXPECT_EQ(t.num_hosts, 1);
  EXPECT_EQ(t.local_rank, t.world_rank);
  EXPECT_THROW(validate_topology(4, 2, 1), Error);
  EXPECT_THROW(validate_topology(4, 4, 2), Error);
  EXPECT_NO_THROW(validate_topology(4, 4, 1));
  try {
    validate_topology(2, 4, 1);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpserve::parallel
