/* Kernel arguments set in order, the first failure kept: what the families' bind functions
 * and the standard path's kernels share. */
#include "kernels.h"

#include <string.h>

cl_int clattn__set_arg(cl_kernel k, clattn__argmemo *memo, cl_uint i, size_t size,
                       const void *value) {
  if (!memo || i >= CLATTN__MEMO_ARGS || size > sizeof memo->val[0])
    return clSetKernelArg(k, i, size, value);
  if (memo->size[i] == size && !memcmp(&memo->val[i], value, size)) return CL_SUCCESS;
  memo->size[i] = 0; /* unknown until set */
  cl_int err = clSetKernelArg(k, i, size, value);
  if (err == CL_SUCCESS) memcpy(&memo->val[i], value, size), memo->size[i] = (unsigned char)size;
  return err;
}

void clattn__arg(clattn__args *a, size_t size, const void *value) {
  if (a->err == CL_SUCCESS) a->err = clattn__set_arg(a->kernel, a->memo, a->next, size, value);
  a->next++;
}

void clattn__arg_mem(clattn__args *a, const cl_mem *buffer) {
  if (a->memo && a->next < CLATTN__MEMO_ARGS) a->memo->size[a->next] = 0;
  if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->kernel, a->next, sizeof *buffer, buffer);
  a->next++;
}

void clattn__arg_view(clattn__args *a, const clattn_tensor *t) {
  cl_ulong v[4] = {t->offset, t->stride_batch, t->stride_seq, t->stride_head};
  for (int i = 0; i < 4; i++) clattn__arg(a, sizeof v[i], &v[i]);
}

void clattn__arg_variants(clattn__args *a, const clattn__shape *s, double unit) {
  if (s->mask) {
    cl_long lo = s->mask_lo, hi = s->mask_hi;
    clattn__arg(a, sizeof lo, &lo);
    clattn__arg(a, sizeof hi, &hi);
  }
  if (s->softcap > 0.0f) {
    cl_float cap = (cl_float)(s->softcap * unit);
    clattn__arg(a, sizeof cap, &cap);
  }
  cl_float u = (cl_float)unit;
  if (s->alibi) {
    cl_ulong mod = s->alibi_mod ? s->alibi_mod : 1;
    clattn__arg_mem(a, &s->alibi);
    clattn__arg(a, sizeof mod, &mod);
    clattn__arg(a, sizeof u, &u);
  }
  cl_uint heads = (cl_uint)s->heads_q;
  if (s->sinks) {
    clattn__arg_mem(a, &s->sinks);
    clattn__arg(a, sizeof heads, &heads);
    clattn__arg(a, sizeof u, &u);
  }
  cl_int align = s->kv_align;
  if (s->seqlens_kv) {
    clattn__arg_mem(a, &s->seqlens_kv);
    clattn__arg(a, sizeof align, &align);
    clattn__arg(a, sizeof heads, &heads);
  } else if (s->varlen) {
    cl_ulong tq = s->total_q, tkv = s->total_kv;
    clattn__arg_mem(a, &s->cu_q);
    clattn__arg_mem(a, &s->cu_kv);
    clattn__arg(a, sizeof tq, &tq);
    clattn__arg(a, sizeof tkv, &tkv);
    clattn__arg(a, sizeof align, &align);
  }
}

void clattn__arg_cache(clattn__args *a, const clattn__shape *s) {
  if (s->kv_paged) {
    cl_uint cols = (cl_uint)s->max_pages, pages = (cl_uint)s->num_pages, shift = 0;
    while (((size_t)1 << shift) < s->page_size) shift++;
    clattn__arg_mem(a, &s->block_table);
    clattn__arg(a, sizeof cols, &cols);
    clattn__arg(a, sizeof pages, &pages);
    clattn__arg(a, sizeof shift, &shift);
  }
  if (s->kv_i8) {
    cl_ulong sc_sb = s->sc_sb;
    clattn__arg_mem(a, &s->k_scale);
    clattn__arg_mem(a, &s->v_scale);
    clattn__arg(a, sizeof sc_sb, &sc_sb);
  }
}
