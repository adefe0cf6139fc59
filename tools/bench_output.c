/* `clattn bench` output: the table, CSV, JSON and the gnuplot chart. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const bench_col_names[COLS] = {"fused", "standard", "host"};

static double spread_pct(const bench_time *t) {
  return t->median_ms > 0 ? 50.0 * (t->max_ms - t->min_ms) / t->median_ms : 0.0;
}

static double tflops(const bench_row *r, int c) {
  return r->t[c].ran && r->t[c].median_ms > 0 ? r->flops / (r->t[c].median_ms * 1e9) : 0.0;
}

static int any_ran(const bench_row *rows, size_t n, int c) {
  for (size_t i = 0; i < n; i++)
    if (rows[i].t[c].ran || rows[i].t[c].why[0]) return 1;
  return 0;
}

void bench_print_table(const bench_row *rows, size_t n, const char *device) {
  int show[COLS];
  for (int c = 0; c < COLS; c++) show[c] = any_ran(rows, n, c);
  printf("device: %s\n", device);
  static const char *const storage[] = {"fp32", "fp16", "bf16"};
  if (n) printf("storage: %s\n", storage[rows[0].dtype % 3]);
  if (n && rows[0].variants[0]) printf("variants: %s\n", rows[0].variants);
  if (n && rows[0].backward)
    printf("timed: forward + backward (FLOPs 3.5x the forward's); traffic and IO bound: the "
           "forward pass\n");
  printf("time: median of the timed runs (OpenCL events; host: wall clock), spread = half the "
         "min-max range; TFLOP/s by the FlashAttention convention; MB = 1e6 bytes\n\n");
  printf("%6s %4s %3s %4s %4s", "N", "d", "cau", "B", "H");
  for (int c = 0; c < COLS; c++)
    if (show[c]) printf(" | %8s ms  spread TFLOP/s", bench_col_names[c]);
  printf(" | fused vs:");
  for (int c = 1; c < COLS; c++)
    if (show[c]) printf(" %8s", bench_col_names[c]);
  printf(" | traffic MB: fused standard IO-bound | peak MB:");
  for (int c = 0; c < COLS; c++)
    if (show[c]) printf(" %8s", bench_col_names[c]);
  printf(" | max|f-s|\n");
  for (size_t i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    printf("%6zu %4zu %3s %4zu %4zu", r->seqlen, r->head_dim, r->causal ? "yes" : "no", r->batch,
           r->heads);
    for (int c = 0; c < COLS; c++) {
      if (!show[c]) continue;
      if (r->t[c].ran)
        printf(" | %11.3f %6.1f%% %8.4f", r->t[c].median_ms, spread_pct(&r->t[c]), tflops(r, c));
      else
        printf(" | %11s %7s %8s", "-", "", "");
    }
    printf(" |          ");
    for (int c = 1; c < COLS; c++) {
      if (!show[c]) continue;
      if (r->t[0].ran && r->t[c].ran && r->t[0].median_ms > 0)
        printf(" %7.2fx", r->t[c].median_ms / r->t[0].median_ms);
      else
        printf(" %8s", "-");
    }
    printf(" | %17.4g %8.4g %9.3g |         ", r->fused_bytes / 1e6, r->standard_bytes / 1e6,
           r->io_bound / 1e6);
    for (int c = 0; c < COLS; c++)
      if (show[c]) printf(" %8.4g", r->peak_bytes[c] / 1e6);
    if (r->max_diff >= 0)
      printf(" | %8.2g\n", r->max_diff);
    else
      printf(" | %8s\n", "-");
  }
  int notes = 0;
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < COLS; c++)
      if (!rows[i].t[c].ran && rows[i].t[c].why[0]) {
        if (!notes++) printf("\nnot run:\n");
        printf("  N=%zu d=%zu%s %s: %s\n", rows[i].seqlen, rows[i].head_dim,
               rows[i].causal ? " causal" : "", bench_col_names[c], rows[i].t[c].why);
      }
  printf("\nfused configs:");
  for (size_t i = 0; i < n; i++)
    if (i == 0 || strcmp(rows[i].fused_config, rows[i - 1].fused_config))
      printf("%s N=%zu d=%zu%s: %s", i ? ";" : "", rows[i].seqlen, rows[i].head_dim,
             rows[i].causal ? " causal" : "", rows[i].fused_config);
  printf("\n");
}

void bench_print_csv(const bench_row *rows, size_t n) {
  printf("seqlen,head_dim,causal,batch,heads,flops,fused_bytes,standard_bytes,io_bound_bytes");
  for (int c = 0; c < COLS; c++)
    printf(",%s_ms,%s_min_ms,%s_max_ms,%s_tflops,%s_peak_bytes", bench_col_names[c],
           bench_col_names[c], bench_col_names[c], bench_col_names[c], bench_col_names[c]);
  printf(",max_diff\n");
  for (size_t i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    printf("%zu,%zu,%d,%zu,%zu,%.6g,%.6g,%.6g,%.6g", r->seqlen, r->head_dim, r->causal, r->batch,
           r->heads, r->flops, r->fused_bytes, r->standard_bytes, r->io_bound);
    for (int c = 0; c < COLS; c++) {
      if (r->t[c].ran)
        printf(",%.6g,%.6g,%.6g,%.6g", r->t[c].median_ms, r->t[c].min_ms, r->t[c].max_ms,
               tflops(r, c));
      else
        printf(",,,,");
      printf(",%.6g", r->peak_bytes[c]);
    }
    if (r->max_diff >= 0)
      printf(",%.3g\n", r->max_diff);
    else
      printf(",\n");
  }
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  }
  putchar('"');
}

void bench_print_json(const bench_row *rows, size_t n, const char *device, const char *command) {
  printf("{\"device\": ");
  json_string(device);
  printf(", \"command\": ");
  json_string(command);
  printf(", \"rows\": [\n");
  for (size_t i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    static const char *const storage[] = {"f32", "f16", "bf16"};
    printf("  {\"backward\": %s, \"dtype\": \"%s\", ", r->backward ? "true" : "false",
           storage[r->dtype % 3]);
    printf("\"seqlen\": %zu, \"head_dim\": %zu, \"causal\": %s, \"batch\": %zu, \"heads\": %zu, "
           "\"flops\": %.6g, \"fused_bytes\": %.6g, \"standard_bytes\": %.6g, "
           "\"io_bound_bytes\": %.6g, \"fused_config\": ",
           r->seqlen, r->head_dim, r->causal ? "true" : "false", r->batch, r->heads, r->flops,
           r->fused_bytes, r->standard_bytes, r->io_bound);
    json_string(r->fused_config);
    printf(", \"variants\": ");
    json_string(r->variants);
    for (int c = 0; c < COLS; c++) {
      printf(", \"%s\": {\"peak_bytes\": %.6g", bench_col_names[c], r->peak_bytes[c]);
      if (r->t[c].ran)
        printf(", \"median_ms\": %.6g, \"min_ms\": %.6g, \"max_ms\": %.6g, \"tflops\": %.6g}",
               r->t[c].median_ms, r->t[c].min_ms, r->t[c].max_ms, tflops(r, c));
      else {
        printf(", \"not_run\": ");
        json_string(r->t[c].why[0] ? r->t[c].why : "not asked for");
        printf("}");
      }
    }
    if (r->max_diff >= 0) printf(", \"max_diff\": %.3g", r->max_diff);
    printf("}%s\n", i + 1 < n ? "," : "");
  }
  printf("]}\n");
}
