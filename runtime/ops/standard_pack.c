/* The standard path's GEMM operands. CLBlast takes a matrix as (buffer, offset, leading
 * dimension) and, row-major, requires the leading dimension to be at least the row's length; a
 * view's row stride may be anything for which its elements lie in the buffer (a broadcast's 0,
 * rows that overlap). Such a view is copied, per chunk of batch*heads entries, into packed
 * matrices in the workspace after the score matrices (cl/standard.cl's pack_rows), so the
 * standard path runs every view the fused kernels run. A single-row matrix never uses its row
 * stride, so it needs no copy: CLBlast gets the row's length as its leading dimension. */
#include "ops.h"

void clattn__std_operand_init(clattn__std_operand *op, const clattn_tensor *t, size_t rows,
                              size_t cols, size_t group) {
  op->t = t;
  op->rows = rows, op->cols = cols, op->group = group;
  op->packed = rows > 1 && t->stride_seq < cols;
  op->pack_at = 0;
  op->buf = t->buffer;
  op->ld = rows > 1 ? t->stride_seq : cols;
  if (op->packed) op->ld = cols;
}

void clattn__std_operands_place(clattn__std_operand *ops, int n, size_t chunk, size_t at) {
  for (int i = 0; i < n; i++)
    if (ops[i].packed) {
      ops[i].pack_at = at;
      at += chunk * ops[i].rows * ops[i].cols;
    }
}

size_t clattn__std_pack_bytes(const clattn__std_operand *ops, int n) {
  size_t bytes = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].packed) bytes += ops[i].rows * ops[i].cols * sizeof(float);
  return bytes;
}

clattn_status clattn__std_operand_load(clattn_context *ctx, const clattn__shape *s,
                                       clattn__std_operand *op, size_t first, size_t count,
                                       size_t *off) {
  const clattn_tensor *t = op->t;
  size_t mat = op->rows * op->cols;
  for (size_t i = 0; i < count; i++) {
    size_t bh = first + i, b = bh / s->heads_q, h = bh % s->heads_q / op->group;
    off[i] =
        op->packed ? op->pack_at + i * mat : t->offset + b * t->stride_batch + h * t->stride_head;
  }
  if (!op->packed) return CLATTN_OK;
  op->buf = ctx->workspace;
  cl_kernel k;
  clattn_status st = clattn__std_kernel(ctx, "pack_rows", "-D WG=1 -D CPI=0 -D CAUSAL=0", &k);
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

clattn_status clattn__std_outputs_direct(clattn_context *ctx, const clattn__std_operand *ops,
                                         const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (ops[i].packed)
      return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                          "standard attention: output %s has row stride %zu below its row of %zu "
                          "over %zu rows, which CLBlast cannot write",
                          names[i], ops[i].t->stride_seq, ops[i].cols, ops[i].rows);
  return CLATTN_OK;
}
