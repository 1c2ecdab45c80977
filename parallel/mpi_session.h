// MpiSession: MPI initialisation for the lifetime of a tpserve process, and the one way to bring every rank
// down after an error (MPI_Abort), so that no rank is ever left waiting in a collective.
#pragma once

namespace tpserve::parallel {

class MpiSession {
 public:
  // Initialises MPI (thread level MPI_THREAD_FUNNELED: one thread of each rank talks MPI) and sets the
  // log rank. Works under mpirun and as a singleton.
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// True when MPI_Init has run and MPI_Finalize has not.
bool mpi_active();
// Logs nothing; aborts every rank of MPI_COMM_WORLD with the code when MPI is active and the world has more
// than one rank, else returns so that the caller exits normally.
void abort_all_ranks(int code);

}  // namespace tpserve::parallel
