/* Shared helpers of the tests: a context on the test device whose caches point at a fresh
 * temporary folder, and small buffer utilities. */
#ifndef CLATTN_TEST_COMMON_H
#define CLATTN_TEST_COMMON_H

#include "clattn.h"
#include "check.h"

#include <criterion/criterion.h>

/* A context on the default device ($CLATTN_DEVICE, else the first GPU, else the first
 * device), with cache_dir and tuning_db in a new temporary folder (and kernel_dir when not
 * NULL). Fails the test when none can be made. */
clattn_context *test_context(const char *kernel_dir);
/* The same, with the standard path's workspace limited to workspace_limit bytes (0: default). */
clattn_context *test_context_limited(const char *kernel_dir, size_t workspace_limit);
/* A context whose tuning database is db_path (set to <a new temporary folder>/db.json, not yet
 * existing), with its cache in that folder. */
clattn_context *test_context_with_db(char *db_path, size_t len);
/* An out-of-order queue on base's OpenCL context and device (the caller releases it); NULL when
 * the device has none (the caller skips). */
cl_command_queue test_out_of_order_queue(clattn_context *base);
/* The temporary folder test_context made last. */
const char *test_tmpdir(void);

/* A device buffer of n floats, filled with value. */
cl_mem test_buffer(clattn_context *ctx, size_t n, float value);
/* The same in a storage type (half: value's 16-bit pattern). */
cl_mem test_buffer_of(clattn_context *ctx, clattn_dtype t, size_t n, float value);

/* A tiny valid problem and its packed tensors: checks that a context still works after a
 * failure (the result is compared against the reference). */
void test_context_still_works(clattn_context *ctx);

/* max(err, |x - ref|), where an x that is NaN or infinite (and not exactly ref, as the -inf LSE
 * of a row that sees no key is) counts as infinitely wrong: fmax(err, NaN) is err, so a
 * comparison written with fmax alone passes outputs that were never written. */
double test_err(double err, double x, double ref);
/* max(err, |naive - ref|) for the naive fp32 error that sets a tolerance: a non-finite one is
 * left out, so that a broken reference can only tighten the tolerance, never lift it. */
double test_naive_err(double err, double naive, double ref);

/* One forward on random data (seeded by seed) in ctx, checked against the references under
 * DESIGN.md's rule: O (bhsd or bshd, offset elements before it) and, with with_lse, LSE start
 * NaN, with NaN guards after them; every element of the outputs must be written and right, and
 * no other (the offset, the guards, LSE when not asked for) written. what names the call in
 * messages. */
void test_forward_check(clattn_context *ctx, const clattn_problem *p, int bhsd, size_t offset,
                        int with_lse, unsigned seed, const char *what);
/* The same for a check_spec (problem, layout, offset, seed, and ALiBi and sinks: the call is
 * clattn_forward_ex's). */
void test_forward_check_spec(clattn_context *ctx, const check_spec *sp, int with_lse,
                             const char *what);

/* One problem on random data, checked by test_forward_check (O, and LSE when with_lse), in a
 * fresh context. With cfg, the config is forced by an override first and
 * explain must report it. Layout: bhsd or bshd views, offset elements before each tensor. */
void test_forward_shape(const clattn_problem *p, int bhsd, size_t offset, int with_lse,
                        const clattn_config *cfg);
/* The same for a check_spec (its seed replaced as above). */
void test_forward_shape_spec(const check_spec *sp, int with_lse, const clattn_config *cfg);

/* The tensor-core kernel's config: block_q rows (a warp per 16), block_kv keys, padded rows. */
clattn_config test_mma_config(unsigned block_q, unsigned block_kv);

/* A kernel folder for CLATTN_KERNEL_DIR: copies of the fused kernels (cl/forward.cl,
 * cl/forward_tiles.cl, cl/forward_mma.cl, cl/forward_mma_half.cl, cl/backward.cl,
 * cl/backward_mma.cl, cl/backward_mma_half.cl, cl/backward_mma_half_dq.cl,
 * cl/backward_mma_half_atomic.cl, cl/decode.cl) that contain marker, in a new temporary folder
 * (dir gets its path), with text inserted after the first line of each that contains marker, or,
 * when replace is set, instead of it. At least one must contain it. */
void test_kernel_dir(char *dir, size_t len, const char *marker, const char *text, int replace);
/* Removes what test_kernel_dir made. */
void test_kernel_dir_remove(const char *dir);

#endif
