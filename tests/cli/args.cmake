# The `clattn` command's option parsing: every value is parsed strictly, a bad one is a usage
# error (exit 2) whose message names the option, and lists have no length limit. No case needs a
# device: a bad value is rejected before any context is created, and a good one is followed by
# --help, which stops the command before it runs anything (so a binary that wrongly accepts a
# bad value exits 0 here instead of running a benchmark).
# cmake -DCLATTN=... -P args.cmake (each failure is reported, then the script exits non-zero)
function(check rc out err want_rc needle what)
  if(NOT rc EQUAL want_rc)
    message(SEND_ERROR "clattn ${what}: exit ${rc}, want ${want_rc}\n${out}\n${err}")
  elseif(NOT "${needle}" STREQUAL "")
    string(FIND "${out}${err}" "${needle}" at)
    if(at EQUAL -1)
      message(SEND_ERROR "clattn ${what}: output lacks \"${needle}\"\n${out}\n${err}")
    else()
      message(STATUS "ok: clattn ${what}")
    endif()
  else()
    message(STATUS "ok: clattn ${what}")
  endif()
endfunction()
# expect(exit-status needle args...): runs clattn args... (each a non-empty argument).
function(expect want_rc needle)
  execute_process(COMMAND "${CLATTN}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  check("${rc}" "${out}" "${err}" ${want_rc} "${needle}" "${ARGN}")
endfunction()
# expect_empty(exit-status needle command option): clattn command option '' --help (CMake drops
# empty elements of a list, so the empty value is written out here).
function(expect_empty want_rc needle cmd opt)
  execute_process(COMMAND "${CLATTN}" "${cmd}" "${opt}" "" --help RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  check("${rc}" "${out}" "${err}" ${want_rc} "${needle}" "${cmd} ${opt} ''")
endfunction()

# Every command's help, on stdout with exit 0.
foreach(cmd run tune explain bench devices)
  expect(0 "usage: clattn ${cmd}" ${cmd} --help)
  expect(0 "usage: clattn ${cmd}" ${cmd} -h)
endforeach()
expect(0 "usage: clattn <command>" --help)
expect(2 "unknown command 'frobnicate'" frobnicate)
expect(2 "usage: clattn <command>")

# Sizes: decimal digits only (no space, sign or suffix), within size_t and the option's range.
expect(2 "--seqlen-q ' -5'" run --seqlen-q " -5" --help)
expect(2 "--seqlen-q '-5'" run --seqlen-q -5 --help)
expect(2 "--seqlen '+5'" run --seqlen +5 --help)
expect(2 "--seqlen '12x'" run --seqlen 12x --help)
expect(2 "--seqlen '5 '" run --seqlen "5 " --help)
expect(2 "--batch '18446744073709551616'" run --batch 18446744073709551616 --help)
expect(2 "--head-dim '0x40'" explain --head-dim 0x40 --help)
expect(2 "--warmup '100001'" run --warmup 100001 --help)
expect(2 "--repeat '0'" bench --repeat 0 --help)
expect(2 "--max-candidates '-1'" tune --max-candidates -1 --help)
expect(2 "--seqlen '0'" bench --seqlen 0 --help)
expect(0 "usage: clattn run" run --seqlen 007 --seqlen-kv=5 --help)
# Numbers: the whole value, finite, in range.
expect(2 "--scale '1e99'" run --scale 1e99 --help)
expect(2 "--scale 'nan'" run --scale nan --help)
expect(2 "--window '3'" run --window 3 --help)
expect(2 "--window '4,-2'" explain --window 4,-2 --help)
expect(2 "--window '4,5x'" run --window 4,5x --help)
expect(2 "--softcap '0'" bench --softcap 0 --help)
expect(2 "--scale '0.5x'" run --scale 0.5x --help)
expect(2 "--scale '0'" run --scale 0 --help)
expect(2 "--budget '5s'" tune --budget 5s --help)
expect(2 "--budget '-3'" tune --budget -3 --help)
expect(0 "usage: clattn run" run --scale -0.125 --help)
# Empty values are rejected, never read as a default.
foreach(cmd_opt run:--scale run:--seqlen run:--device run:--config run:--dtype tune:--db
        tune:--budget tune:--head-dims bench:--plot bench:--columns explain:--heads)
  string(REPLACE ":" ";" pair "${cmd_opt}")
  list(GET pair 0 cmd)
  list(GET pair 1 opt)
  expect_empty(2 "${opt} '': empty value" ${cmd} ${opt})
endforeach()
# Choices and lists.
expect(2 "--layout 'bsdh'" run --layout bsdh --help)
expect(2 "--algorithm 'fast'" run --algorithm fast --help)
expect(2 "--causal 'sometimes'" bench --causal sometimes --help)
expect(2 "--columns 'fused,bogus'" bench --columns fused,bogus --help)
expect(2 "--seqlen '64,,96'" bench --seqlen 64,,96 --help)
expect(2 "--seqlens '64,'" tune --seqlens 64, --help)
expect(2 "--causal-list '0,2'" tune --causal-list 0,2 --help)
expect(2 "--config 'forward_tiles/32/16/4/2/1/1/8x'" run --config forward_tiles/32/16/4/2/1/1/8x
       --help)
expect(2 "--config 'forward_tiles/-32/16/4/2/1/1'" run --config forward_tiles/-32/16/4/2/1/1 --help)
expect(0 "usage: clattn run" run --config forward_tiles/32/16/4/2/1/1/4 --help)
expect(0 "usage: clattn run" run --config backward_rows/16/32 --help)
# A list of any length (here 101 elements, 302 characters) is read whole: a bad last element is
# found, a good list is accepted.
string(REPEAT "64," 100 long)
expect(2 "'x'" tune --head-dims "${long}x" --help)
expect(0 "usage: clattn tune" tune --head-dims "${long}64" --help)
expect(2 "'x'" bench --seqlen "${long}x" --help)
expect(0 "usage: clattn bench" bench --seqlen "${long}64" --help)
# Options: unknown ones, missing values, values on flags, stray arguments.
expect(2 "unknown option '--bogus'" run --bogus)
expect(2 "unknown option '--bogus'" tune --bogus)
expect(2 "unknown option '--bogus'" bench --bogus)
expect(2 "unknown option '--bogus'" explain --bogus)
expect(2 "unknown option '--bogus'" devices --bogus)
expect(2 "--seqlen needs a value" run --seqlen)
expect(2 "--budget needs a value" tune --budget)
expect(2 "--plot needs a value" bench --plot)
expect(2 "--causal takes no value" run --causal=1 --help)
expect(2 "unexpected argument 'extra'" run extra --help)
expect(2 "unexpected argument 'extra'" devices extra)
expect(2 "--tokens and --hidden go together" bench --tokens 16384)
expect(2 "--seqlens-kv and --varlen are two layouts" bench --seqlens-kv --varlen)
expect(2 "--kv-cache 'dense'" run --kv-cache dense --help)
expect(2 "--page-size goes with --kv-cache paged" bench --kv-cache contiguous --page-size 8)
expect(2 "go with --kv-cache" bench --seqlen-q 4)
expect(2 "--kv-cache takes none of" bench --kv-cache paged --backward)
expect(2 "--page-size '512'" run --page-size 512 --help)
expect(2 "--cache-dtype 'i4'" run --cache-dtype i4 --help)
expect(2 "--kv-cache takes none of" run --kv-cache paged --backward)

