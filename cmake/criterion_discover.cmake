# Lists the cases of a Criterion binary (`--list`) and writes one CTest test per case, so CTest
# names each failure. Run after each build of the binary (like gtest_discover_tests).
# cmake -DBIN=... -DOUT=... -DENV=... -P criterion_discover.cmake
#
# A filter that matches no case makes Criterion run nothing and exit 0, so each test also fails
# when the synthesis says nothing was tested. A case that skips itself (cr_skip_test) tests
# nothing either, but it ran: --verbose prints "[RUN ] suite::name" for it (and for no case the
# filter left out), so CTest reports it as skipped instead. tests/discover_check.cmake checks it.
#
# Criterion ignores the exit status LeakSanitizer gives a case's process, so under
# tools/test.sh --sanitize a sanitizer's report fails the test by its text.
set(sanitizer_reports "ERROR: LeakSanitizer;ERROR: AddressSanitizer;runtime error: ")
execute_process(COMMAND "${BIN}" --list OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BIN} --list failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${listing}")
string(REPLACE "|" ";" ENV "${ENV}")
set(out "")
set(suite "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_]+): [0-9]+ tests?$")
    set(suite "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^.+(──|--) ([A-Za-z0-9_]+)$" AND suite) # the tree in UTF-8 or ASCII, by locale
    set(name "${suite}/${CMAKE_MATCH_2}")
    set(shown "${suite}::${CMAKE_MATCH_2}") # as Criterion prints it
    string(APPEND out "add_test([=[${name}]=] [=[${BIN}]=] --filter [=[${name}]=] -j1 --verbose)\n")
    string(APPEND out "set_tests_properties([=[${name}]=] PROPERTIES ENVIRONMENT [=[${ENV}]=] TIMEOUT 600\n")
    string(APPEND out "  FAIL_REGULAR_EXPRESSION [=[Synthesis: Tested: 0 ;${sanitizer_reports}]=]\n")
    string(APPEND out "  SKIP_REGULAR_EXPRESSION [=[\\[RUN \\] ${shown}.*Synthesis: Tested: 0 ]=])\n")
  endif()
endforeach()
file(WRITE "${OUT}" "${out}")
