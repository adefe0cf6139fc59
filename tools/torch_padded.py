#!/usr/bin/env python3
"""A padded batch in PyTorch, beside clattn's seqlens_kv and varlen calls of the same lengths:
scaled_dot_product_attention on [B, H, N, d] with a boolean key-padding mask (entry b's rows see
keys j < L_b; queries past L_b are computed and ignored), per backend, and on nested jagged
tensors (PyTorch's varlen path: each sequence L_b by L_b). Medians of CUDA-event timings after
warm-up, one JSON line per row.

usage: torch_padded.py --lengths L1,L2,... --n N --heads H --d D [--dtype float16] [--backward]
"""
import argparse, json
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


def median_seconds(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def timed(row, f, inputs, backward):
    t = median_seconds(f)
    row.update(fwd_ms=t * 1e3)
    if backward:
        out = f()
        g = torch.randn_like(out)
        tb = median_seconds(lambda: torch.autograd.grad(f(), inputs, g))
        row.update(fwdbwd_ms=tb * 1e3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--backward", action="store_true")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    lengths = [int(x) for x in a.lengths.split(",")]
    b, n, h, d, dt = len(lengths), a.n, a.heads, a.d, getattr(torch, a.dtype)
    rg = a.backward
    q = torch.randn(b, h, n, d, device="cuda", dtype=dt, requires_grad=rg)
    k, v = torch.randn_like(q, requires_grad=rg), torch.randn_like(q, requires_grad=rg)
    keys = torch.arange(n, device="cuda")
    mask = (keys[None, :] < torch.tensor(lengths, device="cuda")[:, None])[:, None, None, :]
    mask = mask.expand(b, 1, n, n)
    base = dict(dtype=a.dtype, n=n, heads=h, d=d, lengths=a.lengths)
    for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
               SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        row = dict(base, layout="padded+mask", backend=be.name)
        try:
            with sdpa_kernel([be]):
                timed(row, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                      (q, k, v), a.backward)
        except RuntimeError as e:
            row["error"] = str(e).splitlines()[0][:100]
        print(json.dumps(row), flush=True)
    # Varlen: nested jagged [B, j, H, d] seen as [B, H, j, d].
    try:
        parts = [torch.randn(l, h, d, device="cuda", dtype=dt) for l in lengths]
        def nt():
            return torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=rg,
                                              device="cuda").transpose(1, 2)
        qn, kn, vn = nt(), nt(), nt()
        for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            row = dict(base, layout="nested jagged", backend=be.name)
            try:
                with sdpa_kernel([be]):
                    t = median_seconds(lambda: F.scaled_dot_product_attention(qn, kn, vn))
                    row.update(fwd_ms=t * 1e3)
            except RuntimeError as e:
                row["error"] = str(e).splitlines()[0][:100]
            print(json.dumps(row), flush=True)
    except Exception as e:  # nested tensors missing or refused
        print(json.dumps(dict(base, layout="nested jagged", error=str(e).splitlines()[0][:100])))


if __name__ == "__main__":
    main()
