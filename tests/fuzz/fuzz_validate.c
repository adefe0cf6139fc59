/* libFuzzer target: problem and tensor validation (clattn__shape_from_problem, then
 * clattn__check_forward_tensors or clattn__check_backward_tensors), the checks that stand between
 * a caller's views and the kernels. No kernel runs: a context and a few buffers of fixed sizes
 * are made once per process, and each input chooses among them.
 *
 * Input, read in order (fuzz_input.h: a missing byte is 0; "size" is fuzz_size's tagged form):
 *   mode byte        bit 0: backward; bit 1: pass an lse buffer, chosen by bits 2..6; bit 7: a KV
 *                    cache call instead (below)
 *   7 sizes          batch, heads_q, heads_kv, seqlen_q, seqlen_kv, head_dim, head_dim_v
 *   dtype, flags, algorithm   one byte each (signed for dtype and algorithm)
 *   scale            a tag byte: 0 default, 1 four raw bytes, 2 NaN, 3 infinity, else (t-128)/16
 *   8 tensors        q, k, v, o, then for the backward d_o, dq, dk, dv; each: a buffer byte
 *                    (BUFFERS of them, then a NULL buffer, then a NULL tensor), a layout byte
 *                    (0 bshd, 1 bhsd, else raw) and an offset size, then three stride sizes
 *                    (batch, seq, head) for a raw layout
 * A KV cache call (mode bit 7; clattn__check_cache_forward, or with bit 0 clattn_kv_append's
 * clattn__check_kv_cache): after the scale, tensors q and o (append: k_new and v_new), then the
 * cache: its dtype byte (signed), page_size, num_pages and max_pages sizes, its k and v tensors
 * (seq: the page size, or seqlen_kv when contiguous), and a buffer byte each for block_table,
 * seqlens, k_scale and v_scale (BUFFERS and above: NULL). An accepted cache has a dtype that is
 * the problem's or CLATTN_I8 (with both scales, and none otherwise), a page size of 0 (no pages,
 * no table) or a power of two up to 256 with a table, 1..2^31-1 pages and max_pages * page_size
 * >= seqlen_kv, lengths, every view and array (table, lengths, scales) inside its buffer, and no
 * output (o and lse; appended: the cache's k, v and scales) overlapping itself or anything
 * else of the call.
 *
 * Checked, on top of "no crash, no undefined behaviour": a failure has a fresh message; an
 * accepted problem is one the kernels can run (head dims, divisible heads, finite scale); every
 * element of every accepted view lies inside its buffer (recomputed here in 128-bit
 * arithmetic); no accepted output shares a byte with an input or another output; and no
 * accepted output has two elements at one address (the kernels would race). */
#include "fuzz_input.h"
#include "tune.h"

#include <math.h>
#include <signal.h>

enum { BUFFERS = 7, NULL_BUFFER = BUFFERS, NULL_TENSOR = BUFFERS + 1, CHOICES = BUFFERS + 2 };

/* Made once per process (a harness may keep state; the library may not). */
static clattn_context *ctx;
static cl_context other_cl; /* a second OpenCL context: its buffer must be refused */
static cl_mem buffers[BUFFERS];
/* Scratch for the self-overlap check: a bit per float of the largest root buffer. */
#define ROOT_BYTES ((size_t)256 << 10)
static uint8_t seen[ROOT_BYTES / 8]; /* a bit per element of the smallest type (int8) */
/* Bytes per element of the input's problem (fp32 4, half 2): set per input, before the checks. */
static size_t elem_bytes = sizeof(float);

static void release_all(void) {
  for (int i = BUFFERS - 1; i >= 0; i--)
    if (buffers[i]) clReleaseMemObject(buffers[i]);
  if (other_cl) clReleaseContext(other_cl);
  clattn_context_destroy(ctx);
}

static cl_mem sub_buffer(cl_mem parent, size_t origin, size_t size) {
  cl_buffer_region r = {origin, size};
  cl_int err;
  cl_mem m = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  FUZZ_CHECK(err == CL_SUCCESS, "clCreateSubBuffer: %d", err);
  return m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  /* Loading PoCL loads LLVM, which installs its own crash handlers; libFuzzer, which installs
   * its handlers after this function, then leaves those signals alone, and a broken invariant
   * (abort) would kill the process without saving the input. So the handlers are put back. */
  struct sigaction before[32];
  for (int sig = 1; sig < 32; sig++) sigaction(sig, NULL, &before[sig]);
  clattn_options opt = {"", "", NULL, 0}; /* no disk cache, no tuning database */
  clattn_status st = clattn_context_create_default(&opt, &ctx);
  for (int sig = 1; sig < 32; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &before[sig], NULL);
  FUZZ_CHECK(st == CLATTN_OK, "no context: %s", clattn_last_error(NULL));
  cl_context cl = clattn_context_cl_context(ctx);
  cl_device_id dev = clattn_context_device(ctx);
  cl_platform_id platform;
  cl_int err = clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL);
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  if (err == CL_SUCCESS) other_cl = clCreateContext(props, 1, &dev, NULL, NULL, &err);
  FUZZ_CHECK(err == CL_SUCCESS, "second OpenCL context: %d", err);
  /* Sizes: one float; a page; an odd size; a root with two sub-buffers, one at its start (so
   * views in different cl_mem objects can share bytes) and one at the first aligned origin. */
  size_t align = ctx->device.mem_base_align_bits / 8 ? ctx->device.mem_base_align_bits / 8 : 128;
  const size_t sizes[4] = {4, 4096, 65536 + 4, ROOT_BYTES};
  for (int i = 0; i < 4; i++) {
    buffers[i] = clCreateBuffer(cl, CL_MEM_READ_WRITE, sizes[i], NULL, &err);
    FUZZ_CHECK(err == CL_SUCCESS, "clCreateBuffer(%zu): %d", sizes[i], err);
  }
  buffers[4] = sub_buffer(buffers[3], 0, 4096);
  buffers[5] = sub_buffer(buffers[3], align, 65536);
  buffers[6] = clCreateBuffer(other_cl, CL_MEM_READ_WRITE, 4096, NULL, &err);
  FUZZ_CHECK(err == CL_SUCCESS, "clCreateBuffer in the second context: %d", err);
  atexit(release_all);
  return 0;
}

/* ---- decoding ---- */

static float decode_scale(fuzz_input *in) {
  uint8_t t = fuzz_u8(in);
  float f = 0.0f;
  if (t == 1) {
    uint32_t bits = (uint32_t)fuzz_bytes(in, 4);
    memcpy(&f, &bits, sizeof f);
  } else if (t == 2) {
    f = NAN;
  } else if (t == 3) {
    f = INFINITY;
  } else if (t > 3) {
    f = ((float)t - 128.0f) / 16.0f;
  }
  return f;
}

/* One tensor of seq x heads x dim (the problem's own numbers, defaults applied as the API
 * documents them) or NULL. */
static const clattn_tensor *decode_tensor(fuzz_input *in, clattn_tensor *t, size_t seq,
                                          size_t heads, size_t dim) {
  unsigned choice = fuzz_u8(in) % CHOICES;
  uint8_t layout = fuzz_u8(in);
  cl_mem buf = choice < BUFFERS ? buffers[choice] : NULL;
  if (layout == 0) {
    *t = clattn_bshd(buf, seq, heads, dim);
  } else if (layout == 1) {
    *t = clattn_bhsd(buf, seq, heads, dim);
  } else {
    t->buffer = buf;
  }
  t->offset = fuzz_size(in);
  if (layout > 1) {
    t->stride_batch = fuzz_size(in);
    t->stride_seq = fuzz_size(in);
    t->stride_head = fuzz_size(in);
  }
  return choice == NULL_TENSOR ? NULL : t;
}

/* ---- the oracle ---- */

typedef unsigned __int128 u128;

/* A view as the kernels will touch it: its root buffer and the byte range it spans there. */
typedef struct {
  const char *name;
  const clattn_tensor *t;
  size_t n[4]; /* batch, seq, heads, dim */
  int output;
  cl_mem root;
  u128 lo, hi; /* empty when lo == hi */
  size_t elem; /* bytes per element; 0: the problem's (elem_bytes) */
} view;

static size_t elem_of(const view *w) {
  return w->elem ? w->elem : elem_bytes;
}

static size_t mem_info(cl_mem m, cl_mem_info what) {
  size_t v = 0;
  cl_int err = clGetMemObjectInfo(m, what, sizeof v, &v, NULL);
  FUZZ_CHECK(err == CL_SUCCESS, "clGetMemObjectInfo: %d", err);
  return v;
}

static cl_mem root_of(cl_mem m, size_t *origin) {
  cl_mem parent = NULL;
  cl_int err = clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL);
  FUZZ_CHECK(err == CL_SUCCESS, "clGetMemObjectInfo: %d", err);
  *origin = parent ? mem_info(m, CL_MEM_OFFSET) : 0;
  return parent ? parent : m;
}

/* Every element inside the buffer, the buffer in the context; fills root, lo and hi. */
static void check_in_bounds(view *w) {
  const clattn_tensor *t = w->t;
  w->root = NULL;
  w->lo = w->hi = 0;
  if (w->n[0] && w->n[1] && w->n[2] && w->n[3]) { /* else it touches nothing */
    FUZZ_CHECK(t && t->buffer, "%s: an accepted non-empty view has no buffer", w->name);
    cl_context owner = NULL;
    cl_int err = clGetMemObjectInfo(t->buffer, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    FUZZ_CHECK(err == CL_SUCCESS && owner == clattn_context_cl_context(ctx),
               "%s: a buffer of another context was accepted", w->name);
    u128 last = (u128)t->offset + (u128)(w->n[0] - 1) * t->stride_batch +
                (u128)(w->n[1] - 1) * t->stride_seq + (u128)(w->n[2] - 1) * t->stride_head +
                (w->n[3] - 1);
    u128 end = (last + 1) * elem_of(w);
    size_t size = mem_info(t->buffer, CL_MEM_SIZE), origin;
    FUZZ_CHECK(end <= size, "%s: the view ends at byte %llu of a %zu-byte buffer", w->name,
               (unsigned long long)end, size);
    w->root = root_of(t->buffer, &origin);
    w->lo = origin + (u128)t->offset * elem_of(w);
    w->hi = origin + end;
  }
}

/* The next index of a [n0][n1][n2][n3] walk, the last axis fastest; 0 after the last. */
static int next_index(size_t *i, const size_t *n) {
  int a = 3;
  while (a >= 0 && ++i[a] == n[a]) i[a--] = 0;
  return a >= 0;
}

/* No two elements of an output (in bounds, non-empty) at one address. The view lies in a root
 * of at most ROOT_BYTES, so a collision shows within ROOT_BYTES / elem_bytes + 1 elements: the
 * walk is bounded. */
static void check_no_self_overlap(const view *w) {
  size_t origin_elems = (size_t)(w->lo / elem_of(w)) - w->t->offset;
  memset(seen, 0, sizeof seen);
  size_t i[4] = {0, 0, 0, 0};
  const clattn_tensor *t = w->t;
  do {
    size_t e = origin_elems + t->offset + i[0] * t->stride_batch + i[1] * t->stride_seq +
               i[2] * t->stride_head + i[3];
    FUZZ_CHECK(e / 8 < sizeof seen, "%s: element %zu past the root", w->name, e);
    FUZZ_CHECK(!(seen[e / 8] & (1u << (e % 8))),
               "%s: elements [%zu][%zu][%zu][%zu] and an earlier one share an address "
               "(strides %zu/%zu/%zu, dim %zu)",
               w->name, i[0], i[1], i[2], i[3], t->stride_batch, t->stride_seq, t->stride_head,
               w->n[3]);
    seen[e / 8] |= (uint8_t)(1u << (e % 8));
  } while (next_index(i, w->n));
}

/* Calls f(w, element index in the root) for every element of a view (in bounds, non-empty). */
static void walk(const view *w, void (*f)(const view *, size_t)) {
  size_t origin_elems = (size_t)(w->lo / elem_of(w)) - w->t->offset, i[4] = {0, 0, 0, 0};
  const clattn_tensor *t = w->t;
  do
    f(w, origin_elems + t->offset + i[0] * t->stride_batch + i[1] * t->stride_seq +
             i[2] * t->stride_head + i[3]);
  while (next_index(i, w->n));
}

static void mark(const view *w, size_t e) {
  FUZZ_CHECK(e / 8 < sizeof seen, "%s: element %zu past the root", w->name, e);
  seen[e / 8] |= (uint8_t)(1u << (e % 8));
}

static void unmarked(const view *w, size_t e) {
  FUZZ_CHECK(e / 8 < sizeof seen && !(seen[e / 8] & (1u << (e % 8))),
             "%s: element %zu is the other view's too", w->name, e);
}

/* Two views of one element size that share a root: no element in both (K and V interleaved). */
static void check_disjoint(const view *a, const view *b) {
  memset(seen, 0, sizeof seen);
  walk(a, mark);
  walk(b, unmarked);
}

static int overlap(const view *a, const view *b) {
  return a->root && a->root == b->root && a->lo < b->hi && b->lo < a->hi;
}

static void check_accepted(const clattn__shape *s, int backward, view *views, int nviews,
                           cl_mem lse) {
  FUZZ_CHECK(s->elem == (s->dtype == CLATTN_F32 ? 4u : 2u), "dtype %d with %zu-byte elements",
             (int)s->dtype, s->elem);
  elem_bytes = s->elem;
  FUZZ_CHECK(s->d >= 1 && s->dv >= 1 && s->d <= 16384 && s->dv <= 16384, "head dims %zu/%zu", s->d,
             s->dv);
  FUZZ_CHECK(s->algo != CLATTN_ALGO_FUSED || (s->d <= 256 && s->dv <= 256),
             "fused with head dims %zu/%zu", s->d, s->dv);
  FUZZ_CHECK(s->heads_q == 0 || (s->heads_kv >= 1 && s->heads_q % s->heads_kv == 0),
             "heads %zu/%zu", s->heads_q, s->heads_kv);
  FUZZ_CHECK(isfinite(s->scale) && s->scale != 0.0f, "scale %g", (double)s->scale);
  FUZZ_CHECK(s->empty == (s->batch == 0 || s->heads_q == 0 || s->seqlen_q == 0), "empty %d",
             s->empty);
  for (int i = 0; i < nviews; i++) check_in_bounds(&views[i]);
  view l = {"lse", NULL, {0}, 0, NULL, 0, 0, 0};
  if (!s->empty && (lse || backward)) {
    FUZZ_CHECK(lse != NULL, "the backward was accepted without lse");
    /* [batch][heads_q][seqlen_q], or with CLATTN_VARLEN [heads_q][total_q] */
    u128 bytes = s->varlen ? (u128)s->heads_q * s->total_q * sizeof(float)
                           : (u128)s->batch * s->heads_q * s->seqlen_q * sizeof(float);
    size_t size = mem_info(lse, CL_MEM_SIZE), origin;
    FUZZ_CHECK(bytes <= size, "lse: needs %llu bytes of %zu", (unsigned long long)bytes, size);
    l.root = root_of(lse, &origin);
    l.lo = origin, l.hi = origin + bytes;
  }
  for (int i = 0; i < nviews; i++) {
    if (!views[i].output) continue;
    if (views[i].root) check_no_self_overlap(&views[i]);
    FUZZ_CHECK(!overlap(&views[i], &l), "%s overlaps lse", views[i].name);
    for (int j = 0; j < nviews; j++)
      FUZZ_CHECK(j == i || !overlap(&views[i], &views[j]), "%s overlaps %s", views[i].name,
                 views[j].name);
  }
  /* In the forward, lse is an output too. */
  for (int j = 0; !backward && j < nviews; j++)
    FUZZ_CHECK(!overlap(&l, &views[j]), "lse overlaps %s", views[j].name);
}

/* An accepted call: the views as the kernels will touch them, checked. */
static void check_call(const clattn__shape *s, int backward, const clattn_tensor *q,
                       const clattn_tensor *k, const clattn_tensor *v, const clattn_tensor *o,
                       const clattn_tensor *d_o, const clattn_tensor *dq, const clattn_tensor *dk,
                       const clattn_tensor *dvt, cl_mem lse) {
  /* The extents the kernels touch: nothing when the problem is empty, except that the backward
   * writes dk and dv (zeros) for keys that no query sees. */
  size_t b = s->varlen ? 1 : s->batch; /* CLATTN_VARLEN: one entry of the totals' rows */
  size_t all_q = s->varlen ? s->total_q : s->seqlen_q,
         all_kv = s->varlen ? s->total_kv : s->seqlen_kv;
  size_t nq = s->empty ? 0 : all_q, nkv = s->empty ? 0 : all_kv;
  size_t hq = s->heads_q, bk = s->heads_q ? s->heads_kv : 0;
  view views[8] = {
      {"q", q, {b, nq, hq, s->d}, 0, NULL, 0, 0, 0},
      {"k", k, {b, nkv, s->heads_kv, s->d}, 0, NULL, 0, 0, 0},
      {"v", v, {b, nkv, s->heads_kv, s->dv}, 0, NULL, 0, 0, 0},
      {"o", o, {b, nq, hq, s->dv}, !backward, NULL, 0, 0, 0},
      {"d_o", d_o, {b, nq, hq, s->dv}, 0, NULL, 0, 0, 0},
      {"dq", dq, {b, nq, hq, s->d}, 1, NULL, 0, 0, 0},
      {"dk", dk, {b, all_kv, bk, s->d}, 1, NULL, 0, 0, 0},
      {"dv", dvt, {b, all_kv, bk, s->dv}, 1, NULL, 0, 0, 0},
  };
  check_accepted(s, backward, views, backward ? 8 : 4, lse);
}

/* ---- KV caches ---- */

/* An array of bytes bytes in buffer m (NULL: absent), in bounds when accepted: a view for the
 * overlap checks. */
static view array_view(const char *name, cl_mem m, u128 bytes) {
  view w = {name, NULL, {0}, 0, NULL, 0, 0, 1};
  if (!m || !bytes) return w;
  size_t size = mem_info(m, CL_MEM_SIZE), origin;
  FUZZ_CHECK(bytes <= size, "%s: needs %llu bytes of %zu", name, (unsigned long long)bytes, size);
  w.root = root_of(m, &origin);
  w.lo = origin, w.hi = origin + bytes;
  return w;
}

static cl_mem decode_buffer(fuzz_input *in) {
  unsigned choice = fuzz_u8(in) % CHOICES;
  return choice < BUFFERS ? buffers[choice] : NULL;
}

/* An accepted cache call: the rules above. */
static void check_cache_call(const clattn__shape *s, int append, const clattn_kv_cache *c,
                             const clattn_tensor *a, const clattn_tensor *b, cl_mem lse) {
  elem_bytes = s->elem;
  FUZZ_CHECK(c->dtype == s->dtype || c->dtype == CLATTN_I8, "cache dtype %d for a problem's %d",
             (int)c->dtype, (int)s->dtype);
  FUZZ_CHECK(c->seqlens, "no lengths");
  FUZZ_CHECK((c->dtype == CLATTN_I8) == (c->k_scale && c->v_scale) &&
                 (c->dtype == CLATTN_I8 || (!c->k_scale && !c->v_scale)),
             "scales and dtype %d disagree", (int)c->dtype);
  if (!c->page_size) {
    FUZZ_CHECK(!c->num_pages && !c->max_pages && !c->block_table, "pages without a page size");
  } else {
    FUZZ_CHECK(c->page_size <= 256 && !(c->page_size & (c->page_size - 1)), "page size %zu",
               c->page_size);
    FUZZ_CHECK(c->block_table && c->num_pages >= 1 && c->num_pages <= INT32_MAX,
               "table %p, %zu pages", (void *)c->block_table, c->num_pages);
    FUZZ_CHECK((u128)c->max_pages * c->page_size >= s->seqlen_kv, "%zu pages of %zu < %zu",
               c->max_pages, c->page_size, s->seqlen_kv);
  }
  size_t hkv = s->heads_q ? s->heads_kv : 0, slots = c->page_size ? c->num_pages : s->batch;
  size_t per = c->page_size ? c->page_size : s->seqlen_kv, e = c->dtype == CLATTN_I8 ? 1 : s->elem;
  /* An append's new rows are ops/kvcache.c's to check, after these: not seen here. */
  size_t nq = s->empty || append ? 0 : s->seqlen_q, hq = s->heads_q;
  u128 scales = (u128)slots * per * hkv * 4;
  view v[10] = {
      {"kv_cache.k", &c->k, {slots, per, hkv, s->d}, append, NULL, 0, 0, e},
      {"kv_cache.v", &c->v, {slots, per, hkv, s->dv}, append, NULL, 0, 0, e},
      array_view("kv_cache.k_scale", c->k_scale, scales),
      array_view("kv_cache.v_scale", c->v_scale, scales),
      array_view("kv_cache.block_table", c->block_table, (u128)s->batch * c->max_pages * 4),
      array_view("kv_cache.seqlens", c->seqlens, (u128)s->batch * 4),
      {append ? "k_new" : "q",
       a,
       {s->batch, nq, append ? s->heads_kv : hq, s->d},
       0,
       NULL,
       0,
       0,
       0},
      {append ? "v_new" : "o",
       b,
       {s->batch, nq, append ? s->heads_kv : hq, s->dv},
       !append,
       NULL,
       0,
       0,
       0},
      array_view("lse", append ? NULL : lse, nq ? (u128)s->lse_rows * 4 : 0),
  };
  v[2].output = v[3].output = append, v[8].output = !append;
  int n = 9;
  for (int i = 0; i < 2; i++) check_in_bounds(&v[i]);
  for (int i = 6; i < 8; i++) check_in_bounds(&v[i]);
  for (int i = 0; i < n; i++) {
    if (!v[i].output) continue;
    if (v[i].root && v[i].t) check_no_self_overlap(&v[i]);
    for (int j = 0; j < n; j++) {
      if (i + j == 1 && overlap(&v[0], &v[1])) { /* K and V may interleave */
        check_disjoint(&v[0], &v[1]);
        continue;
      }
      FUZZ_CHECK(j == i || !overlap(&v[i], &v[j]), "%s overlaps %s", v[i].name, v[j].name);
    }
  }
}

/* The cache call's decoding and checks. */
static void cache_call(fuzz_input *in, const clattn_problem *p, int append, cl_mem lse) {
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q,
         dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  clattn_tensor t[4];
  const clattn_tensor *a =
      decode_tensor(in, &t[0], p->seqlen_q, append ? hkv : p->heads_q, p->head_dim);
  const clattn_tensor *b = decode_tensor(in, &t[1], p->seqlen_q, append ? hkv : p->heads_q, dv);
  clattn_kv_cache c;
  memset(&c, 0, sizeof c);
  c.dtype = (clattn_dtype)(int8_t)fuzz_u8(in);
  c.page_size = fuzz_size(in), c.num_pages = fuzz_size(in), c.max_pages = fuzz_size(in);
  size_t per = c.page_size ? c.page_size : p->seqlen_kv;
  const clattn_tensor *k = decode_tensor(in, &t[2], per, hkv, p->head_dim);
  const clattn_tensor *v = decode_tensor(in, &t[3], per, hkv, dv);
  if (k) c.k = *k;
  if (v) c.v = *v;
  c.block_table = decode_buffer(in), c.seqlens = decode_buffer(in);
  c.k_scale = decode_buffer(in), c.v_scale = decode_buffer(in);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, p, &s);
  clattn_args args;
  memset(&args, 0, sizeof args);
  if (a) args.q = *a;
  if (b) args.o = *b;
  args.lse = lse, args.kv_cache = &c;
  clattn__region r[6];
  if (st == CLATTN_OK)
    st = append ? clattn__check_kv_cache(ctx, &s, &c, 1, r)
                : clattn__check_cache_forward(ctx, &s, &args);
  if (st != CLATTN_OK) {
    FUZZ_CHECK(st == CLATTN_ERR_INVALID_ARGUMENT || st == CLATTN_ERR_UNSUPPORTED, "status %d",
               (int)st);
    FUZZ_CHECK(clattn_last_error(ctx)[0] != 0, "status %d without a message", (int)st);
  } else {
    check_cache_call(&s, append, &c, a, b, lse);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, size, 0};
  uint8_t mode = fuzz_u8(&in);
  int backward = mode & 1;
  cl_mem lse = mode & 2 ? buffers[(mode >> 2) % BUFFERS] : NULL;
  clattn_problem p;
  memset(&p, 0, sizeof p);
  p.batch = fuzz_size(&in), p.heads_q = fuzz_size(&in), p.heads_kv = fuzz_size(&in);
  p.seqlen_q = fuzz_size(&in), p.seqlen_kv = fuzz_size(&in);
  p.head_dim = fuzz_size(&in), p.head_dim_v = fuzz_size(&in);
  p.dtype = (clattn_dtype)(int8_t)fuzz_u8(&in);
  p.flags = fuzz_u8(&in);
  /* CLATTN_VARLEN's views are [total][heads][dim]: the totals as the lengths */
  if (p.flags & CLATTN_VARLEN) p.total_q = p.seqlen_q, p.total_kv = p.seqlen_kv;
  p.algorithm = (clattn_algorithm)(int8_t)fuzz_u8(&in);
  p.scale = decode_scale(&in);
  if (mode & 0x80) {
    clattn__fail(ctx, CLATTN_OK, "%s", "");
    cache_call(&in, &p, backward, lse);
    return 0;
  }
  size_t hkv = p.heads_kv ? p.heads_kv : p.heads_q, dv = p.head_dim_v ? p.head_dim_v : p.head_dim;
  clattn_tensor t[8];
  const clattn_tensor *q = decode_tensor(&in, &t[0], p.seqlen_q, p.heads_q, p.head_dim);
  const clattn_tensor *k = decode_tensor(&in, &t[1], p.seqlen_kv, hkv, p.head_dim);
  const clattn_tensor *v = decode_tensor(&in, &t[2], p.seqlen_kv, hkv, dv);
  const clattn_tensor *o = decode_tensor(&in, &t[3], p.seqlen_q, p.heads_q, dv);
  const clattn_tensor *d_o = NULL, *dq = NULL, *dk = NULL, *dvt = NULL;
  if (backward) {
    d_o = decode_tensor(&in, &t[4], p.seqlen_q, p.heads_q, dv);
    dq = decode_tensor(&in, &t[5], p.seqlen_q, p.heads_q, p.head_dim);
    dk = decode_tensor(&in, &t[6], p.seqlen_kv, hkv, p.head_dim);
    dvt = decode_tensor(&in, &t[7], p.seqlen_kv, hkv, dv);
  }

  clattn__fail(ctx, CLATTN_OK, "%s", ""); /* so a failure's message is seen to be its own */
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, &p, &s);
  if (st == CLATTN_OK)
    st = backward ? clattn__check_backward_tensors(ctx, &s, q, k, v, o, d_o, lse, dq, dk, dvt)
                  : clattn__check_forward_tensors(ctx, &s, q, k, v, o, lse);
  if (st != CLATTN_OK) {
    FUZZ_CHECK(st == CLATTN_ERR_INVALID_ARGUMENT || st == CLATTN_ERR_UNSUPPORTED, "status %d",
               (int)st);
    FUZZ_CHECK(clattn_last_error(ctx)[0] != 0, "status %d without a message", (int)st);
  } else {
    check_call(&s, backward, q, k, v, o, d_o, dq, dk, dvt, lse);
  }
  return 0;
}
