#!/usr/bin/python3
"""Compares per-step logits dumps (float32 rows of V): oneinfer against ONNX Runtime, or the
cached graph against the default one.

usage: compare_logits.py ours.bin theirs.bin VOCAB --mode ort|kl [--tol 1e-4] [--kl-max 1e-6]
Prints one line per check and exits non-zero when a check fails.
"""
import argparse
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("ours")
p.add_argument("theirs")
p.add_argument("vocab", type=int)
p.add_argument("--mode", choices=["ort", "kl"], required=True)
p.add_argument("--tol", type=float, default=1e-4)
p.add_argument("--kl-max", type=float, default=1e-6)
p.add_argument("--label", default="")
a = p.parse_args()
x = np.fromfile(a.ours, dtype=np.float32).reshape(-1, a.vocab).astype(np.float64)
y = np.fromfile(a.theirs, dtype=np.float32).reshape(-1, a.vocab).astype(np.float64)
if x.shape != y.shape:
    print(f"{a.label}: step counts differ: {x.shape[0]} vs {y.shape[0]}")
    sys.exit(1)
same_tokens = bool((x.argmax(1) == y.argmax(1)).all())
if a.mode == "ort":
    rel = np.abs(x - y).max(1) / np.abs(y).max(1)
    ok = same_tokens and rel.max() <= a.tol
    print(f"{a.label}: {x.shape[0]} steps, worst per-step max|diff|/max|logit| = {rel.max():.3e} (limit {a.tol:g}), "
          f"greedy tokens {'identical' if same_tokens else 'DIFFER'}")
else:
    def logsoftmax(z):
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))
    lp, lq = logsoftmax(x), logsoftmax(y)
    kl = (np.exp(lq) * (lq - lp)).sum(1)
    ok = same_tokens and kl.mean() <= a.kl_max
    print(f"{a.label}: {x.shape[0]} steps, mean KL = {kl.mean():.3e} (limit {a.kl_max:g}), max KL = {kl.max():.3e}, "
          f"greedy tokens {'identical' if same_tokens else 'DIFFER'}")
sys.exit(0 if ok else 1)
