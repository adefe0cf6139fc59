/* The standard path's GEMM operands. CLBlast takes a matrix as (buffer, offset, leading
 * dimension) and, row-major, requires the leading dimension to be at least the row's length; a
 * view's row stride may be anything for which its elements lie in the buffer (a broadcast's 0,
 * rows that overlap). Such a view is copied, per chunk of batch*heads entries, into packed
 * matrices in the workspace after the score matrices (cl/standard.cl's pack_rows), so the
 * standard path runs every view the fused kernels run. A single-row matrix never uses its row
 * stride, so it needs no copy: CLBlast gets the row's length as its leading dimension.
 *
 * Half storage (CLATTN_F16, CLATTN_BF16): SGEMM reads and writes fp32 only (CLBlast's HGEMM
 * accumulates in half and has no bf16), so every half operand has an fp32 copy in the
 * workspace: inputs are widened into it (pack_rows reads stor_t), outputs are written there by
 * their GEMM and rounded into the caller's view afterwards (store_rows). */
#include "ops.h"

#include <stdio.h>

void clattn__std_operand_init(clattn__std_operand *op, const clattn_tensor *t, size_t rows,
                              size_t cols, size_t group, clattn_dtype dtype, int output) {
  op->t = t;
  op->rows = rows, op->cols = cols, op->group = group;
  op->output = output;
  op->direct = !(rows > 1 && t->stride_seq < cols);
  op->packed = dtype != CLATTN_F32 || !op->direct;
  op->pack_at = 0;
  op->slots = 0;
  op->buf = t->buffer;
  op->ld = rows > 1 ? t->stride_seq : cols;
  if (op->packed) op->ld = cols;
}

void clattn__std_operands_place(clattn__std_operand *ops, int n, size_t chunk, size_t at) {
  for (int i = 0; i < n; i++)
    if (ops[i].packed) {
      ops[i].pack_at = at;
      ops[i].slots = chunk;
      at += chunk * ops[i].rows * ops[i].cols;
    }
}

/* One matrix per batch*heads entry of a chunk, also for the outputs of K/V heads (dK, dV under
 * GQA), which need fewer: a chunk touches at most min(count, (count - 1) / group + 2) of them. */
size_t clattn__std_pack_bytes(const clattn__std_operand *ops, int n) {
  size_t bytes = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].packed) bytes += ops[i].rows * ops[i].cols * sizeof(float);
  return bytes;
}

/* The kernels that touch the caller's tensors read them in its storage type. */
static void tensor_options(char *buf, size_t len, const clattn__shape *s) {
  snprintf(buf, len, "-D WG=1 -D CPI=0 -D CAUSAL=0%s", clattn__dtype_define(s->dtype));
}

clattn_status clattn__std_operand_load(clattn_context *ctx, const clattn__shape *s,
                                       clattn__std_operand *op, size_t first, size_t count,
                                       size_t *off) {
  const clattn_tensor *t = op->t;
  size_t mat = op->rows * op->cols;
  for (size_t i = 0; i < count; i++) {
    size_t bh = first + i, b = bh / s->heads_q, h = bh % s->heads_q / op->group;
    if (!op->packed)
      off[i] = t->offset + b * t->stride_batch + h * t->stride_head;
    else if (op->output) /* entry bh / group of the view (its own heads), in its slot */
      off[i] = op->pack_at + bh / op->group % op->slots * mat;
    else
      off[i] = op->pack_at + i * mat;
  }
  if (!op->packed) return CLATTN_OK;
  op->buf = ctx->workspace;
  if (op->output) return CLATTN_OK; /* written by its GEMM, then clattn__std_operand_store */
  cl_kernel k;
  char options[64];
  tensor_options(options, sizeof options, s);
  clattn_status st = clattn__std_kernel(ctx, "pack_rows", options, &k);
  if (st != CLATTN_OK) return st;
  cl_ulong a[7] = {op->pack_at,    t->offset, t->stride_batch, t->stride_seq,
                   t->stride_head, first,     count * mat};
  cl_uint u[4] = {(cl_uint)s->heads_q, (cl_uint)op->group, (cl_uint)op->rows, (cl_uint)op->cols};
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &ctx->workspace);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, 8, &a[0]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof(cl_mem), &t->buffer);
  for (int i = 1; i < 5 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 2 + i, 8, &a[i]);
  for (int i = 0; i < 4 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 7 + i, 4, &u[i]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 11, 8, &a[5]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 12, 8, &a[6]);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clSetKernelArg(pack_rows)");
  return clattn__std_launch(ctx, k, 13, (count * mat + 63) / 64, 64);
}

clattn_status clattn__std_operand_store(clattn_context *ctx, const clattn__shape *s,
                                        const clattn__std_operand *op, size_t first, size_t count) {
  if (!op->packed || !op->output) return CLATTN_OK;
  /* The view's entries whose every GEMM has run: under GQA, entry e of dK sums query heads
   * [e * group, (e + 1) * group), the last of which may come in a later chunk (its partial sum
   * stays in its slot until then). */
  size_t lo = first / op->group, hi = (first + count) / op->group, mat = op->rows * op->cols;
  if (hi <= lo) return CLATTN_OK;
  cl_kernel k;
  char options[64];
  tensor_options(options, sizeof options, s);
  clattn_status st = clattn__std_kernel(ctx, "store_rows", options, &k);
  if (st != CLATTN_OK) return st;
  const clattn_tensor *t = op->t;
  cl_ulong a[8] = {t->offset, t->stride_batch, t->stride_seq,  t->stride_head, op->pack_at,
                   lo,        op->slots,       (hi - lo) * mat};
  cl_uint u[3] = {(cl_uint)(s->heads_q / op->group), (cl_uint)op->rows, (cl_uint)op->cols};
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &t->buffer);
  for (int i = 0; i < 4 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 1 + i, 8, &a[i]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 5, sizeof(cl_mem), &ctx->workspace);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 6, 8, &a[4]);
  for (int i = 0; i < 3 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 7 + i, 4, &u[i]);
  for (int i = 5; i < 8 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 5 + i, 8, &a[i]);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clSetKernelArg(store_rows)");
  return clattn__std_launch(ctx, k, 13, ((hi - lo) * mat + 63) / 64, 64);
}

clattn_status clattn__std_outputs_direct(clattn_context *ctx, const clattn__std_operand *ops,
                                         const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!ops[i].direct)
      return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                          "standard attention: output %s has row stride %zu below its row of %zu "
                          "over %zu rows, which CLBlast cannot write",
                          names[i], ops[i].t->stride_seq, ops[i].cols, ops[i].rows);
  return CLATTN_OK;
}
