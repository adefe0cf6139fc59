/* Validation of problems and tensors before anything is enqueued: every view must lie inside
 * its buffer (CL_MEM_SIZE, overflow-safe arithmetic), an output must not overlap an input, and
 * no two elements of an output may share an address (inputs may: a broadcast is legitimate). */
#include "core.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

/* The kernels index rows with 32-bit unsigned integers and add a tile size to them. */
#define MAX_SEQLEN ((size_t)1 << 31)
#define MAX_WORK ((size_t)1 << 48) /* rows of a call: launches' grids never overflow */
/* Head dims of the fused kernels (their tiles live in local memory and registers) and of the
 * standard path (GEMMs). */
#define MAX_STANDARD_DIM 16384

/* The variants' flags and fields: their values (INVALID_ARGUMENT). */
static clattn_status check_variants(clattn_context *ctx, const clattn_problem *p) {
  const unsigned known = CLATTN_CAUSAL | CLATTN_WINDOW | CLATTN_CAUSAL_TOP_LEFT |
                         CLATTN_ALIBI_PER_BATCH | CLATTN_VARLEN | CLATTN_NONDETERMINISTIC;
  if (p->flags & ~known)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "unknown flags 0x%x", p->flags & ~known);
  if ((p->flags & CLATTN_CAUSAL) && (p->flags & CLATTN_CAUSAL_TOP_LEFT))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "CLATTN_CAUSAL and CLATTN_CAUSAL_TOP_LEFT are two alignments of one "
                        "mask: set one of them");
  if (p->flags & CLATTN_WINDOW) {
    if ((p->flags & (CLATTN_CAUSAL | CLATTN_CAUSAL_TOP_LEFT)) && p->window_right > 0)
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                          "window_right %lld with a causal mask: 0 or -1 (a causal row sees no "
                          "key right of its diagonal)",
                          (long long)p->window_right);
    if (p->window_left < -1 || p->window_right < -1)
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                          "window_left %lld, window_right %lld: each is -1 (unbounded) or a "
                          "number of keys, 0 or more",
                          (long long)p->window_left, (long long)p->window_right);
  } else if (p->window_left || p->window_right) {
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "window_left %lld, window_right %lld are set but flags lack CLATTN_WINDOW",
                        (long long)p->window_left, (long long)p->window_right);
  }
  if (!(p->flags & CLATTN_VARLEN) && (p->total_q || p->total_kv))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "total_q %zu, total_kv %zu are set but flags lack CLATTN_VARLEN",
                        p->total_q, p->total_kv);
  if (!(p->softcap >= 0.0f) || !isfinite(p->softcap))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "softcap %g: 0 (off) or a positive finite cap", (double)p->softcap);
  return CLATTN_OK;
}

/* The window and the causal alignments as the kernels' MASK offsets (cl/common.cl): row i sees
 * keys [i + mask_lo, i + mask_hi) within [0, seqlen_kv). Today's bottom-right CLATTN_CAUSAL
 * alone stays s->causal (its kernels' own CAUSAL code); everything else that bounds the keys is
 * a mask. An unbounded side is CLATTN__UNBOUNDED (rows and keys are below 2^31, so the sums never
 * overflow). */
static void mask_of(const clattn_problem *p, clattn__shape *s) {
  int top_left = (p->flags & CLATTN_CAUSAL_TOP_LEFT) != 0;
  int causal = top_left || (p->flags & CLATTN_CAUSAL);
  int window = (p->flags & CLATTN_WINDOW) != 0;
  s->causal = causal && !top_left && !window;
  s->mask = !s->causal && (causal || window);
  s->mask_lo = -CLATTN__UNBOUNDED, s->mask_hi = CLATTN__UNBOUNDED;
  if (!s->mask) return;
  int64_t diag = top_left ? 0 : (int64_t)s->seqlen_kv - (int64_t)s->seqlen_q;
  int64_t right = causal ? 0 : window && p->window_right >= 0 ? p->window_right : -1;
  int64_t left = window ? p->window_left : -1;
  if (left >= 0) s->mask_lo = diag - (left < CLATTN__UNBOUNDED ? left : CLATTN__UNBOUNDED);
  if (right >= 0) s->mask_hi = diag + (right < CLATTN__UNBOUNDED ? right : CLATTN__UNBOUNDED) + 1;
  /* A window unbounded on both sides bounds nothing: the plain kernels. */
  if (s->mask_lo == -CLATTN__UNBOUNDED && s->mask_hi == CLATTN__UNBOUNDED) s->mask = 0;
}

clattn_status clattn__shape_from_problem(clattn_context *ctx, const clattn_problem *p,
                                         clattn__shape *s) {
  if (!p) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "problem is NULL");
  if (p->dtype == CLATTN_I8)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "dtype CLATTN_I8 is a KV cache's element type (clattn_kv_cache.dtype): a "
                        "problem's is CLATTN_F32, CLATTN_F16 or CLATTN_BF16");
  if (p->dtype != CLATTN_F32 && p->dtype != CLATTN_F16 && p->dtype != CLATTN_BF16)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "dtype %d is not a clattn_dtype",
                        (int)p->dtype);
  s->dtype = p->dtype;
  s->elem = p->dtype == CLATTN_F32 ? 4 : 2;
  clattn_status st = check_variants(ctx, p);
  if (st != CLATTN_OK) return st;
  s->batch = p->batch;
  s->heads_q = p->heads_q;
  s->heads_kv = p->heads_kv ? p->heads_kv : p->heads_q;
  s->seqlen_q = p->seqlen_q;
  s->seqlen_kv = p->seqlen_kv;
  s->d = p->head_dim;
  s->dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  s->softcap = p->softcap;
  if (s->d == 0) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "head_dim is 0");
  if ((unsigned)p->algorithm > CLATTN_ALGO_STANDARD)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "algorithm %d is not a clattn_algorithm",
                        (int)p->algorithm);
  int fused_fits = s->d <= CLATTN__MAX_FUSED_DIM && s->dv <= CLATTN__MAX_FUSED_DIM;
  if (p->algorithm == CLATTN_ALGO_FUSED && !fused_fits)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "head_dim %zu / head_dim_v %zu: the fused kernels support at most %d (the "
                        "standard algorithm goes to %d)",
                        s->d, s->dv, CLATTN__MAX_FUSED_DIM, MAX_STANDARD_DIM);
  if (s->d > MAX_STANDARD_DIM || s->dv > MAX_STANDARD_DIM)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "head_dim %zu / head_dim_v %zu: at most %d is supported", s->d, s->dv,
                        MAX_STANDARD_DIM);
  s->algo = p->algorithm == CLATTN_ALGO_STANDARD || !fused_fits ? CLATTN_ALGO_STANDARD
                                                                : CLATTN_ALGO_FUSED;
  /* The kernels take scale and softcap in log2 units (x log2 e) as floats: each must stay
   * finite there, or a zero score becomes inf x 0 = NaN. */
  if (!isfinite(p->scale) || fabs((double)p->scale) * M_LOG2E > FLT_MAX)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "scale %g: must be finite and at most %g in magnitude (scale x log2 e is "
                        "an fp32 kernel argument)",
                        (double)p->scale, FLT_MAX / M_LOG2E);
  if ((double)p->softcap * M_LOG2E > FLT_MAX)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "softcap %g: at most %g (softcap x log2 e is an fp32 kernel argument)",
                        (double)p->softcap, FLT_MAX / M_LOG2E);
  s->scale = p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)s->d));
  /* The kernels scale q.k by scale / softcap in fp32: a cap that small would overflow the sums
   * into inf - inf = NaN, where every score is +-softcap anyway. */
  if (p->softcap > 0.0f && !(fabs((double)s->scale) / p->softcap <= 4294967296.0))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "softcap %g is too small for scale %g: |scale| / softcap must be at most "
                        "2^32",
                        (double)p->softcap, (double)s->scale);
  if (s->heads_q && s->heads_q % s->heads_kv)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "heads_q (%zu) is not a multiple of heads_kv (%zu)", s->heads_q,
                        s->heads_kv);
  if (s->seqlen_q >= MAX_SEQLEN || s->seqlen_kv >= MAX_SEQLEN || s->heads_q > UINT32_MAX ||
      s->batch >= MAX_SEQLEN)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "batch %zu, seqlen_q %zu, seqlen_kv %zu, heads_q %zu: the batch and the "
                        "sequence lengths must be below 2^31 and heads below 2^32",
                        s->batch, s->seqlen_q, s->seqlen_kv, s->heads_q);
  /* Every grid is at most batch x heads x the longer sequence (a varlen batch: no other bound). */
  size_t longest = s->seqlen_q > s->seqlen_kv ? s->seqlen_q : s->seqlen_kv, work;
  if (__builtin_mul_overflow(s->batch, s->heads_q, &work) ||
      __builtin_mul_overflow(work, longest ? longest : 1, &work) || work > MAX_WORK)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "batch %zu x heads_q %zu x sequence length %zu exceeds 2^48 rows", s->batch,
                        s->heads_q, longest);
  s->empty = s->batch == 0 || s->heads_q == 0 || s->seqlen_q == 0;
  mask_of(p, s);
  s->alibi = s->sinks = s->d_sinks = s->seqlens_kv = s->cu_q = s->cu_kv = NULL;
  s->kv_cache = s->kv_paged = s->kv_i8 = 0;
  s->page_size = s->num_pages = s->max_pages = s->sc_sb = 0;
  s->block_table = s->k_scale = s->v_scale = NULL;
  s->varlen = (p->flags & CLATTN_VARLEN) != 0;
  s->nondet = (p->flags & CLATTN_NONDETERMINISTIC) != 0;
  s->total_q = s->varlen ? p->total_q : 0, s->total_kv = s->varlen ? p->total_kv : 0;
  /* cu_seqlens are int32, and the kernels count rows in 32 bits. */
  if (s->total_q >= MAX_SEQLEN || s->total_kv >= MAX_SEQLEN)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "total_q %zu, total_kv %zu: packed rows must be below 2^31", s->total_q,
                        s->total_kv);
  s->vb = s->varlen ? 1 : s->batch;
  s->vq = s->varlen ? s->total_q : s->seqlen_q, s->vkv = s->varlen ? s->total_kv : s->seqlen_kv;
  if (__builtin_mul_overflow(s->vb * s->heads_q, s->vq, &s->lse_rows))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "the LSE's size overflows");
  s->kv_align = !(p->flags & CLATTN_CAUSAL_TOP_LEFT);
  s->alibi_per_batch = (p->flags & CLATTN_ALIBI_PER_BATCH) != 0;
  s->alibi_mod = s->alibi_per_batch ? s->batch * s->heads_q : s->heads_q;
  return CLATTN_OK;
}

static int mul_add(size_t *acc, size_t n, size_t stride) {
  if (n == 0) return 1;
  size_t t;
  if (__builtin_mul_overflow(n - 1, stride, &t)) return 0;
  return !__builtin_add_overflow(*acc, t, acc);
}

typedef clattn__region region;

/* access (CLATTN__READS | CLATTN__WRITES, or 0: a member checked again for its range alone)
 * against the buffer's flags: OpenCL leaves writing READ_ONLY or reading WRITE_ONLY undefined. */
#define READS CLATTN__READS
#define WRITES CLATTN__WRITES

static clattn_status check_buffer(clattn_context *ctx, const char *name, cl_mem buf, size_t bytes,
                                  int access, region *out) {
  size_t size = 0, origin = 0;
  cl_context owner = NULL;
  cl_mem parent = NULL;
  cl_mem_flags flags = 0;
  cl_int err = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(buf, CL_MEM_FLAGS, sizeof flags, &flags, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
  if (err == CL_SUCCESS)
    err = clGetMemObjectInfo(buf, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL);
  if (err == CL_SUCCESS && parent)
    err = clGetMemObjectInfo(buf, CL_MEM_OFFSET, sizeof origin, &origin, NULL);
  if (err != CL_SUCCESS)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s: not a valid buffer (%s)", name,
                        clattn__cl_error_name(err));
  if (owner != ctx->cl)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "%s: the buffer belongs to another OpenCL context", name);
  if (bytes > size)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "%s: the view needs %zu bytes but the buffer has %zu (CL_MEM_SIZE)", name,
                        bytes, size);
  if ((access & WRITES) && (flags & CL_MEM_READ_ONLY))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "%s: the call writes it, but its buffer is CL_MEM_READ_ONLY", name);
  if ((access & READS) && (flags & CL_MEM_WRITE_ONLY))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "%s: the call reads it, but its buffer is CL_MEM_WRITE_ONLY", name);
  out->root = parent ? parent : buf;
  out->lo += origin;
  out->hi += origin;
  return CLATTN_OK;
}

/* Checks that every element of a [n0][n1][n2][dim] view lies in its buffer; *r gets the byte
 * range it spans (empty when the view is). */
static clattn_status check_view_as(clattn_context *ctx, const char *name, const clattn_tensor *t,
                                   size_t n0, size_t n1, size_t n2, size_t dim, size_t elem,
                                   int access, region *r) {
  r->root = NULL;
  r->lo = r->hi = 0;
  if (!t) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "tensor %s is NULL", name);
  if (n0 == 0 || n1 == 0 || n2 == 0 || dim == 0) return CLATTN_OK;
  if (!t->buffer) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s.buffer is NULL", name);
  size_t last = t->offset, bytes;
  if (!mul_add(&last, n0, t->stride_batch) || !mul_add(&last, n1, t->stride_seq) ||
      !mul_add(&last, n2, t->stride_head) || !mul_add(&last, dim, 1) ||
      __builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, elem, &bytes))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "%s: offset and strides overflow the address range", name);
  r->lo = t->offset * elem;
  r->hi = bytes;
  return check_buffer(ctx, name, t->buffer, bytes, access, r);
}

/* An input's view, read by the call. */
static clattn_status check_view(clattn_context *ctx, const char *name, const clattn_tensor *t,
                                size_t n0, size_t n1, size_t n2, size_t dim, size_t elem,
                                region *r) {
  return check_view_as(ctx, name, t, n0, n1, n2, dim, elem, READS, r);
}

/* Whether two distinct elements of a [n0][n1][n2][dim] view (its extents checked, so no sum
 * below overflows) may share an address. A sufficient test for "no", cheap and exact for every
 * layout of distinct, nested strides: with the dims of extent > 1 sorted by stride, each stride
 * must reach past the last element the smaller ones span. Anything else is treated as
 * overlapping, which an output must not be (two work-items would write one address). */
static int overlaps_itself(const clattn_tensor *t, size_t n0, size_t n1, size_t n2, size_t dim) {
  size_t stride[4] = {1, t->stride_head, t->stride_seq, t->stride_batch};
  size_t extent[4] = {dim, n2, n1, n0}, m = 0;
  for (int i = 0; i < 4; i++)
    if (extent[i] > 1) stride[m] = stride[i], extent[m] = extent[i], m++;
  for (size_t i = 1; i < m; i++) /* insertion sort by stride: at most four dims */
    for (size_t j = i; j > 0 && stride[j - 1] > stride[j]; j--) {
      size_t ts = stride[j], te = extent[j];
      stride[j] = stride[j - 1], extent[j] = extent[j - 1];
      stride[j - 1] = ts, extent[j - 1] = te;
    }
  size_t span = 0; /* the largest offset the smaller dims reach */
  int clash = 0;
  for (size_t i = 0; i < m && !clash; i++) {
    clash = stride[i] <= span; /* a stride of 0 clashes even first */
    span += stride[i] * (extent[i] - 1);
  }
  return clash;
}

/* check_view for an output, which must also not overlap itself; access: WRITES, and READS too
 * where the call reads it back (out_access). */
static clattn_status check_output_view(clattn_context *ctx, const char *name,
                                       const clattn_tensor *t, size_t n0, size_t n1, size_t n2,
                                       size_t dim, size_t elem, int access, region *r) {
  clattn_status st = check_view_as(ctx, name, t, n0, n1, n2, dim, elem, access, r);
  if (st == CLATTN_OK && r->root && overlaps_itself(t, n0, n1, n2, dim))
    st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                      "%s: two of its elements share an address (strides batch %zu, seq %zu, "
                      "head %zu over [%zu][%zu][%zu][%zu]): an output must not overlap itself",
                      name, t->stride_batch, t->stride_seq, t->stride_head, n0, n1, n2, dim);
  return st;
}

static int overlap(const region *a, const region *b) {
  return a->root && a->root == b->root && a->lo < b->hi && b->lo < a->hi;
}

/* The fused kernels only write their outputs; the standard path's CLBlast GEMMs also read C (its
 * padded copies; beta = 1 for a GQA group's later heads), so there they must be readable. */
static int out_access(const clattn__shape *s) {
  return s->algo == CLATTN_ALGO_STANDARD ? WRITES | READS : WRITES;
}

clattn_status clattn__check_forward_tensors(clattn_context *ctx, const clattn__shape *s,
                                            const clattn_tensor *q, const clattn_tensor *k,
                                            const clattn_tensor *v, const clattn_tensor *o,
                                            cl_mem lse) {
  region rq, rk, rv, ro, rl = {0};
  clattn_status st;
  size_t nq = s->empty ? 0 : s->vq, nkv = s->empty ? 0 : s->vkv;
  if ((st = check_view(ctx, "q", q, s->vb, nq, s->heads_q, s->d, s->elem, &rq)) ||
      (st = check_view(ctx, "k", k, s->vb, nkv, s->heads_kv, s->d, s->elem, &rk)) ||
      (st = check_view(ctx, "v", v, s->vb, nkv, s->heads_kv, s->dv, s->elem, &rv)) ||
      (st = check_output_view(ctx, "o", o, s->vb, nq, s->heads_q, s->dv, s->elem, out_access(s),
                              &ro)))
    return st;
  if (lse && !s->empty) {
    size_t n;
    if (__builtin_mul_overflow(s->lse_rows, sizeof(float), &n))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "lse: size overflows");
    rl.lo = 0;
    rl.hi = n;
    if ((st = check_buffer(ctx, "lse", lse, n, WRITES, &rl))) return st;
  }
  const region *inputs[] = {&rq, &rk, &rv, &rl};
  const char *names[] = {"q", "k", "v", "lse"};
  for (int i = 0; i < 4; i++)
    if (overlap(&ro, inputs[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                          "o overlaps %s in the same buffer (bytes %zu..%zu and %zu..%zu)",
                          names[i], ro.lo, ro.hi, inputs[i]->lo, inputs[i]->hi);
  if (overlap(&rl, &rq) || overlap(&rl, &rk) || overlap(&rl, &rv))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "lse overlaps an input tensor");
  return CLATTN_OK;
}

clattn_status clattn__check_backward_tensors(clattn_context *ctx, const clattn__shape *s,
                                             const clattn_tensor *q, const clattn_tensor *k,
                                             const clattn_tensor *v, const clattn_tensor *o,
                                             const clattn_tensor *d_o, cl_mem lse,
                                             const clattn_tensor *dq, const clattn_tensor *dk,
                                             const clattn_tensor *dv) {
  if (!lse && !s->empty)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "lse is NULL: the backward pass needs the forward's log-sum-exp, fp32 "
                        "[batch][heads_q][seqlen_q]");
  /* o and lse are read here, not written: no clattn__check_forward_tensors. */
  clattn_status st;
  region rq, rk, rv, ro, rg, rl = {0}, rdq, rdk, rdv;
  size_t nq = s->empty ? 0 : s->vq, nkv = s->vkv, b = s->vb;
  size_t heads = s->heads_q ? s->heads_kv : 0;
  if ((st = check_view(ctx, "q", q, b, nq, s->heads_q, s->d, s->elem, &rq)) ||
      (st = check_view(ctx, "k", k, b, nkv, heads, s->d, s->elem, &rk)) ||
      (st = check_view(ctx, "v", v, b, nkv, heads, s->dv, s->elem, &rv)) ||
      (st = check_view(ctx, "o", o, b, nq, s->heads_q, s->dv, s->elem, &ro)) ||
      (st = check_view(ctx, "d_o", d_o, b, nq, s->heads_q, s->dv, s->elem, &rg)) ||
      (st = check_output_view(ctx, "dq", dq, b, nq, s->heads_q, s->d, s->elem, out_access(s),
                              &rdq)) ||
      (st = check_output_view(ctx, "dk", dk, b, nkv, heads, s->d, s->elem, out_access(s), &rdk)) ||
      (st = check_output_view(ctx, "dv", dv, b, nkv, heads, s->dv, s->elem, out_access(s), &rdv)))
    return st;
  if (lse && !s->empty) {
    if (__builtin_mul_overflow(s->lse_rows, sizeof(float), &rl.hi))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "lse: size overflows");
    if ((st = check_buffer(ctx, "lse", lse, rl.hi, READS, &rl))) return st;
  }
  const region *outs[] = {&rdq, &rdk, &rdv}, *all[] = {&rq, &rk, &rv, &ro, &rg, &rl};
  const char *out_names[] = {"dq", "dk", "dv"}, *names[] = {"q", "k", "v", "o", "d_o", "lse"};
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 6; j++)
      if (overlap(outs[i], all[j]))
        return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s overlaps %s in the same buffer",
                            out_names[i], names[j]);
    for (int j = i + 1; j < 3; j++)
      if (overlap(outs[i], outs[j]))
        return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s overlaps %s in the same buffer",
                            out_names[i], out_names[j]);
  }
  return CLATTN_OK;
}

/* An fp32 array of n elements (a variant's slopes, sinks or sink gradient) in its buffer. */
static clattn_status check_array(clattn_context *ctx, const char *name, cl_mem m, size_t n,
                                 int access, region *r) {
  r->root = NULL, r->lo = r->hi = 0;
  if (!m) return CLATTN_OK;
  if (__builtin_mul_overflow(n, sizeof(float), &r->hi))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s: size overflows", name);
  return check_buffer(ctx, name, m, r->hi, access, r);
}

clattn_status clattn__check_variant_args(clattn_context *ctx, clattn__shape *s,
                                         const clattn_args *a, int backward) {
  const clattn_args none = {0};
  if (!a) a = &none;
  if (!s->varlen && (a->cu_seqlens_q || a->cu_seqlens_kv))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "args.%s is set but flags lack CLATTN_VARLEN",
                        a->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_kv");
  if (s->varlen && (!a->cu_seqlens_q || !a->cu_seqlens_kv))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "flags have CLATTN_VARLEN but args.%s is NULL",
                        a->cu_seqlens_q ? "cu_seqlens_kv" : "cu_seqlens_q");
  if (s->varlen && a->seqlens_kv)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "args.seqlens_kv with CLATTN_VARLEN: the sequences' lengths are "
                        "cu_seqlens_kv's");
  if (s->alibi_per_batch && !a->alibi_slopes)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "flags have CLATTN_ALIBI_PER_BATCH but args.alibi_slopes is NULL");
  cl_mem d_sinks = backward ? a->d_sinks : NULL;
  if (d_sinks && !a->sinks)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "args.d_sinks is set but args.sinks is NULL (no sinks, no gradient)");
  region ra, rs, rd, rl, rcq, rck;
  clattn_status st;
  size_t cu_n = s->batch + 1; /* int32, as floats are: 4 bytes */
  if ((st = check_array(ctx, "alibi_slopes", a->alibi_slopes, s->alibi_mod, READS, &ra)) ||
      (st = check_array(ctx, "sinks", a->sinks, s->heads_q, READS, &rs)) ||
      (st = check_array(ctx, "d_sinks", d_sinks, s->heads_q, WRITES, &rd)) ||
      (st = check_array(ctx, "seqlens_kv", a->seqlens_kv, s->batch, READS, &rl)) ||
      (st = check_array(ctx, "cu_seqlens_q", a->cu_seqlens_q, cu_n, READS, &rcq)) ||
      (st = check_array(ctx, "cu_seqlens_kv", a->cu_seqlens_kv, cu_n, READS, &rck)))
    return st;
  if (!a->alibi_slopes && !a->sinks && !a->seqlens_kv && !s->varlen) return CLATTN_OK;
  /* The call's tensors (checked before): the variants' inputs must not overlap an output, and
   * d_sinks nothing at all. */
  size_t b = s->vb, nq = s->empty ? 0 : s->vq, nkv = s->empty ? 0 : s->vkv;
  size_t hq = s->heads_q, hkv = s->heads_kv, e = s->elem;
  /* The backward writes dk and dv (zeros) even without queries, as check_backward_tensors has
   * it: their whole views. */
  size_t nkv_out = backward ? s->vkv : nkv, hkv_out = hq ? hkv : 0;
  region t[9] = {{0}};
  const char *names[9] = {"o", "lse", "dq", "dk", "dv", "q", "k", "v", "d_o"};
  /* Outputs: o and lse in the forward; dq, dk and dv in the backward, which reads o and lse. */
  const int out_lo = backward ? 2 : 0, out_hi = backward ? 5 : 2;
  if ((st = check_view_as(ctx, "o", &a->o, b, nq, hq, s->dv, e, 0, &t[0])) ||
      (st = check_array(ctx, "lse", nq ? a->lse : NULL, s->lse_rows, 0, &t[1])) ||
      (backward &&
       ((st = check_view_as(ctx, "dq", &a->dq, b, nq, hq, s->d, e, 0, &t[2])) ||
        (st = check_view_as(ctx, "dk", &a->dk, b, nkv_out, hkv_out, s->d, e, 0, &t[3])) ||
        (st = check_view_as(ctx, "dv", &a->dv, b, nkv_out, hkv_out, s->dv, e, 0, &t[4])) ||
        (st = check_view_as(ctx, "d_o", &a->d_o, b, nq, hq, s->dv, e, 0, &t[8])))) ||
      (st = check_view_as(ctx, "q", &a->q, b, nq, hq, s->d, e, 0, &t[5])) ||
      (st = check_view_as(ctx, "k", &a->k, b, nkv, hkv, s->d, e, 0, &t[6])) ||
      (st = check_view_as(ctx, "v", &a->v, b, nkv, hkv, s->dv, e, 0, &t[7])))
    return st;
  for (int i = 0; i < 9; i++) {
    const int out = i >= out_lo && i < out_hi;
    if (out && overlap(&ra, &t[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "alibi_slopes overlaps %s", names[i]);
    if (out && overlap(&rs, &t[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "sinks overlaps %s", names[i]);
    if (out && overlap(&rl, &t[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "seqlens_kv overlaps %s", names[i]);
    if (out && (overlap(&rcq, &t[i]) || overlap(&rck, &t[i])))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_%s overlaps %s",
                          overlap(&rcq, &t[i]) ? "q" : "kv", names[i]);
    if (overlap(&rd, &t[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "d_sinks overlaps %s", names[i]);
  }
  if (overlap(&rd, &rcq) || overlap(&rd, &rck))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "d_sinks overlaps cu_seqlens");
  if (overlap(&rd, &ra) || overlap(&rd, &rs) || overlap(&rd, &rl))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "d_sinks overlaps %s",
                        overlap(&rd, &ra)   ? "alibi_slopes"
                        : overlap(&rd, &rs) ? "sinks"
                                            : "seqlens_kv");
  s->alibi = a->alibi_slopes, s->sinks = a->sinks, s->d_sinks = d_sinks;
  s->seqlens_kv = a->seqlens_kv, s->cu_q = a->cu_seqlens_q, s->cu_kv = a->cu_seqlens_kv;
  return CLATTN_OK;
}

/* The two common layouts as views (clattn.h). */
clattn_tensor clattn_bshd(cl_mem buf, size_t seqlen, size_t heads, size_t dim) {
  clattn_tensor t = {buf, 0, seqlen * heads * dim, heads * dim, dim};
  return t;
}

clattn_tensor clattn_bhsd(cl_mem buf, size_t seqlen, size_t heads, size_t dim) {
  clattn_tensor t = {buf, 0, heads * seqlen * dim, dim, seqlen * dim};
  return t;
}

/* The checks above for core/kvcache.c. */
clattn_status clattn__view_region(clattn_context *ctx, const char *name, const clattn_tensor *t,
                                  size_t n0, size_t n1, size_t n2, size_t dim, size_t elem,
                                  int output, clattn__region *r) {
  return output ? check_output_view(ctx, name, t, n0, n1, n2, dim, elem, WRITES, r)
                : check_view(ctx, name, t, n0, n1, n2, dim, elem, r);
}

clattn_status clattn__array_region(clattn_context *ctx, const char *name, cl_mem m, size_t n,
                                   int access, clattn__region *r) {
  return check_array(ctx, name, m, n, access, r);
}

int clattn__regions_overlap(const clattn__region *a, const clattn__region *b) {
  return overlap(a, b);
}
