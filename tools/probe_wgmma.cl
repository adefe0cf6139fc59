/* The wgmma probe (issue 19): one warpgroup (128 work-items) computes D = A B with Hopper's
 * wgmma.mma_async m64n8k16 (fp16 in, fp32 out), A (64 x 16, every element 1) from registers and B
 * (16 x 8, every element 1) from local memory through a matrix descriptor, so every element of
 * D is 16. B lies in the upper half of a local buffer whose lower half holds 2s: a descriptor that
 * points at the buffer's start gives 32, one outside it anything. d[i] gets work-item i's four
 * accumulators. Built by tools/gpu-wgmma-probe.sh's host program; needs PTX .target sm_90a. */
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void probe_wgmma(__global float *d) {
  __local ushort buf[2048] __attribute__((aligned(128)));
  const uint lid = get_local_id(0);
  for (uint i = lid; i < 2048; i += 128) buf[i] = i < 1024 ? 0x4000 : 0x3c00; /* 2.0, 1.0 */
  barrier(CLK_LOCAL_MEM_FENCE);
  /* The descriptor: start address >> 4 (bits 0-13), leading byte offset >> 4 (16-29), stride byte
   * offset >> 4 (32-45), no swizzle. The local pointer's value is its shared-window address. */
  const uint addr = (uint)(size_t)(buf + 1024);
  const ulong desc = (ulong)((addr & 0x3ffffu) >> 4) | ((ulong)(128 >> 4) << 16) |
                     ((ulong)(256 >> 4) << 32);
  const uint one2 = 0x3c003c00u; /* two fp16 ones */
  float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\n\t"
               "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %9, 0;\n\t"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, %8, p, 1, 1, 1;\n\t}\n\t"
               "wgmma.commit_group.sync.aligned;\n\t"
               "wgmma.wait_group.sync.aligned 0;"
               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
               : "r"(one2), "r"(one2), "r"(one2), "r"(one2), "l"(desc), "r"(0));
  d[4 * lid] = c0, d[4 * lid + 1] = c1, d[4 * lid + 2] = c2, d[4 * lid + 3] = c3;
}
