/* Command-line parsing shared by the commands. */
#ifndef CLATTN_ARGS_H
#define CLATTN_ARGS_H

#include "clattn.h"

#include <stddef.h>

/* A non-negative decimal integer; 0 when s is not one. */
int parse_size(const char *s, size_t *out);
/* A comma-separated list of sizes ("64,128"); returns the count (0: bad). */
size_t parse_size_list(const char *s, size_t *out, size_t cap);

/* A config written K/BQ/BKV/TPR/RM/STAGE/PAD[/VEC], or K/BQ/BKV for a backward kernel (clattn run
 * --config); 0 when malformed. */
int parse_config(const char *s, clattn_config *c);

/* The problem flags (--batch --heads --heads-kv --seqlen --seqlen-q --seqlen-kv --head-dim
 * --head-dim-v --causal --scale --dtype --device). Returns 1 when argv[*i] was one (and
 * advances *i past its value), 0 when it is not a problem flag, -1 when its value is bad (a
 * message was printed). */
int parse_problem_flag(int argc, char **argv, int *i, clattn_problem *p);
extern const char problem_flags_help[];

#endif
