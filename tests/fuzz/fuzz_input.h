/* Helpers of the fuzz targets: reading typed fields from the fuzzer's bytes (a missing byte reads
 * as 0, so every input decodes to something), and a scratch path under $TMPDIR. */
#ifndef CLATTN_FUZZ_INPUT_H
#define CLATTN_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fuzz_input {
  const uint8_t *data;
  size_t size, pos;
} fuzz_input;

static inline uint8_t fuzz_u8(fuzz_input *in) {
  return in->pos < in->size ? in->data[in->pos++] : 0;
}

/* n bytes little endian (n <= 8). */
static inline uint64_t fuzz_bytes(fuzz_input *in, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v |= (uint64_t)fuzz_u8(in) << (8 * i);
  return v;
}

/* A size whose first byte says how wide it is, so that small values (the ones that make views
 * fit the harness's buffers) cost one byte while any 64-bit value, the overflow cases, stays
 * reachable: tag >> 6 is 0: tag & 63; 1: 14 bits; 2: 32 bits; 3: 64 bits. */
static inline size_t fuzz_size(fuzz_input *in) {
  uint8_t tag = fuzz_u8(in);
  size_t v = tag & 63;
  if (tag >> 6 == 1) v = (v << 8) | fuzz_u8(in);
  if (tag >> 6 == 2) v = (size_t)fuzz_bytes(in, 4);
  if (tag >> 6 == 3) v = (size_t)fuzz_bytes(in, 8);
  return v;
}

/* $TMPDIR/clattn-fuzz-<name>-<pid><suffix>: one file per process, rewritten by every input. */
static inline void fuzz_scratch_path(char *out, size_t len, const char *name, const char *suffix) {
  const char *tmp = getenv("TMPDIR");
  snprintf(out, len, "%s/clattn-fuzz-%s-%ld%s", tmp && tmp[0] ? tmp : "/tmp", name, (long)getpid(),
           suffix);
}

/* An oracle's verdict: a broken invariant is a finding, reported as a crash so libFuzzer keeps
 * the input (this is the harness, never the library: the library returns errors). */
#define FUZZ_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz invariant broken: %s: ", #cond);                                       \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#endif
