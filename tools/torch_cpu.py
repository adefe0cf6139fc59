#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the CPU, per backend, beside `clattn bench` on PoCL.

usage: torch_cpu.py [--d 64,128] [--n 512,1024] [--causal 0,1] [--batch 1] [--heads 1]
                    [--backward] [--repeat 3] [--json out.json]
The JSON rows are ../shared/peers/torch_sdpa.py's (tools/gpu-table.py merges them with
`clattn bench --json`), timed by the wall clock (median of --repeat after one warm-up) on
torch's own CPU threads. FLOPs: forward 4*B*H*N*N*d (halved when causal); forward+backward 3.5x.
"""
import argparse, json, time
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


def median_seconds(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--n", default="512,1024,2048,4096")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for d in map(int, a.d.split(",")):
        for n in map(int, a.n.split(",")):
            for causal in map(int, a.causal.split(",")):
                b, h = a.batch, a.heads
                q = torch.randn(b, h, n, d, dtype=torch.float32, requires_grad=a.backward)
                k, v = torch.randn_like(q, requires_grad=a.backward), torch.randn_like(q, requires_grad=a.backward)
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
                for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
                    row = dict(dtype="float32", d=d, n=n, batch=b, heads=h, causal=bool(causal),
                               backend=be.name, threads=torch.get_num_threads())
                    try:
                        with sdpa_kernel([be]):
                            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                            with torch.no_grad():
                                t = median_seconds(f, a.repeat)
                            row.update(fwd_ms=t * 1e3, fwd_tflops=flops / t / 1e12)
                            if a.backward:
                                g = torch.randn_like(f())
                                tb = median_seconds(lambda: torch.autograd.grad(f(), (q, k, v), g), a.repeat)
                                row.update(fwdbwd_ms=tb * 1e3, fwdbwd_tflops=3.5 * flops / tb / 1e12)
                    except RuntimeError as e:
                        row["error"] = str(e).splitlines()[0][:100]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
