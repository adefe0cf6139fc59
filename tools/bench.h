/* `clattn bench`: its rows, and their output as a table, CSV, JSON or a gnuplot chart. */
#ifndef CLATTN_BENCH_H
#define CLATTN_BENCH_H

#include <stddef.h>

enum { COL_FUSED, COL_STANDARD, COL_HOST, COLS };
extern const char *const bench_col_names[COLS];

typedef struct bench_time {
  int ran;          /* 1: timed; 0: see why */
  double median_ms; /* of the timed runs */
  double min_ms, max_ms;
  char why[480]; /* why the column did not run ("" when it was not asked for) */
  int skipped;   /* 1: it does not apply here (the host column on a GPU, or with --backward)
                    and was not named in --columns: not a failure */
} bench_time;

typedef struct bench_row {
  size_t seqlen, head_dim, batch, heads;
  int causal;
  int backward;                       /* timed forward + backward */
  int dtype;                          /* clattn_dtype of the tensors */
  double flops;                       /* FlashAttention convention */
  double fused_bytes, standard_bytes; /* modelled global-memory traffic */
  double io_bound;                    /* N^2 d^2 / M */
  double peak_bytes[COLS];            /* memory each needs: tensors plus workspace */
  bench_time t[COLS];
  double max_diff;        /* max |O fused - O standard|; < 0 when not both ran */
  int steps;              /* 1: steps_ms holds the standard path's step medians */
  double steps_ms[3];     /* S GEMM, softmax, O GEMM */
  double softmax_bytes;   /* modelled: the visible scores read, P written */
  char fused_config[160]; /* the forward's plan; with --backward the backward's after it */
  char variants[160];     /* beyond the mask: "window 8,0, softcap 30, ALiBi, ..." ("": none) */
} bench_row;

void bench_print_table(const bench_row *rows, size_t n, const char *device);
/* The bandwidth check of the traffic model: per row, the standard path's steps and the fused
 * kernel's modelled bytes over their times, against the copy kernel's bandwidth. */
void bench_print_bandwidth(const bench_row *rows, size_t n, double copy_gbps, double copy_bytes);
/* Bandwidth (GB/s) of a plain copy kernel of bytes bytes (read + written) on ctx's queue, the
 * median of runs timed by OpenCL events; < 0 on failure (message on stderr). */
struct clattn_context;
double bench_copy_bandwidth(struct clattn_context *ctx, double *bytes);
/* The same for a read-only streaming kernel over 1 GiB (decode's reference bandwidth). */
double bench_read_bandwidth(struct clattn_context *ctx, double *bytes);
void bench_print_csv(const bench_row *rows, size_t n);
void bench_print_json(const bench_row *rows, size_t n, const char *device, const char *command);
/* Draws time and modelled traffic against sequence length into png with gnuplot; returns 0, or
 * -1 with a message on stderr (gnuplot missing or failing). */
int bench_plot(const bench_row *rows, size_t n, const char *png, const char *device);

#endif
