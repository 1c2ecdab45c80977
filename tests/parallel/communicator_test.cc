// The MPI communicator's collectives on random data against values computed locally from every rank's
// (reproducible) inputs; the topology checks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <ctime>
#include <random>
#include <thread>

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

// A rank waiting in a broadcast for a root that is busy elsewhere (a follower while the server is idle)
// sleeps rather than spinning: about a second of waiting costs it well under half a second of CPU
// (MPI_Bcast's own wait took all of it).
TEST(MpiCommunicator, AWaitingBroadcastDoesNotSpinACore) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  comm->barrier();
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  int value = comm->rank() == 0 ? 42 : 0;
  const double cpu_before = cpu_seconds();
  const auto wall_before = std::chrono::steady_clock::now();
  if (comm->rank() == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  comm->broadcast(&value, sizeof(value), 0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
  const double cpu = cpu_seconds() - cpu_before;
  EXPECT_EQ(value, 42);
  if (comm->rank() != 0) {
    EXPECT_GT(waited, 0.9);
    EXPECT_LT(cpu, 0.4 * waited) << "CPU seconds while waiting " << waited << " s";
  }
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
