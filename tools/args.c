#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char problem_flags_help[] =
    "  --batch B          (1)         --heads H          (8)\n"
    "  --heads-kv H       (heads; GQA/MQA when smaller)\n"
    "  --seqlen N         (1024; sets both)   --seqlen-q N  --seqlen-kv N\n"
    "  --head-dim D       (64)        --head-dim-v D     (head-dim)\n"
    "  --causal           bottom-right aligned causal mask\n"
    "  --causal-top-left  top-left aligned causal mask (PyTorch SDPA's is_causal)\n"
    "  --window L,R       sliding window: L keys left and R right of the diagonal (-1: unbounded)\n"
    "  --softcap C        scores become C tanh(s / C)\n"
    "  --nondeterministic the backward may sum dQ by atomics (faster)\n"
    "  --scale S          (1/sqrt(head-dim))\n"
    "  --dtype f32|f16|bf16 (f32)\n"
    "  --algorithm auto|fused|standard (auto: fused unless a head dim exceeds 256)\n"
    "  --device SPEC      like CLATTN_DEVICE: \"P:D\" or a part of the device name\n";

void args_init(args *a, const char *cmd, int argc, char **argv, const struct option *options) {
  memset(a, 0, sizeof *a);
  a->cmd = cmd, a->argc = argc, a->argv = argv, a->options = options;
  optind = 0; /* 0, not 1: glibc and musl then re-read the "+" of the option string */
  opterr = 0; /* the messages below name the command; getopt's would name argv[0] */
}

/* How many options s (up to '=') abbreviates; getopt_long reports none and several alike. */
static int prefix_matches(const struct option *o, const char *s) {
  size_t len = strcspn(s, "=");
  int n = 0;
  for (; o->name; o++) n += !strncmp(o->name, s, len);
  return n;
}

int args_next(args *a) {
  int idx = -1;
  a->val = NULL, a->name[0] = 0;
  /* "+": stop at the first argument that is not an option (it is then an error, below) instead
   * of moving it to the end; ":": a missing value returns ':' rather than '?'. */
  int id = getopt_long(a->argc, a->argv, "+:h", a->options, &idx);
  const char *arg = optind > 0 && optind <= a->argc ? a->argv[optind - 1] : "";
  int len = (int)strcspn(arg, "=");
  if (id == -1) {
    if (optind < a->argc) {
      fprintf(stderr, "clattn %s: unexpected argument '%s' (see --help)\n", a->cmd,
              a->argv[optind]);
      id = ARGS_BAD;
    } else {
      id = ARGS_END;
    }
  } else if (id == ':') {
    fprintf(stderr, "clattn %s: %.*s needs a value\n", a->cmd, len, arg);
    id = ARGS_BAD;
  } else if (id == '?') {
    if (optopt && optopt != '?' && strncmp(arg, "--", 2) == 0)
      fprintf(stderr, "clattn %s: %.*s takes no value\n", a->cmd, len, arg);
    else if (strncmp(arg, "--", 2) == 0 && prefix_matches(a->options, arg + 2) > 1)
      fprintf(stderr, "clattn %s: ambiguous option '%.*s'\n", a->cmd, len, arg);
    else if (optopt && strncmp(arg, "--", 2) != 0)
      fprintf(stderr, "clattn %s: unknown option '-%c' (see --help)\n", a->cmd, optopt);
    else
      fprintf(stderr, "clattn %s: unknown option '%s' (see --help)\n", a->cmd, arg);
    id = ARGS_BAD;
  } else {
    if (idx >= 0)
      snprintf(a->name, sizeof a->name, "--%s", a->options[idx].name);
    else
      snprintf(a->name, sizeof a->name, "-%c", id);
    a->val = optarg;
    /* An empty value is never a default: `--scale ''` is a mistake, not 1/sqrt(d). */
    if (idx >= 0 && a->options[idx].has_arg != no_argument && a->val && !a->val[0]) {
      args_bad(a, "empty value");
      id = ARGS_BAD;
    }
  }
  return id;
}

int args_bad(const args *a, const char *why) {
  const char *v = a->val ? a->val : "";
  size_t n = strlen(v);
  /* A long list is shown by its start; the reason names the element at fault. */
  fprintf(stderr, "clattn %s: %s '%.*s%s': %s\n", a->cmd, a->name, n > 60 ? 50 : (int)n, v,
          n > 60 ? "..." : "", why);
  return 0;
}

/* The size in s[0..len), in [min, max]; NULL, or why it is not one. */
static const char *size_of(const char *s, size_t len, size_t min, size_t max, size_t *out,
                           char *why, size_t why_len) {
  const char *bad = NULL;
  char digits[32];
  size_t i = 0;
  while (i < len && s[i] >= '0' && s[i] <= '9') i++;
  if (len == 0) {
    bad = "empty";
  } else if (i < len) {
    bad = "not a size (decimal digits only: no sign, space or suffix)";
  } else {
    while (len > 1 && *s == '0') s++, len--; /* leading zeros are allowed: "007" is 7 */
    unsigned long long v = 0;
    if (len < sizeof digits) {
      memcpy(digits, s, len), digits[len] = 0;
      errno = 0;
      v = strtoull(digits, NULL, 10);
    }
    if (len >= sizeof digits || errno == ERANGE || v > SIZE_MAX || v < min || v > max) {
      if (max == SIZE_MAX)
        snprintf(why, why_len, "out of range (at least %zu, at most %zu)", min, max);
      else
        snprintf(why, why_len, "out of range (%zu to %zu)", min, max);
      bad = why;
    } else {
      *out = (size_t)v;
    }
  }
  return bad;
}

int args_size(const args *a, size_t min, size_t max, size_t *out) {
  char why[96];
  const char *bad = size_of(a->val, strlen(a->val), min, max, out, why, sizeof why);
  return bad ? args_bad(a, bad) : 1;
}

int args_number(const args *a, double *out) {
  const char *s = a->val, *bad = NULL;
  char *end = NULL;
  errno = 0;
  double v = isspace((unsigned char)s[0]) ? 0 : strtod(s, &end);
  if (!end || end == s || *end)
    bad = "not a number";
  else if (errno == ERANGE || !isfinite(v))
    bad = "out of range (not a finite number)";
  else
    *out = v;
  return bad ? args_bad(a, bad) : 1;
}

int args_choice(const args *a, const char *const *names, int n, int *out) {
  int found = -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(a->val, names[i])) found = i;
  if (found < 0) {
    char want[160] = "want ";
    for (int i = 0; i < n; i++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? "|" : "", names[i]);
    return args_bad(a, want);
  }
  *out = found;
  return 1;
}

int size_list_set(size_list *l, const size_t *v, size_t n) {
  size_t *copy = malloc((n ? n : 1) * sizeof *copy);
  if (copy) {
    memcpy(copy, v, n * sizeof *copy);
    free(l->v);
    l->v = copy, l->n = n;
  }
  return copy != NULL;
}

void size_list_free(size_list *l) {
  free(l->v);
  l->v = NULL, l->n = 0;
}

/* The number of comma-separated elements of s. */
static size_t elements(const char *s) {
  size_t n = 1;
  for (; *s; s++) n += *s == ',';
  return n;
}

int args_size_list(const args *a, size_t min, size_t max, size_list *out) {
  size_t n = elements(a->val), k = 0;
  size_t *v = malloc(n * sizeof *v);
  char why[160], range[96];
  const char *bad = v ? NULL : "out of memory";
  for (const char *s = a->val; v && !bad; k++) {
    size_t len = strcspn(s, ",");
    const char *e = size_of(s, len, min, max, &v[k], range, sizeof range);
    if (e) {
      snprintf(why, sizeof why, "element %zu '%.*s' is %s", k + 1, len > 30 ? 30 : (int)len, s, e);
      bad = why;
    }
    if (!s[len]) break;
    s += len + 1;
  }
  if (!bad) {
    free(out->v);
    out->v = v, out->n = n;
  } else {
    free(v);
  }
  return bad ? args_bad(a, bad) : 1;
}

int args_name_set(const args *a, const char *const *names, int n, int *want) {
  char why[200];
  const char *bad = NULL;
  for (int i = 0; i < n; i++) want[i] = 0;
  size_t k = 0;
  for (const char *s = a->val; !bad; k++) {
    size_t len = strcspn(s, ",");
    int found = -1;
    for (int i = 0; i < n; i++)
      if (strlen(names[i]) == len && !strncmp(s, names[i], len)) found = i;
    if (found < 0) {
      int at = snprintf(why, sizeof why, "element %zu '%.*s' is not one of ", k + 1,
                        len > 30 ? 30 : (int)len, s);
      for (int i = 0; i < n && at > 0 && (size_t)at < sizeof why; i++)
        at += snprintf(why + at, sizeof why - at, "%s%s", i ? "|" : "", names[i]);
      bad = why;
    } else {
      want[found] = 1;
    }
    if (!s[len]) break;
    s += len + 1;
  }
  return bad ? args_bad(a, bad) : 1;
}

int args_config(const args *a, clattn_config *c) {
  memset(c, 0, sizeof *c);
  const char *s = a->val, *bad = NULL;
  size_t klen = strspn(s, "abcdefghijklmnopqrstuvwxyz_");
  unsigned f[7] = {0};
  size_t nf = 0;
  char why[160], range[96];
  if (klen == 0 || klen >= sizeof c->kernel) bad = "the kernel name (letters and _) comes first";
  for (s += klen; !bad && *s == '/'; nf++) {
    s++;
    size_t len = strcspn(s, "/"), v = 0;
    if (nf == 7)
      bad = "more than 8 fields";
    else if ((bad = size_of(s, len, 0, UINT_MAX, &v, range, sizeof range)) == NULL)
      f[nf] = (unsigned)v;
    else {
      snprintf(why, sizeof why, "field %zu '%.*s' is %s", nf + 2, len > 20 ? 20 : (int)len, s, bad);
      bad = why;
    }
    s += len;
  }
  /* The backward's kernels take their blocks alone: K/BQ/BKV. */
  int backward = !strncmp(a->val, "backward_", 9);
  if (!bad && (*s || (nf != 6 && nf != 7 && !(backward && nf == 2))))
    bad = "want K/BQ/BKV/TPR/RM/STAGE/PAD[/VEC] (K/BQ/BKV for a backward kernel)";
  if (!bad) {
    memcpy(c->kernel, a->val, klen);
    c->block_q = f[0], c->block_kv = f[1];
    if (nf == 2) {
      c->threads_per_row = c->rows_per_item = c->vector_width = 1;
    } else {
      c->threads_per_row = f[2], c->rows_per_item = f[3], c->stage_kv = f[4], c->pad = f[5];
      c->vector_width = f[6];
    }
  }
  return bad ? args_bad(a, bad) : 1;
}

const char *const args_dtypes[3] = {"f32", "f16", "bf16"}; /* CLATTN_F32, _F16, _BF16 */
static const char *const algos[] = {"auto", "fused", "standard"};

int args_problem(const args *a, int id, clattn_problem *p) {
  int ok = 1, k = 0;
  size_t n = 0;
  double v = 0;
  /* Zero keeps the API's meaning (an empty call, or the default), except the head dim, which
   * is invalid there too. */
  switch (id) {
  case OPT_BATCH:
    ok = args_size(a, 0, SIZE_MAX, &p->batch);
    break;
  case OPT_HEADS:
    ok = args_size(a, 0, SIZE_MAX, &p->heads_q);
    break;
  case OPT_HEADS_KV:
    ok = args_size(a, 0, SIZE_MAX, &p->heads_kv);
    break;
  case OPT_SEQLEN_Q:
    ok = args_size(a, 0, SIZE_MAX - 1, &p->seqlen_q);
    break;
  case OPT_SEQLEN_KV:
    ok = args_size(a, 0, SIZE_MAX, &p->seqlen_kv);
    break;
  case OPT_HEAD_DIM:
    ok = args_size(a, 1, SIZE_MAX, &p->head_dim);
    break;
  case OPT_HEAD_DIM_V:
    ok = args_size(a, 0, SIZE_MAX, &p->head_dim_v);
    break;
  case OPT_SEQLEN:
    if ((ok = args_size(a, 0, SIZE_MAX, &n))) p->seqlen_q = p->seqlen_kv = n;
    break;
  case OPT_CAUSAL:
    p->flags |= CLATTN_CAUSAL;
    break;
  case OPT_SCALE:
    /* 0 is the API's "default": accepting it would silently run 1/sqrt(d). */
    if ((ok = args_number(a, &v)) && (fabs(v) > FLT_MAX || (float)v == 0.0f))
      ok = args_bad(a, "out of range (a non-zero float; leave --scale out for 1/sqrt(head-dim))");
    if (ok) p->scale = (float)v;
    break;
  case OPT_DTYPE:
    if ((ok = args_choice(a, args_dtypes, 3, &k))) p->dtype = (clattn_dtype)k;
    break;
  case OPT_ALGORITHM:
    if ((ok = args_choice(a, algos, 3, &k))) p->algorithm = (clattn_algorithm)k;
    break;
  case OPT_DEVICE:
    setenv("CLATTN_DEVICE", a->val, 1);
    break;
  case OPT_CAUSAL_TOP_LEFT:
    p->flags |= CLATTN_CAUSAL_TOP_LEFT;
    break;
  case OPT_WINDOW: {
    long long l = 0, r = 0;
    int used = 0;
    if (sscanf(a->val, "%lld,%lld%n", &l, &r, &used) != 2 || a->val[used] || l < -1 || r < -1 ||
        !isdigit((unsigned char)a->val[strlen(a->val) - 1]))
      ok = args_bad(a, "want L,R: two key counts, each 0 or more or -1 (unbounded)");
    else
      p->flags |= CLATTN_WINDOW, p->window_left = l, p->window_right = r;
    break;
  }
  case OPT_NONDETERMINISTIC:
    p->flags |= CLATTN_NONDETERMINISTIC;
    break;
  case OPT_SOFTCAP:
    if ((ok = args_number(a, &v)) && !(v > 0.0 && v <= FLT_MAX))
      ok = args_bad(a, "out of range (a positive cap)");
    if (ok) p->softcap = (float)v;
    break;
  default:
    ok = 0;
    break;
  }
  return ok;
}

void args_mask_text(const clattn_problem *p, char *out, size_t len) {
  int n = snprintf(out, len, "%s",
                   p->flags & CLATTN_CAUSAL            ? "causal"
                   : p->flags & CLATTN_CAUSAL_TOP_LEFT ? "causal top-left"
                                                       : "non-causal");
  if ((p->flags & CLATTN_WINDOW) && n >= 0 && (size_t)n < len)
    n += snprintf(out + n, len - n, ", window %lld,%lld", (long long)p->window_left,
                  (long long)p->window_right);
  if (p->softcap > 0.0f && n >= 0 && (size_t)n < len)
    n += snprintf(out + n, len - n, ", softcap %g", (double)p->softcap);
  if ((p->flags & CLATTN_NONDETERMINISTIC) && n >= 0 && (size_t)n < len)
    snprintf(out + n, len - n, ", nondeterministic");
}
