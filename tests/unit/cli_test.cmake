# The tpserve command line: --version, --help, --check-config on a good and a bad config, and what
# runtime.backend auto picks.
function(expect_run expected_rc must_contain)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL ${expected_rc})
    message(FATAL_ERROR "${ARGN}: exit ${rc}, expected ${expected_rc}\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${must_contain}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "${ARGN}: output lacks '${must_contain}':\n${out}\n${err}")
  endif()
endfunction()

expect_run(0 "tpserve 0." ${TPSERVE} --version)
expect_run(0 "--check-config" ${TPSERVE} --help)
expect_run(0 "preset: tiny" ${TPSERVE} --config ${SOURCE_DIR}/configs/tiny.yaml --check-config)
expect_run(0 "max_batch: 3" ${TPSERVE} --config ${SOURCE_DIR}/configs/tiny.yaml --set runtime.max_batch=3 --check-config)
expect_run(2 "runtime.max_batch: got '0'" ${TPSERVE} --config ${SOURCE_DIR}/configs/tiny.yaml --set runtime.max_batch=0 --check-config)
expect_run(2 "cannot open config file" ${TPSERVE} --config /nonexistent.yaml --check-config)
expect_run(2 "--config is required" ${TPSERVE} --check-config)
expect_run(2 "is a directory" ${TPSERVE} --config ${SOURCE_DIR}/configs --check-config)
# More TP ranks than processes: a config error on every rank, before any model is built.
expect_run(2 "tp must equal the number of processes" ${TPSERVE} --config ${SOURCE_DIR}/configs/tiny.yaml
           --set parallel.tp=2 --set runtime.backend=cpu generate --prompt-ids 1,2)

# runtime.backend auto (tiny.yaml's): CUDA in a CUDA build on a host where nvidia-smi lists a GPU (and
# CUDA_VISIBLE_DEVICES hides none of them all), else the CPU reference backend; either way the choice is
# logged and the model generates. (Run alone: on a GPU it claims gpu_memory_fraction of it.)
set(auto_choice "runtime.backend auto: the CPU reference backend")
if(HAVE_CUDA AND NOT "$ENV{CUDA_VISIBLE_DEVICES}" STREQUAL "")
  set(visible_ok TRUE)
elseif(HAVE_CUDA AND NOT DEFINED ENV{CUDA_VISIBLE_DEVICES})
  set(visible_ok TRUE)
endif()
if(visible_ok)
  execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE smi_rc OUTPUT_VARIABLE smi_out ERROR_QUIET)
  string(FIND "${smi_out}" "GPU " has_gpu)
  if(smi_rc EQUAL 0 AND NOT has_gpu EQUAL -1)
    set(auto_choice "runtime.backend auto: cuda")
  endif()
endif()
expect_run(0 "${auto_choice}" ${TPSERVE} --config ${SOURCE_DIR}/configs/tiny.yaml generate --prompt-ids 1,2,3
           --max-tokens 4 --ignore-eos)
