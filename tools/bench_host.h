/* The bench's host column: attention as a C programmer would write it without clattn, with
 * OpenBLAS (sgemm, row softmax, sgemm), one head at a time. */
#ifndef CLATTN_BENCH_HOST_H
#define CLATTN_BENCH_HOST_H

#include "clattn.h"

/* 1 when the command was built with OpenBLAS. */
int bench_host_available(void);
/* O = attention(Q, K, V) for packed [B][S][H][D] host arrays (the problem's defaults applied);
 * s is scratch for one head's scores (seqlen_q * seqlen_kv floats). */
void bench_host_forward(const clattn_problem *p, const float *q, const float *k, const float *v,
                        float *o, float *s);

#endif
