#!/usr/bin/python3
"""Per-step accuracy of weight-quantised exports against the float32 one, teacher-forced: the
float model generates STEPS greedy tokens from the prompt; then every model is run on the prompt
plus the first i of those tokens (i = 0 .. STEPS-1) with -n 1, so each step compares logits for
the very same context. Prints KL(float || quant) per step (mean and max) and top-1 agreement.

usage: quant_accuracy.py ONEINFER FLOAT.onnx NAME=MODEL.onnx [NAME=MODEL.onnx ...]
                         [--prompt-ids 1,2,...] [--steps 16] [--threads 2] [--label L]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("oneinfer")
p.add_argument("float_model")
p.add_argument("quant", nargs="+", help="NAME=MODEL.onnx")
p.add_argument("--prompt-ids", default=",".join(str(i) for i in range(1000, 1016)))
p.add_argument("--steps", type=int, default=16)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--label", default="")
a = p.parse_args()
tmp = tempfile.mkdtemp(prefix="quant_acc_")


def run(model, ids, n, dump):
    out = subprocess.run([a.oneinfer, "run", model, "--prompt-ids", ",".join(map(str, ids)), "-n", str(n),
                          "--threads", str(a.threads), "--json", "--dump-logits", dump],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{model}: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


prompt = [int(x) for x in a.prompt_ids.split(",")]
j = run(a.float_model, prompt, a.steps, os.path.join(tmp, "gen.bin"))
tokens = j["generated_ids"]
steps = min(a.steps, len(tokens))


def step_logits(model, tag):
    rows = []
    for i in range(steps):
        dump = os.path.join(tmp, f"{tag}.{i}.bin")
        run(model, prompt + tokens[:i], 1, dump)
        rows.append(np.fromfile(dump, dtype=np.float32))
    return np.stack(rows).astype(np.float64)


def logsoftmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


ref = step_logits(a.float_model, "float")
lp = logsoftmax(ref)
print(f"| model | format | steps | mean KL | max KL | top-1 agreement |")
print(f"|---|---|---|---|---|---|")
for spec in a.quant:
    name, model = spec.split("=", 1)
    q = step_logits(model, name)
    lq = logsoftmax(q)
    kl = (np.exp(lp) * (lp - lq)).sum(1)
    agree = (ref.argmax(1) == q.argmax(1)).mean()
    print(f"| {a.label} | {name} | {steps} | {kl.mean():.3e} | {kl.max():.3e} | {agree * 100:.0f}% |")
