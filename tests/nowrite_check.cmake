# Runs test binaries with kernels that write nothing (a folder from cmake/broken_kernels.cmake
# with CONDITION 1, through CLATTN_KERNEL_DIR) and requires every correctness case to fail: a
# case that passes when no kernel writes its outputs cannot catch a kernel that is wrong.
#
# Which cases are correctness cases: all of them, unless the case's name says it checks
# something else. That is the rule below, so that a new correctness case is included without
# being listed anywhere:
#   bad_input, or a name ending in _rejected     validation: the call is refused
#   a name containing out_of_resources          an error path
#   a name beginning with reference_            the host reference alone, no kernel
# A case so named is run (it costs little) but its result is not checked.
#
# Each binary runs once with all its cases (-j1, Criterion forks one process per case); the
# results come from its TAP report, so that the whole check stays within a few minutes. After a
# case's first failing check its later checks pass without running (CLATTN_TEST_FAIL_FAST,
# tools/check.h): the case still fails by its own assertion, without the rest of its shapes.
# cmake -DBINS=<bin>|<bin>... -DKERNELS=<folder> -DWORK=<folder> -DENV=<a=b|c=d>
#       -P nowrite_check.cmake
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/criterion_cases.cmake)
set(not_correctness "^(bad_input|.*_rejected|.*out_of_resources.*|reference_.*)$")

if(NOT EXISTS "${KERNELS}/forward.cl")
  message(FATAL_ERROR "no kernel folder at ${KERNELS}")
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
string(REPLACE "|" ";" BINS "${BINS}")
string(REPLACE "|" ";" ENV "${ENV}")
set(problems "")
set(checked 0)
foreach(bin IN LISTS BINS)
  get_filename_component(base "${bin}" NAME)
  # The cases, as criterion_discover.cmake reads them, less those named as not correctness.
  criterion_cases("${bin}" all_cases)
  set(cases "")
  foreach(c IN LISTS all_cases)
    string(REGEX REPLACE "^.*::" "" name "${c}")
    if(NOT name MATCHES "${not_correctness}")
      list(APPEND cases "${c}")
    endif()
  endforeach()
  if(NOT cases)
    list(APPEND problems "${base}: no correctness case found")
    continue()
  endif()

  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${ENV} "CLATTN_KERNEL_DIR=${KERNELS}" CLATTN_TEST_FAIL_FAST=1
                          "${bin}" -j1 --tap=${WORK}/${base}.tap
                  OUTPUT_FILE "${WORK}/${base}.log" ERROR_FILE "${WORK}/${base}.log"
                  RESULT_VARIABLE rc)
  string(TIMESTAMP t1 "%s")
  math(EXPR seconds "${t1} - ${t0}")
  if(NOT EXISTS "${WORK}/${base}.tap")
    list(APPEND problems "${base}: no TAP report (exit ${rc}; see ${WORK}/${base}.log)")
    continue()
  endif()
  file(STRINGS "${WORK}/${base}.tap" results REGEX "^(not )?ok - ")
  set(failed 0)
  foreach(case IN LISTS cases)
    set(seen "")
    foreach(result IN LISTS results)
      if(result MATCHES "^(not )?ok - ${case}( |$)")
        set(seen "${result}")
        break()
      endif()
    endforeach()
    if(NOT seen)
      list(APPEND problems "${case}: did not run")
    elseif(NOT seen MATCHES "^not ok")
      list(APPEND problems "${case}: passed with kernels that write nothing (${seen})")
    else()
      math(EXPR failed "${failed} + 1")
    endif()
    math(EXPR checked "${checked} + 1")
  endforeach()
  list(LENGTH cases n)
  message(STATUS "${base}: ${failed} of ${n} correctness cases failed, as they should (${seconds} s)")
endforeach()

if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "with kernels that write nothing (${KERNELS}):\n  ${text}\n"
                      "Reports and logs: ${WORK}")
endif()
message(STATUS "all ${checked} correctness cases failed without kernels")
