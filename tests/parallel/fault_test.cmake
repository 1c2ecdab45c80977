# An exception on any rank brings every rank down with the error printed, never a hang: runs
# `mpirun -np 2 tpserve generate` with a fault injected on rank RANK at step 2 and expects a non-zero exit,
# the message, and an end well within the timeout (ctest's TIMEOUT catches a hang).
set(ENV{TPSERVE_FAULT_INJECT} "rank:${RANK},step:2")
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} -np 2 --oversubscribe --bind-to none ${TPSERVE} --config ${SOURCE_DIR}/configs/tiny.yaml
          --set parallel.tp=2 --set runtime.backend=cpu generate --prompt-ids 1,2,3 --max-tokens 8 --ignore-eos
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
string(TIMESTAMP end "%s")
math(EXPR elapsed "${end} - ${start}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job succeeded although rank ${RANK} threw:\n${out}\n${err}")
endif()
string(FIND "${err}" "injected fault (TPSERVE_FAULT_INJECT) on rank ${RANK}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "the error was not printed (rc ${rc}):\n${out}\n${err}")
endif()
if(elapsed GREATER 30)
  message(FATAL_ERROR "the job took ${elapsed} s to stop after the fault")
endif()
message(STATUS "rank ${RANK} fault: every rank stopped in ${elapsed} s with exit ${rc}")
