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
include(${CMAKE_CURRENT_LIST_DIR}/criterion_cases.cmake)
criterion_cases("${BIN}" cases)
string(REPLACE "|" ";" ENV "${ENV}")
set(out "")
foreach(shown IN LISTS cases) # suite::name, as Criterion prints it
  string(REPLACE "::" "/" name "${shown}")
  string(APPEND out "add_test([=[${name}]=] [=[${BIN}]=] --filter [=[${name}]=] -j1 --verbose)\n")
  string(APPEND out "set_tests_properties([=[${name}]=] PROPERTIES ENVIRONMENT [=[${ENV}]=] TIMEOUT 600\n")
  string(APPEND out "  FAIL_REGULAR_EXPRESSION [=[Synthesis: Tested: 0 ;${sanitizer_reports}]=]\n")
  string(APPEND out "  SKIP_REGULAR_EXPRESSION [=[\\[RUN \\] ${shown}.*Synthesis: Tested: 0 ]=])\n")
endforeach()
file(WRITE "${OUT}" "${out}")
