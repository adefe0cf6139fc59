# Checks that the CTest tests cmake/criterion_discover.cmake writes can fail for the right
# reason: one whose --filter matches no case (a renamed or deleted case, a typo) must fail, not
# pass on the zero tests Criterion ran; a case that passes must still pass.
# cmake -DDISCOVER=<criterion_discover.cmake> -DBIN=<a Criterion binary> -DCASE=<suite/name of
#       a case of BIN that passes> -DWORK=<folder> -DENV=<a=b|c=d> -P discover_check.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${CMAKE_COMMAND}" -DBIN=${BIN} -DOUT=${WORK}/tests.cmake "-DENV=${ENV}"
                        -P "${DISCOVER}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "discovery failed (${rc})")
endif()
file(READ "${WORK}/tests.cmake" tests)
string(FIND "${tests}" "--filter [=[${CASE}]=]" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${CASE} is not among the discovered tests:\n${tests}")
endif()
# The same test once more under another name, its filter naming a case that does not exist.
string(REGEX MATCH "add_test\\(\\[=\\[${CASE}\\]=\\][^\n]*\nset_tests_properties[^)]*\\)" one
             "${tests}")
string(REPLACE "[=[${CASE}]=]" "[=[${CASE}_no_such_case]=]" wrong "${one}")
file(WRITE "${WORK}/CTestTestfile.cmake" "${tests}\n${wrong}\n")

# ctest runs the CTestTestfile.cmake of its working folder.
set(names "${CASE}" "${CASE}_no_such_case")
set(expects pass fail)
foreach(name expect IN ZIP_LISTS names expects)
  execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" -R "^${name}$" --output-on-failure
                  WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT out MATCHES "100% tests passed|tests failed out of")
    message(FATAL_ERROR "ctest ran no test ${name}:\n${out}")
  endif()
  if(expect STREQUAL "pass" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} should pass:\n${out}")
  elseif(expect STREQUAL "fail" AND rc EQUAL 0)
    message(FATAL_ERROR "${name}, whose filter matches no case, passed:\n${out}")
  endif()
  message(STATUS "${name}: expected to ${expect}, and it did")
endforeach()
