/* Command-line parsing shared by the commands: getopt_long over each command's option table,
 * and strict parsers for the values. A bad value is a usage error: the parser prints one line
 * on stderr naming the command, the option and the value, and returns 0. */
#ifndef CLATTN_ARGS_H
#define CLATTN_ARGS_H

#include "clattn.h"

#include <getopt.h>
#include <stddef.h>

/* getopt_long's ids of the problem options, above every character; a command's own options
 * take ids from OPT_COMMAND on. */
enum {
  OPT_BATCH = 256,
  OPT_HEADS,
  OPT_HEADS_KV,
  OPT_SEQLEN,
  OPT_SEQLEN_Q,
  OPT_SEQLEN_KV,
  OPT_HEAD_DIM,
  OPT_HEAD_DIM_V,
  OPT_CAUSAL,
  OPT_SCALE,
  OPT_DTYPE,
  OPT_ALGORITHM,
  OPT_DEVICE,
  OPT_WINDOW,
  OPT_CAUSAL_TOP_LEFT,
  OPT_SOFTCAP,
  OPT_NONDETERMINISTIC,
  OPT_COMMAND = 512
};

/* The problem options (--batch --heads --heads-kv --seqlen --seqlen-q --seqlen-kv --head-dim
 * --head-dim-v --causal --scale --dtype --algorithm --device, and the variants --window
 * --causal-top-left --softcap, and --nondeterministic), for a command's option table. */
#define PROBLEM_OPTIONS                                                                            \
  {"batch", required_argument, NULL, OPT_BATCH}, {"heads", required_argument, NULL, OPT_HEADS},    \
      {"heads-kv", required_argument, NULL, OPT_HEADS_KV},                                         \
      {"seqlen", required_argument, NULL, OPT_SEQLEN},                                             \
      {"seqlen-q", required_argument, NULL, OPT_SEQLEN_Q},                                         \
      {"seqlen-kv", required_argument, NULL, OPT_SEQLEN_KV},                                       \
      {"head-dim", required_argument, NULL, OPT_HEAD_DIM},                                         \
      {"head-dim-v", required_argument, NULL, OPT_HEAD_DIM_V},                                     \
      {"causal", no_argument, NULL, OPT_CAUSAL}, {"scale", required_argument, NULL, OPT_SCALE},    \
      {"dtype", required_argument, NULL, OPT_DTYPE},                                               \
      {"algorithm", required_argument, NULL, OPT_ALGORITHM},                                       \
      {"window", required_argument, NULL, OPT_WINDOW},                                             \
      {"causal-top-left", no_argument, NULL, OPT_CAUSAL_TOP_LEFT},                                 \
      {"softcap", required_argument, NULL, OPT_SOFTCAP},                                           \
      {"nondeterministic", no_argument, NULL, OPT_NONDETERMINISTIC}, {                             \
    "device", required_argument, NULL, OPT_DEVICE                                                  \
  }
extern const char problem_flags_help[];
/* --dtype's values, in clattn_dtype's order. */
extern const char *const args_dtypes[3];

enum { ARGS_END = -1, ARGS_BAD = -2 };

/* The state of one command's parse. */
typedef struct args {
  const char *cmd; /* "run": messages start "clattn run: " */
  int argc;
  char **argv; /* argv[0] is the command's name */
  const struct option *options;
  const char *val; /* the value of the option args_next returned, or NULL */
  char name[48];   /* that option as written: "--seqlen" or "-h" */
} args;

void args_init(args *a, const char *cmd, int argc, char **argv, const struct option *options);
/* The next option's id (its struct option val; 'h' for -h), ARGS_END when every argument has
 * been read, or ARGS_BAD after a message: an unknown or ambiguous option, a missing or empty
 * value, a value given to a flag, or an argument that is not an option. Long options may be
 * written --name VALUE or --name=VALUE. */
int args_next(args *a);

/* Prints "clattn CMD: OPTION 'VALUE': why" on stderr; returns 0. */
int args_bad(const args *a, const char *why);
/* A size: decimal digits only (no sign, space or suffix), in [min, max]. */
int args_size(const args *a, size_t min, size_t max, size_t *out);
/* A finite number (the whole value, as strtod reads it). */
int args_number(const args *a, double *out);
/* One of names[0..n): its index in *out. */
int args_choice(const args *a, const char *const *names, int n, int *out);

/* A comma-separated list of sizes of any length, each in [min, max]; no empty element. */
typedef struct size_list {
  size_t *v, n;
} size_list;
int args_size_list(const args *a, size_t min, size_t max, size_list *out);
/* Sets l to a copy of v[0..n) (defaults); 0 when out of memory. */
int size_list_set(size_list *l, const size_t *v, size_t n);
void size_list_free(size_list *l);
/* A comma-separated set of names[0..n): want[i] = 1 for each named (at least one). */
int args_name_set(const args *a, const char *const *names, int n, int *want);

/* A config written K/BQ/BKV/TPR/RM/STAGE/PAD[/VEC], or K/BQ/BKV for a backward kernel (clattn run
 * --config); 0 with a message when malformed. */
int args_config(const args *a, clattn_config *c);

/* The problem's mask and variants in words: "causal", "non-causal", "causal top-left", then
 * ", window L,R" and ", softcap C" when set. */
void args_mask_text(const clattn_problem *p, char *out, size_t len);

/* Applies problem option id (OPT_BATCH..OPT_SOFTCAP) with a's value to p; 0 when bad. */
int args_problem(const args *a, int id, clattn_problem *p);

#endif
