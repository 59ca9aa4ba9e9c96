#!/usr/bin/python3
"""Compares per-step logits dumps (float32 rows of V): oneinfer against ONNX Runtime, or the
cached graph against the default one.

usage: compare_logits.py ours.bin theirs.bin VOCAB --mode ort|ort-tie|kl [--tol 1e-4] [--tie 1e-3] [--kl-max 1e-6]
  ort      every step: max|diff| <= tol * max|logit| and the same greedy token
  ort-tie  the same up to the first step where the oracle's top two logits are within --tie of
           each other (float16 and int8-activation models: rounding may pick either there)
  kl       mean KL divergence of the two distributions <= kl-max, same greedy tokens
Prints one line per check and exits non-zero when a check fails.
"""
import argparse
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("ours")
p.add_argument("theirs")
p.add_argument("vocab", type=int)
p.add_argument("--mode", choices=["ort", "ort-tie", "kl"], required=True)
p.add_argument("--tie", type=float, default=1e-3)
p.add_argument("--min-steps", type=int, default=1, help="ort-tie: fewer steps before the near-tie fail")
p.add_argument("--tol", type=float, default=1e-4)
p.add_argument("--kl-max", type=float, default=1e-6)
p.add_argument("--label", default="")
a = p.parse_args()
x = np.fromfile(a.ours, dtype=np.float32).reshape(-1, a.vocab).astype(np.float64)
y = np.fromfile(a.theirs, dtype=np.float32).reshape(-1, a.vocab).astype(np.float64)
if x.shape != y.shape:
    print(f"{a.label}: step counts differ: {x.shape[0]} vs {y.shape[0]}")
    sys.exit(1)
if a.mode == "ort-tie":
    top2 = np.sort(y, axis=1)[:, -2:]
    near = np.nonzero(top2[:, 1] - top2[:, 0] <= a.tie)[0]
    steps = int(near[0]) if near.size else x.shape[0]
    x, y = x[:steps], y[:steps]
    a.label += f" (first {steps} steps: " + (f"ONNX Runtime's top two are within {a.tie:g} at step {steps})" if near.size
                                            else "no near-tie)")
same_tokens = bool((x.argmax(1) == y.argmax(1)).all())
if a.mode in ("ort", "ort-tie"):
    rel = np.abs(x - y).max(1) / np.abs(y).max(1) if x.shape[0] else np.zeros(1)
    ok = same_tokens and rel.max() <= a.tol and x.shape[0] >= a.min_steps
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
