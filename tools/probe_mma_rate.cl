/* The dense mma.sync rate (issue 19's yardstick): each warp runs CHAINS independent chains of
 * mma.sync m16n8k16 (fp16 in, or bf16 with MMA_BF16=1; fp32 accumulators) on fragments held in
 * registers, iters steps long, so nothing but the tensor cores is timed. 4096 FLOPs per mma. out
 * gets each work-item's sum, so that nothing is optimised away. Built by tools/ptx_probe.c. */
#if MMA_BF16
#define MMA_T "bf16"
#else
#define MMA_T "f16"
#endif
#define CHAINS 8

__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void probe_mma_rate(__global float *out,
                                                                              uint iters) {
  const uint one2 = 0x3c003c00u; /* fp16 1.0 twice (as bf16 a small value: the rate is the same) */
  const uint a0 = one2, a1 = one2 ^ (uint)get_local_id(0), a2 = one2, a3 = one2;
  const uint b0 = one2, b1 = one2;
  float c[CHAINS][4];
  for (uint k = 0; k < CHAINS; k++) c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.0f;
  for (uint i = 0; i < iters; i++) {
#pragma unroll
    for (uint k = 0; k < CHAINS; k++)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32 "
                   "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                   : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  float s = 0.0f;
  for (uint k = 0; k < CHAINS; k++) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  out[get_global_id(0)] = s;
}
