#!/usr/bin/env python3
"""Decode attention beside clattn (issue 18): PyTorch SDPA's backends over a contiguous KV cache,
heads 32 / KV heads 8 (enable_gqa), d = 128, batch x context x query rows as asked, fp16 by
default; the median of 30 calls after 5, by CUDA events, each call reading one of enough copies
of K and V to exceed twice the L2 (as `clattn run --kv-cache` rotates), so no call is served
from a warm cache. Prints one JSON row per (shape, backend); --json writes them all.
usage: torch_decode.py [--dtype float16] [--batch 1,8,64] [--context 4096,32768,131072]
                       [--rows 1,4] [--json out]"""
import argparse, json, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

L2 = 50 * 2**20  # the H200's

def med(fn, n, iters=30):
    for i in range(5): fn(i % n)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for i in range(iters):
        s.record(); fn(i % n); e.record(); torch.cuda.synchronize(); t.append(s.elapsed_time(e))
    t.sort(); return t[len(t) // 2]

ap = argparse.ArgumentParser()
ap.add_argument("--dtype", default="float16")
ap.add_argument("--batch", default="1,8,64")
ap.add_argument("--context", default="4096,32768,131072")
ap.add_argument("--rows", default="1,4")
ap.add_argument("--json")
a = ap.parse_args()
dt = getattr(torch, a.dtype)
rows = []
hq, hkv, d = 32, 8, 128
for b in map(int, a.batch.split(",")):
    for n in map(int, a.context.split(",")):
        kv_bytes = 2 * b * hkv * n * d * torch.tensor([], dtype=dt).element_size()
        copies = min(32, 2 * L2 // kv_bytes + 1)
        try:
            ks = [torch.randn(b, hkv, n, d, device="cuda", dtype=dt) for _ in range(copies)]
            vs = [torch.randn_like(ks[0]) for _ in range(copies)]
        except torch.OutOfMemoryError as ex:
            rows.append(dict(dtype=a.dtype, batch=b, nkv=n, error="out of memory")); continue
        for nq in map(int, a.rows.split(",")):
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
            for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                       SDPBackend.EFFICIENT_ATTENTION):
                r = dict(dtype=a.dtype, batch=b, hq=hq, hkv=hkv, nq=nq, nkv=n, d=d,
                         backend=be.name, copies=copies)
                try:
                    with sdpa_kernel([be]):
                        f = lambda i: F.scaled_dot_product_attention(q, ks[i], vs[i],
                                                                     enable_gqa=True)
                        ms = med(f, copies)
                    r.update(ms=ms, kv_gbps=kv_bytes / ms / 1e6)
                except Exception as ex:
                    r.update(error=str(ex).splitlines()[0][:100])
                rows.append(r); print(json.dumps(r), flush=True)
        del ks, vs; torch.cuda.empty_cache()
if a.json: json.dump(rows, open(a.json, "w"), indent=1)
