#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char problem_flags_help[] =
    "  --batch B          (1)         --heads H          (8)\n"
    "  --heads-kv H       (heads; GQA/MQA when smaller)\n"
    "  --seqlen N         (1024; sets both)   --seqlen-q N  --seqlen-kv N\n"
    "  --head-dim D       (64)        --head-dim-v D     (head-dim)\n"
    "  --causal           bottom-right aligned causal mask\n"
    "  --scale S          (1/sqrt(head-dim))\n"
    "  --dtype f32|f16|bf16 (f32)\n"
    "  --algorithm auto|fused|standard (auto: fused unless a head dim exceeds 256)\n"
    "  --device SPEC      like CLATTN_DEVICE: \"P:D\" or a part of the device name\n";

int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-') return 0;
  *out = (size_t)v;
  return 1;
}

size_t parse_size_list(const char *s, size_t *out, size_t cap) {
  size_t n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (n == cap || !parse_size(tok, &out[n++])) return 0;
  return n;
}

int parse_config(const char *s, clattn_config *c) {
  char kernel[32];
  memset(c, 0, sizeof *c);
  int got =
      s ? sscanf(s, "%31[a-z_]/%u/%u/%u/%u/%u/%u/%u", kernel, &c->block_q, &c->block_kv,
                 &c->threads_per_row, &c->rows_per_item, &c->stage_kv, &c->pad, &c->vector_width)
        : 0;
  /* The backward's kernels take their blocks alone: K/BQ/BKV. */
  int backward = got >= 1 && !strncmp(kernel, "backward_", 9);
  if (got != 7 && got != 8 && !(backward && got == 3)) return 0;
  if (backward && got == 3) c->threads_per_row = c->rows_per_item = c->vector_width = 1;
  snprintf(c->kernel, sizeof c->kernel, "%s", kernel);
  return 1;
}

int parse_problem_flag(int argc, char **argv, int *i, clattn_problem *p) {
  const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
  struct {
    const char *flag;
    size_t *dst;
  } sizes[] = {{"--batch", &p->batch},          {"--heads", &p->heads_q},
               {"--heads-kv", &p->heads_kv},    {"--seqlen-q", &p->seqlen_q},
               {"--seqlen-kv", &p->seqlen_kv},  {"--head-dim", &p->head_dim},
               {"--head-dim-v", &p->head_dim_v}};
  for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++)
    if (!strcmp(a, sizes[j].flag)) {
      if (!val || !parse_size(val, sizes[j].dst)) goto bad;
      (*i)++;
      return 1;
    }
  size_t n;
  if (!strcmp(a, "--seqlen")) {
    if (!val || !parse_size(val, &n)) goto bad;
    p->seqlen_q = p->seqlen_kv = n, (*i)++;
  } else if (!strcmp(a, "--causal")) {
    p->flags |= CLATTN_CAUSAL;
  } else if (!strcmp(a, "--scale")) {
    char *end;
    if (!val || (p->scale = strtof(val, &end), *end)) goto bad;
    (*i)++;
  } else if (!strcmp(a, "--dtype")) {
    if (!val) goto bad;
    if (!strcmp(val, "f32"))
      p->dtype = CLATTN_F32;
    else if (!strcmp(val, "f16"))
      p->dtype = CLATTN_F16;
    else if (!strcmp(val, "bf16"))
      p->dtype = CLATTN_BF16;
    else
      goto bad;
    (*i)++;
  } else if (!strcmp(a, "--algorithm")) {
    const char *names[] = {"auto", "fused", "standard"};
    int found = -1;
    for (int j = 0; val && j < 3; j++)
      if (!strcmp(val, names[j])) found = j;
    if (found < 0) goto bad;
    p->algorithm = (clattn_algorithm)found, (*i)++;
  } else if (!strcmp(a, "--device")) {
    if (!val) goto bad;
    setenv("CLATTN_DEVICE", val, 1), (*i)++;
  } else {
    return 0;
  }
  return 1;
bad:
  fprintf(stderr, "clattn: %s needs a valid value\n", a);
  return -1;
}
