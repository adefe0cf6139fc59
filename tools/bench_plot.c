/* `clattn bench --plot`: time and modelled global-memory traffic against sequence length, one
 * line per column and (head dim, causal) series, drawn by gnuplot into a PNG. */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* s as a gnuplot single-quoted string, in which a quote is written twice. */
static void put_quoted(FILE *g, const char *s) {
  fputc('\'', g);
  for (; *s; s++) fputs(*s == '\'' ? "''" : (char[2]){*s, 0}, g);
  fputc('\'', g);
}

static const int col_lt[COLS] = {7, 5, 9};
static const char *const color[3] = {"#1f77b4", "#d62728", "#2ca02c"};
static const char *const traffic[3] = {"fused", "standard", "IO bound N^2d^2/M"};

/* One plot line: the data file's series j, column col. */
static void plot_line(FILE *g, int first, const char *data, size_t j, int col, int lt,
                      const char *rgb, const char *title, const series *s) {
  fputs(first ? "" : ", ", g);
  put_quoted(g, data);
  fprintf(g, " index %zu using 1:%d with linespoints pt %d dt %zu lc rgb '%s' title '%s d=%zu%s'",
          j, col, lt, 1 + j % 4, rgb, title, s->d, s->causal ? " causal" : "");
}

static void write_script(FILE *g, const bench_row *rows, size_t n, const series *s, size_t k,
                         const char *data, const char *png, const char *device) {
  char dev[120];
  snprintf(dev, sizeof dev, "%s", device);
  char *cut = strstr(dev, " |"); /* the name, vendor and driver part of the summary */
  if (cut) *cut = 0;
  for (char *p = dev; *p; p++)
    if (*p == '"' || *p == '|') *p = *p == '|' ? ',' : '\'';
  fprintf(g, "set terminal pngcairo size 1400,560 font 'sans,10'\nset output ");
  put_quoted(g, png);
  fprintf(g, "\nset logscale xy\nset grid\nset key left top\nset xlabel 'sequence length N'\n");
  fprintf(g, "set multiplot layout 1,2 title \"%s\"\n", dev);
  fprintf(g, "set ylabel 'time (ms, median)'\nset title 'time'\n");
  int first = 1;
  for (size_t j = 0; j < k; j++)
    for (int c = 0; c < COLS; c++) {
      int any = 0;
      for (size_t i = 0; i < n; i++)
        any |= rows[i].t[c].ran && rows[i].head_dim == s[j].d && rows[i].causal == s[j].causal;
      if (!any) continue;
      if (first) fprintf(g, "plot ");
      plot_line(g, first, data, j, 2 + c, col_lt[c], color[c], bench_col_names[c], &s[j]);
      first = 0;
    }
  fprintf(g, "\nset ylabel 'global-memory traffic (MB, modelled)'\nset title 'traffic'\nplot ");
  for (size_t j = 0; j < k; j++)
    for (int t = 0; t < 3; t++)
      plot_line(g, !j && !t, data, j, 5 + t, col_lt[t], color[t], traffic[t], &s[j]);
  fprintf(g, "\nunset multiplot\n");
}

int bench_plot(const bench_row *rows, size_t n, const char *png, const char *device) {
  int rc = -1;
  series s[64];
  size_t k = series_of(rows, n, s);
  if (k > 64) k = 64;
  char data[512] = "";
  const char *tmp = getenv("TMPDIR");
  /* The output is checked first: gnuplot that cannot open it says so, then draws the PNG onto
   * its stdout (ours) and exits 0. */
  FILE *out = fopen(png, "wb");
  int created = out != NULL;
  if (!out) {
    fprintf(stderr, "clattn bench: cannot write the plot to %s: %s\n", png, strerror(errno));
  } else if (fclose(out), system("command -v gnuplot >/dev/null 2>&1") != 0) {
    fprintf(stderr, "clattn bench: --plot needs gnuplot, which is not installed (Debian/Ubuntu: "
                    "apt-get install gnuplot-nox); the table above is complete without it\n");
  } else {
    snprintf(data, sizeof data, "%s/clattn-bench-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemp(data);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    FILE *g = NULL;
    if (!f) {
      fprintf(stderr, "clattn bench: cannot write the plot's data file %s\n", data);
    } else if (write_data(f, rows, n, s, k), fclose(f), !(g = popen("gnuplot", "w"))) {
      fprintf(stderr, "clattn bench: cannot start gnuplot\n");
    } else {
      write_script(g, rows, n, s, k, data, png, device);
      int status = pclose(g);
      struct stat st;
      if (status == 0 && stat(png, &st) == 0 && st.st_size > 0)
        rc = 0;
      else if (status != -1 && WIFEXITED(status))
        fprintf(stderr, "clattn bench: gnuplot failed (exit %d); no plot written to %s\n",
                WEXITSTATUS(status), png);
      else
        fprintf(stderr, "clattn bench: gnuplot failed; no plot written to %s\n", png);
    }
    if (fd >= 0) remove(data);
  }
  struct stat st;
  if (rc && created && stat(png, &st) == 0 && st.st_size == 0) remove(png); /* created above */
  return rc;
}
