/* `clattn bench --plot`: time and modelled global-memory traffic against sequence length, one
 * line per column and (head dim, causal) series, drawn by gnuplot into a PNG. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  size_t d;
  int causal;
} series;

static size_t series_of(const bench_row *rows, size_t n, series *out) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < k && !(out[j].d == rows[i].head_dim && out[j].causal == rows[i].causal)) j++;
    if (j == k) out[k].d = rows[i].head_dim, out[k++].causal = rows[i].causal;
  }
  return k;
}

static void write_data(FILE *f, const bench_row *rows, size_t n, const series *s, size_t k) {
  for (size_t j = 0; j < k; j++) {
    fprintf(f, "# d=%zu causal=%d\n", s[j].d, s[j].causal);
    for (size_t i = 0; i < n; i++) {
      const bench_row *r = &rows[i];
      if (r->head_dim != s[j].d || r->causal != s[j].causal) continue;
      fprintf(f, "%zu", r->seqlen);
      for (int c = 0; c < COLS; c++)
        if (r->t[c].ran)
          fprintf(f, " %.6g", r->t[c].median_ms);
        else
          fprintf(f, " NaN");
      fprintf(f, " %.6g %.6g %.6g\n", r->fused_bytes / 1e6, r->standard_bytes / 1e6,
              r->io_bound / 1e6);
    }
    fprintf(f, "\n\n"); /* a gnuplot index per series */
  }
}

int bench_plot(const bench_row *rows, size_t n, const char *png, const char *device) {
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    fprintf(stderr, "clattn bench: --plot needs gnuplot, which is not installed (Debian/Ubuntu: "
                    "apt-get install gnuplot-nox); the table above is complete without it\n");
    return -1;
  }
  series s[64];
  size_t k = series_of(rows, n, s);
  if (k > 64) k = 64;
  char data[512];
  const char *tmp = getenv("TMPDIR");
  snprintf(data, sizeof data, "%s/clattn-bench-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  int fd = mkstemp(data);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    fprintf(stderr, "clattn bench: cannot write the plot's data file\n");
    return -1;
  }
  write_data(f, rows, n, s, k);
  fclose(f);
  FILE *g = popen("gnuplot", "w");
  if (!g) {
    remove(data);
    fprintf(stderr, "clattn bench: cannot start gnuplot\n");
    return -1;
  }
  char dev[120];
  snprintf(dev, sizeof dev, "%s", device);
  char *cut = strstr(dev, " |"); /* the name, vendor and driver part of the summary */
  if (cut) *cut = 0;
  for (char *p = dev; *p; p++)
    if (*p == '"' || *p == '|') *p = *p == '|' ? ',' : '\'';
  fprintf(g, "set terminal pngcairo size 1400,560 font 'sans,10'\nset output '%s'\n", png);
  fprintf(g, "set logscale xy\nset grid\nset key left top\nset xlabel 'sequence length N'\n");
  fprintf(g, "set multiplot layout 1,2 title \"%s\"\n", dev);
  fprintf(g, "set ylabel 'time (ms, median)'\nset title 'time'\nplot ");
  static const int col_lt[COLS] = {7, 5, 9};
  static const char *const color[3] = {"#1f77b4", "#d62728", "#2ca02c"};
  int first = 1;
  for (size_t j = 0; j < k; j++)
    for (int c = 0; c < COLS; c++) {
      int any = 0;
      for (size_t i = 0; i < n; i++)
        any |= rows[i].t[c].ran && rows[i].head_dim == s[j].d && rows[i].causal == s[j].causal;
      if (!any) continue;
      fprintf(g,
              "%s'%s' index %zu using 1:%d with linespoints pt %d dt %zu lc rgb '%s' title '%s "
              "d=%zu%s'",
              first ? "" : ", ", data, j, 2 + c, col_lt[c], 1 + j % 4, color[c], bench_col_names[c],
              s[j].d, s[j].causal ? " causal" : "");
      first = 0;
    }
  fprintf(g, "\nset ylabel 'global-memory traffic (MB, modelled)'\nset title 'traffic'\nplot ");
  static const char *const traffic[3] = {"fused", "standard", "IO bound N^2d^2/M"};
  for (size_t j = 0; j < k; j++)
    for (int t = 0; t < 3; t++)
      fprintf(g,
              "%s'%s' index %zu using 1:%d with linespoints pt %d dt %zu lc rgb '%s' title '%s "
              "d=%zu%s'",
              j || t ? ", " : "", data, j, 5 + t, col_lt[t], 1 + j % 4, color[t], traffic[t],
              s[j].d, s[j].causal ? " causal" : "");
  fprintf(g, "\nunset multiplot\n");
  int rc = pclose(g);
  remove(data);
  if (rc != 0) {
    fprintf(stderr, "clattn bench: gnuplot failed (exit %d); no plot written\n", rc);
    return -1;
  }
  return 0;
}
