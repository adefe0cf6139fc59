# The `clattn` command end to end: devices, run, tune (writes the database; forward and
# backward classes), explain (reads it, origin "tuned"), bench (table, CSV, JSON, plot, bandwidth check, a standard column that runs out
# of memory), the standard algorithm, a corrupt database (warning, still works), usage errors (exit code 2).
# cmake -DCLATTN=... -DWORK=... -P check.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(ENV{CLATTN_CACHE_DIR} "${WORK}/cache")
set(ENV{CLATTN_TUNING_DB} "${WORK}/tuning.json")
function(expect want_rc needle)
  execute_process(COMMAND "${CLATTN}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL want_rc)
    message(FATAL_ERROR "clattn ${ARGN}: exit ${rc}, want ${want_rc}\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "clattn ${ARGN}: output lacks \"${needle}\"\n${out}\n${err}")
  endif()
  message(STATUS "ok: clattn ${ARGN}")
endfunction()
expect(0 "local memory" devices)
expect(0 "PASS" run --seqlen 100 --head-dim 16 --lse --repeat 2)
expect(0 "\"saved\": true" tune --head-dims 16 --causal-list 1 --seqlens 100 --budget 4 --json
       --quiet)
file(READ "${WORK}/tuning.json" db)
if(NOT db MATCHES "\"format\":[ \t]*\"clattn-tuning-db\"")
  message(FATAL_ERROR "tune did not write a tuning database:\n${db}")
endif()
expect(0 "origin:    tuned" explain --head-dim 16 --seqlen 100 --causal)
expect(0 "private" tune --head-dims 8 --causal-list 0 --seqlens 64 --budget 3 --quiet --verbose
       --dry-run)
expect(0 "already tuned" tune --head-dims 16 --causal-list 1 --seqlens 100 --budget 4 --quiet)
expect(0 "\"pass\": \"backward\"" tune --backward --head-dims 16 --causal-list 1 --seqlens 100
       --budget 6 --max-candidates 3 --json --quiet)
expect(0 "backward:  backward_rows" explain --head-dim 16 --seqlen 100 --causal)
expect(0 "(tuned)" explain --head-dim 16 --seqlen 100 --causal)
expect(0 "backward already tuned" tune --backward --head-dims 16 --causal-list 1 --seqlens 100
       --budget 4 --quiet)
file(WRITE "${WORK}/tuning.json" "{\"format\": \"clattn-tuning-db\", \"version\": 1, \"entries\": [")
expect(0 "not valid JSON" explain --head-dim 16 --seqlen 100 --causal)
expect(0 "PASS" run --seqlen 100 --head-dim 16 --causal --repeat 1)
expect(0 "PASS" run --algorithm standard --seqlen 100 --head-dim 16 --lse --repeat 1)
expect(0 "backward -> PASS" run --backward --seqlen-q 40 --seqlen-kv 70 --head-dim 12 --heads 2
       --heads-kv 1 --causal --repeat 1)
expect(0 "backward: backward_rows BQ=16 BKV=32 (override)" run --backward --seqlen 50 --head-dim 8
       --config backward_rows/16/32 --repeat 1)
expect(0 "traffic:" explain --head-dim 16 --seqlen 100 --causal)
expect(0 "x the fused plan" explain --head-dim 16 --seqlen 100)
expect(0 "at once (backward: " explain --head-dim 16 --seqlen 100)
expect(0 "fused vs:" bench --seqlen 64,96 --head-dim 8 --heads 2 --causal both --warmup 0
       --repeat 2)
expect(0 "forward + backward" bench --backward --seqlen 64 --head-dim 8 --heads 1 --repeat 1
       --columns fused,standard)
expect(0 "(override)" bench --seqlen 64 --head-dim 8 --heads 1 --repeat 1 --columns fused
       --config forward_rows/32/32/1/1/1/0)
expect(0 "fused: override rejected" bench --seqlen 64 --head-dim 8 --heads 1 --repeat 1
       --columns fused,standard --config forward_mma/64/32/1/1/1/1)
expect(0 "seqlen,head_dim,causal" bench --seqlen 64 --head-dim 8 --heads 1 --repeat 1 --csv)
expect(0 "\"standard\": {\"peak_bytes\"" bench --seqlen 64 --head-dim 8 --heads 1 --repeat 1
       --json --columns fused,standard)
expect(0 "bandwidth check: copy kernel" bench --seqlen 64 --head-dim 8 --heads 1 --repeat 1
       --bandwidth --columns fused,standard)
find_program(GNUPLOT gnuplot)
if(GNUPLOT)
  expect(0 "plot written" bench --seqlen 64,128 --head-dim 8 --heads 1 --repeat 1 --plot
         "${WORK}/bench.png")
  if(NOT EXISTS "${WORK}/bench.png")
    message(FATAL_ERROR "bench --plot wrote no ${WORK}/bench.png")
  endif()
endif()
set(ENV{CLATTN_WORKSPACE_LIMIT} 100000)
expect(0 "standard attention needs" bench --seqlen 256 --head-dim 8 --heads 1 --repeat 1
       --columns fused,standard)
expect(3 "available: 100000" run --algorithm standard --seqlen 256 --head-dim 8 --repeat 0)
unset(ENV{CLATTN_WORKSPACE_LIMIT})
expect(3 "compute capability 8.0" run --config forward_mma/64/32/1/1/1/1 --repeat 0)
expect(2 "needs a valid value" bench --causal sometimes)
expect(2 "unknown option" run --bogus)
expect(2 "needs a valid value" tune --budget nope)
expect(2 "unknown command" frobnicate)
expect(3 "matches no device" run --device no-such-device)
