/* The model functions of the kernel families registry.c lists (forward_families.c,
 * backward_families.c), with the argument helpers their bind functions share. Internal to the
 * kernels layer. */
#ifndef CLATTN_FAMILIES_H
#define CLATTN_FAMILIES_H

#include "kernels.h"

unsigned clattn__one_row(const clattn__config *c);

size_t clattn__rows_local(const clattn__device *, const clattn__class *, const clattn__config *);
void clattn__rows_work_groups(const clattn__config *c, size_t *wg);
unsigned clattn__rows_cost(const clattn__family *f, const clattn__device *, const clattn__class *,
                           const clattn__config *);
void clattn__rows_defines(const clattn__family *f, const clattn__device *, const clattn__class *,
                          const clattn__config *, char *, size_t);
void clattn__rows_reason(const clattn__family *f, const clattn__device *, const clattn__class *,
                         const clattn__config *, char *, size_t);

size_t clattn__tiles_local(const clattn__device *, const clattn__class *, const clattn__config *);
void clattn__tiles_work_groups(const clattn__config *c, size_t *wg);
unsigned clattn__tiles_cost(const clattn__family *f, const clattn__device *, const clattn__class *,
                            const clattn__config *);
void clattn__tiles_defines(const clattn__family *f, const clattn__device *, const clattn__class *,
                           const clattn__config *, char *, size_t);
void clattn__tiles_reason(const clattn__family *f, const clattn__device *, const clattn__class *,
                          const clattn__config *, char *, size_t);
unsigned clattn__tiles_min_block_q(const clattn__config *c);

size_t clattn__mma_local(const clattn__device *, const clattn__class *, const clattn__config *);
void clattn__mma_work_groups(const clattn__config *c, size_t *wg);
unsigned clattn__mma_cost(const clattn__family *f, const clattn__device *, const clattn__class *,
                          const clattn__config *);
void clattn__mma_defines(const clattn__family *f, const clattn__device *, const clattn__class *,
                         const clattn__config *, char *, size_t);
void clattn__mma_reason(const clattn__family *f, const clattn__device *, const clattn__class *,
                        const clattn__config *, char *, size_t);
unsigned clattn__mma_min_block_q(const clattn__config *c);

/* forward_mma_half (forward_mma_half.c); legality ends in clattn__forward_check. */
size_t clattn__mma_half_local(const clattn__device *, const clattn__class *,
                              const clattn__config *);
int clattn__mma_half_check(const clattn__family *f, const clattn__device *, const clattn__class *,
                           const clattn__config *, char *, size_t);
unsigned clattn__mma_half_cost(const clattn__family *f, const clattn__device *,
                               const clattn__class *, const clattn__config *);
void clattn__mma_half_defines(const clattn__family *f, const clattn__device *,
                              const clattn__class *, const clattn__config *, char *, size_t);
void clattn__mma_half_reason(const clattn__family *f, const clattn__device *, const clattn__class *,
                             const clattn__config *, char *, size_t);

/* decode (decode_family.c): a KV group's query heads in one tile, over a KV cache. */
size_t clattn__decode_local(const clattn__device *, const clattn__class *, const clattn__config *);
void clattn__decode_work_groups(const clattn__config *c, size_t *wg);
int clattn__decode_check(const clattn__family *f, const clattn__device *, const clattn__class *,
                         const clattn__config *, char *, size_t);
unsigned clattn__decode_cost(const clattn__family *f, const clattn__device *, const clattn__class *,
                             const clattn__config *);
void clattn__decode_defines(const clattn__family *f, const clattn__device *, const clattn__class *,
                            const clattn__config *, char *, size_t);
void clattn__decode_reason(const clattn__family *f, const clattn__device *, const clattn__class *,
                           const clattn__config *, char *, size_t);
unsigned clattn__decode_min_block_q(const clattn__config *c);
/* The cost's two estimates for a GPU build (tests/test_tiling.c checks them against the H200's
 * counts): registers per work-item with bq rows a tile, and P V's serial rounds of loads a
 * block. */
unsigned clattn__decode_regs(const clattn__class *k, const clattn__config *c, unsigned bq);
unsigned clattn__decode_rounds(const clattn__class *k, const clattn__config *c, unsigned rows);
size_t clattn__decode_row_groups(const clattn__config *c, const clattn__shape *s);
unsigned clattn__decode_bind(const clattn__family *f, const clattn__config *c,
                             const cl_kernel *kernels, const clattn__bound *b, clattn__launch *out,
                             cl_int *err);

/* decode_mma (decode_mma_family.c): the same for half queries on tensor cores; its tiles,
 * launch and arguments are decode's. */
size_t clattn__decode_mma_local(const clattn__device *, const clattn__class *,
                                const clattn__config *);
void clattn__decode_mma_work_groups(const clattn__config *c, size_t *wg);
int clattn__decode_mma_check(const clattn__family *f, const clattn__device *, const clattn__class *,
                             const clattn__config *, char *, size_t);
unsigned clattn__decode_mma_cost(const clattn__family *f, const clattn__device *,
                                 const clattn__class *, const clattn__config *);
void clattn__decode_mma_defines(const clattn__family *f, const clattn__device *,
                                const clattn__class *, const clattn__config *, char *, size_t);
void clattn__decode_mma_reason(const clattn__family *f, const clattn__device *,
                               const clattn__class *, const clattn__config *, char *, size_t);

int clattn__forward_check(const clattn__family *f, const clattn__device *, const clattn__class *,
                          const clattn__config *, char *, size_t);
int clattn__forward_accept(const clattn__family *f, const clattn_config *in, clattn__config *out,
                           char *why, size_t len);
clattn__args clattn__forward_args(const clattn__bound *b, cl_kernel kernel, cl_uint tiles,
                                  cl_uint *base_arg);
unsigned clattn__forward_bind(const clattn__family *f, const clattn__config *c,
                              const cl_kernel *kernels, const clattn__bound *b, clattn__launch *out,
                              cl_int *err);

size_t clattn__bwd_rows_local(const clattn__device *, const clattn__class *,
                              const clattn__config *);
size_t clattn__bwd_mma_local(const clattn__device *, const clattn__class *, const clattn__config *);
void clattn__bwd_rows_work_groups(const clattn__config *c, size_t *wg);
void clattn__bwd_mma_work_groups(const clattn__config *c, size_t *wg);
int clattn__backward_check(const clattn__family *f, const clattn__device *, const clattn__class *,
                           const clattn__config *, char *, size_t);
unsigned clattn__backward_cost(const clattn__family *f, const clattn__device *,
                               const clattn__class *, const clattn__config *);
void clattn__backward_defines(const clattn__family *f, const clattn__device *,
                              const clattn__class *, const clattn__config *, char *, size_t);
void clattn__backward_reason(const clattn__family *f, const clattn__device *, const clattn__class *,
                             const clattn__config *, char *, size_t);
int clattn__backward_accept(const clattn__family *f, const clattn_config *in, clattn__config *out,
                            char *why, size_t len);
/* backward_mma_half (backward_mma_half.c); the rest of its model is the backward's. */
size_t clattn__bwd_mma_half_local(const clattn__device *, const clattn__class *,
                                  const clattn__config *);
void clattn__bwd_mma_half_defines(const clattn__family *f, const clattn__device *,
                                  const clattn__class *, const clattn__config *, char *, size_t);

unsigned clattn__backward_bind(const clattn__family *f, const clattn__config *c,
                               const cl_kernel *kernels, const clattn__bound *b,
                               clattn__launch *out, cl_int *err);

#endif
