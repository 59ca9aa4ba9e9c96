"""The ONNX backend test data (Debian's libonnx-testdata) through oneinfer.Session.run: every case
whose graph takes and gives plain tensors, compared as tests/conformance/conformance_main.cc
compares (rtol 1e-3, atol 1e-7 for floating point, NaN equal to NaN, infinities exact; integers,
bools and strings exact). A case using an operator we do not support is skipped with the operator
named; tests/conformance/expected_failures.txt lists the cases known to fail: they are skipped
while they fail and fail when they start passing, as in the C++ runner."""
import pathlib

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import oneinfer
from conftest import SOURCE_DIR

DATA = pathlib.Path("/usr/share/libonnx-testdata/data")
SUITES = ["node", "simple", "pytorch-converted", "pytorch-operator"]
BFLOAT16 = onnx.TensorProto.BFLOAT16


def load_expected_failures():
    failures = {}
    for line in (SOURCE_DIR / "tests/conformance/expected_failures.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, reason = line.partition(" ")
            failures[key] = reason.strip()
    return failures


def plain_cases():
    """(key, folder) of each case whose non-initializer inputs and outputs are all tensors."""
    cases = []
    for suite in SUITES:
        if not (DATA / suite).is_dir():
            continue
        for d in sorted(p for p in (DATA / suite).iterdir() if p.is_dir()):
            model = onnx.load(str(d / "model.onnx"), load_external_data=False)
            g = model.graph
            inits = {i.name for i in g.initializer}
            ios = [v for v in g.input if v.name not in inits] + list(g.output)
            if all(v.type.HasField("tensor_type") for v in ios):
                cases.append((f"{suite}/{d.name}", d))
    return cases


CASES = plain_cases() if DATA.is_dir() else []
EXPECTED_FAILURES = load_expected_failures()
PASSED = []


def read_tensor(path):
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def as_float(a, bfloat16):
    """float64 values of a float array; bfloat16 arrives as uint16 bit patterns."""
    if bfloat16 and a.dtype == np.uint16:
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)


def compare(name, got, want, elem_type):
    """'' when equal under the runner's rules, else what differs."""
    if got.shape != want.shape:
        return f"output '{name}': shape {list(got.shape)} != expected {list(want.shape)}"
    bf16 = elem_type == BFLOAT16
    if bf16 or want.dtype.kind == "f":
        if not bf16 and got.dtype != want.dtype:
            return f"output '{name}': dtype {got.dtype} != expected {want.dtype}"
        g, w = as_float(got, bf16), as_float(want, bf16)
        both_nan = np.isnan(g) & np.isnan(w)
        inf = np.isinf(g) | np.isinf(w)
        with np.errstate(invalid="ignore"):  # inf - inf: those elements are decided by `inf`
            ok = both_nan | (inf & (g == w)) | (~inf & (np.abs(g - w) <= 1e-7 + 1e-3 * np.abs(w)))
    elif want.dtype.kind in "OSU":
        w = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else s, otypes=[object])(want) if want.size else want
        ok = np.array([a == b for a, b in zip(got.ravel(), w.ravel())], dtype=bool).reshape(got.shape)
    else:
        if got.dtype != want.dtype:
            return f"output '{name}': dtype {got.dtype} != expected {want.dtype}"
        ok = got == want
    bad = np.flatnonzero(~np.asarray(ok))
    if bad.size:
        i = bad[0]
        return (f"output '{name}': {bad.size} of {got.size} elements differ; first element {i}: "
                f"got {got.ravel()[i]!r}, expected {want.ravel()[i]!r}")
    return ""


def run_case(folder):
    """'' when every data set matches, else the first problem. Raises oneinfer.Error."""
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    ins = [v.name for v in model.graph.input if v.name not in inits]
    outs = [(v.name, v.type.tensor_type.elem_type) for v in model.graph.output]
    session = oneinfer.Session(folder / "model.onnx", threads=2)
    for data_set in sorted(folder.glob("test_data_set_*")):
        feeds = {}
        for i in range(len(ins) + 1):
            p = data_set / f"input_{i}.pb"
            if not p.exists():
                break
            if i >= len(ins):
                return "more input files than graph inputs"
            feeds[ins[i]] = read_tensor(p)
        results = session.run(feeds)
        for i, ((name, elem_type), got) in enumerate(zip(outs, results)):
            p = data_set / f"output_{i}.pb"
            if p.exists():
                diff = compare(name, got, read_tensor(p), elem_type)
                if diff:
                    return f"{data_set.name} {diff}"
    return ""


@pytest.mark.parametrize("key, folder", CASES, ids=[k for k, _ in CASES])
def test_case(key, folder):
    try:
        problem = run_case(folder)
    except oneinfer.Error as e:
        if e.code == "UNIMPLEMENTED" and "unsupported operator" in str(e):
            pytest.skip(str(e))
        problem = f"{e.code}: {e}"
    if key in EXPECTED_FAILURES:
        if not problem and EXPECTED_FAILURES[key].startswith("random:"):
            pytest.skip(f"a random output matched the data by chance ({EXPECTED_FAILURES[key]})")
        if not problem:
            pytest.fail(f"{key} passes now: remove it from expected_failures.txt ({EXPECTED_FAILURES[key]})")
        pytest.skip(f"expected failure ({EXPECTED_FAILURES[key]}): {problem}")
    assert not problem, problem
    PASSED.append(key)


def test_at_least_900_cases_pass(request):
    if not DATA.is_dir():
        pytest.fail(f"conformance data not found at {DATA} (apt-get install libonnx-testdata)")
    ran = [i for i in request.session.items if i.originalname == "test_case"]
    if len(ran) < len(CASES):
        pytest.skip(f"only {len(ran)} of {len(CASES)} cases selected")
    assert len(PASSED) >= 900, f"{len(PASSED)} of {len(CASES)} plain-tensor cases passed"
