#!/usr/bin/env python3
"""One table of tools/gpu-decode.sh's clattn lines (decode_time.txt) and PyTorch's rows
(decode_torch.json): per shape the clattn caches' time, K/V bandwidth and share of the
streaming read, the model's ratio, the host's cost, and PyTorch's best backend beside them.
usage: gpu-decode-table.py decode_time.txt decode_torch.json"""
import json, re, sys

torch = {}
try:
    for r in json.load(open(sys.argv[2])):
        if "ms" in r:
            k = (r["batch"], r["nkv"], r["nq"])
            if k not in torch or r["ms"] < torch[k][0]: torch[k] = (r["ms"], r["backend"], r["kv_gbps"])
except (OSError, ValueError) as ex:
    print(f"(no PyTorch rows: {ex})")
print("| cache | dtype | batch | context | rows | ms | K/V GB/s | % of stream | measured / model "
      "| host µs | PyTorch best ms (backend) | clattn speed vs PyTorch | plan, key ranges |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    head, _, rest = line.partition("|")
    kind, cdt, b, ctx, nq = head.split()
    b, ctx, nq = int(b), int(ctx), int(nq)
    m = re.search(r"median ([0-9.]+) ms", rest)
    g = re.search(r"read: ([0-9.]+) GB/s = ([0-9]+)%", rest)
    mo = re.search(r"measured / model ([0-9.]+)", rest)
    h = re.search(r"host: +([0-9.]+) us", rest)
    pl = re.search(r"plan: +\S+ BQ=(\d+) BKV=(\d+) TPR=(\d+).*?; (\d+) key range", rest)
    plan = f"{pl.group(1)}/{pl.group(2)}/{pl.group(3)}, {pl.group(4)}" if pl else "-"
    if not m:
        print(f"| {kind} | {cdt} | {b} | {ctx} | {nq} | failed: {rest.strip()[:80]} ||||||||")
        continue
    ms = float(m.group(1))
    t = torch.get((b, ctx, nq))
    peer = f"{t[0]:.4f} ({t[1].split('_')[0].lower()})" if t else "-"
    ratio = f"{t[0] / ms:.2f}x" if t else "-"
    print(f"| {kind} | {cdt} | {b} | {ctx} | {nq} | {ms:.4f} | {g.group(1) if g else '-'} | "
          f"{g.group(2) + '%' if g else '-'} | {mo.group(1) if mo else '-'} | "
          f"{h.group(1) if h else '-'} | {peer} | {ratio} | {plan} |")
