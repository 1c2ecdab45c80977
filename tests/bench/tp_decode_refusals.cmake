# tp_decode refuses, before any engine is built, what would make its numbers wrong or lost: a concurrency
# above an arm's max_batch, an output file it could not write at the end. Exit status 2 and a message.
function(expect_refused must_contain)
  execute_process(COMMAND ${COMMAND} --config ${SOURCE_DIR}/configs/tiny.yaml --set runtime.backend=cpu ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "${ARGN}: exit ${rc}, expected 2\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${must_contain}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "${ARGN}: no '${must_contain}' in:\n${out}\n${err}")
  endif()
endfunction()

expect_refused("--concurrency 10 is above arm base's runtime.max_batch 8" --concurrency 10)
expect_refused("is above arm b's runtime.max_batch 4" --concurrency 1,6 --arm a:runtime.max_batch=8
               --arm b:runtime.max_batch=4)
expect_refused("cannot write /nonexistent-tpserve/out.json: no folder" --concurrency 1
               --json /nonexistent-tpserve/out.json)
