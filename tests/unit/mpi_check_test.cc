// MPI_CHECK turns an MPI error code into tpserve::Error naming the call and MPI's message.
#include <gtest/gtest.h>

#include "common/mpi_check.h"

namespace tpserve {
namespace {

// MPI_Error_string needs MPI initialised (a singleton run, no mpirun needed).
class MpiEnvironment : public testing::Environment {
 public:
  void SetUp() override { MPI_Init(nullptr, nullptr); }
  void TearDown() override { MPI_Finalize(); }
};
[[maybe_unused]] testing::Environment* const kMpiEnv = testing::AddGlobalTestEnvironment(new MpiEnvironment);

TEST(ErrorMacros, MpiCheckNamesTheCallAndMpiError) {
  std::string msg = "<no exception>";
  try {
    MPI_CHECK(MPI_ERR_ARG);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("check failed: MPI_ERR_ARG"), std::string::npos) << msg;
  EXPECT_NE(msg.find(mpi_error_string(MPI_ERR_ARG)), std::string::npos) << msg;
  EXPECT_NO_THROW(MPI_CHECK(MPI_SUCCESS));
}

}  // namespace
}  // namespace tpserve
