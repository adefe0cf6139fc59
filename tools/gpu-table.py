#!/usr/bin/env python3
"""One combined table from a device call: `clattn bench --json` beside torch_sdpa.py --json.

usage: gpu-table.py BENCH.json TORCH.json > table.md

With `clattn bench --backward` rows, the forward + backward times of torch_sdpa.py --backward.

Rows are matched on (d, N, causal); the shapes must be the same (clattn bench --tokens 16384
--hidden 2048 is torch_sdpa.py's B = 16384/N, H = 2048/d). Ratios are of times: the two count
causal FLOPs differently (clattn the visible pairs, PyTorch exactly half).
"""
import json
import sys


def main():
    bench = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2]))
    # `clattn bench --backward` rows time forward + backward: match torch_sdpa.py --backward's.
    bwd = any(r.get("backward") for r in bench["rows"])
    ms, tf = ("fwdbwd_ms", "fwdbwd_tflops") if bwd else ("fwd_ms", "fwd_tflops")
    # The peers in the bench rows' storage (clattn bench --dtype).
    want = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[
        bench["rows"][0].get("dtype", "f32") if bench["rows"] else "f32"]
    peers = {}
    for r in torch:
        if ms in r and r.get("dtype") == want:
            peers[(r["d"], r["n"], bool(r["causal"]), r["backend"])] = r
    backends = [b for b in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
                if any(k[3] == b for k in peers)]
    names = {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cuDNN",
             "EFFICIENT_ATTENTION": "efficient", "MATH": "math"}
    print(f"device: {bench['device']}  \ncommand: `{bench['command']}`  ")
    print(f"timed: {'forward + backward' if bwd else 'forward'}, storage {want}\n")
    head = ["d", "N", "causal", "B×H", "fused ms", "TFLOP/s", "standard ms", "TFLOP/s"]
    for b in backends:
        head += [f"torch {names[b]} ms", "TFLOP/s"]
    head += ["fused vs standard"] + [f"fused vs {names[b]}" for b in backends]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in bench["rows"]:
        f, s = r["fused"], r["standard"]
        cells = [r["head_dim"], r["seqlen"], "yes" if r["causal"] else "no",
                 f"{r['batch']}×{r['heads']}"]
        for c in (f, s):
            cells += [f"{c['median_ms']:.3f}", f"{c['tflops']:.1f}"] if "median_ms" in c \
                else ["–", "–"]
        ratios = []
        fm = f.get("median_ms")
        ratios.append(f"{s['median_ms'] / fm:.2f}×" if fm and "median_ms" in s else "–")
        for b in backends:
            p = peers.get((r["head_dim"], r["seqlen"], r["causal"], b))
            cells += [f"{p[ms]:.3f}", f"{p[tf]:.1f}"] if p else ["–", "–"]
            ratios.append(f"{p[ms] / fm:.2f}×" if p and fm else "–")
        print("| " + " | ".join(str(c) for c in cells + ratios) + " |")


if __name__ == "__main__":
    main()
