#include "parallel/mpi_session.h"

#include <mpi.h>

#include <exception>

#include "common/error.h"
#include "common/log.h"
#include "common/mpi_check.h"

namespace tpserve::parallel {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  // Only the main thread calls MPI (the HTTP threads hand requests to the engine loop on it).
  TPS_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI provides thread support level ", provided,
            ", below MPI_THREAD_FUNNELED (", MPI_THREAD_FUNNELED, ")");
  // Errors come back as codes that MPI_CHECK turns into exceptions, instead of MPI aborting silently.
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  set_log_rank(rank_);
}

MpiSession::~MpiSession() {
  // MPI_Finalize waits for the other ranks: during an exception main() calls MPI_Abort instead.
  if (mpi_active() && std::uncaught_exceptions() == 0) MPI_Finalize();
}

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

void abort_all_ranks(int code) {
  if (!mpi_active()) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace tpserve::parallel
