"""oneinfer.Session: metadata, numpy in and out, the documented errors, threads."""
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import oneinfer


def expected(x, W, B):
    y = np.maximum(x @ W + B, 0)
    return y, y.sum(1)


def test_metadata(mlp):
    path, *_ = mlp
    s = oneinfer.Session(path, threads=2)
    assert [(i.name, i.dtype, i.shape) for i in s.inputs] == [("X", "float32", ["N", 64])]
    assert [(o.name, o.dtype, o.shape) for o in s.outputs] == [
        ("Y", "float32", ["N", 32]), ("S", "float32", ["N"]), ("C", "float32", [4]), ("I", "float32", ["N", 64])]
    assert repr(s.inputs[0]) == "IOInfo(name='X', dtype='float32', shape=['N', 64])"
    assert not s.closed


def test_run_matches_numpy(mlp):
    path, W, B, C = mlp
    s = oneinfer.Session(str(path), threads=2)
    x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
    y, ssum, c, ident = s.run({"X": x})
    want_y, want_s = expected(x, W, B)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ssum, want_s, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(c, C)
    np.testing.assert_array_equal(ident, x)
    # Only the outputs asked for, in the order asked.
    s2, y2 = s.run({"X": x}, outputs=["S", "Y"])
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(s2, ssum)


def test_outputs_are_not_copied_unless_shared(mlp):
    path, W, B, C = mlp
    s = oneinfer.Session(path, threads=1)
    x = np.ones((2, 64), np.float32)
    y, _, c, ident = s.run({"X": x})
    # Y is the run's own memory, handed to numpy as it is (a capsule keeps it alive).
    assert not y.flags.owndata and type(y.base).__name__ == "PyCapsule"
    assert y.flags.writeable and y.flags.c_contiguous
    # An output that may share the caller's feed or the model's weights is copied.
    assert not np.shares_memory(ident, x)
    c[:] = -1
    ident[:] = -1
    _, _, c2, _ = s.run({"X": x})
    np.testing.assert_array_equal(c2, C)
    np.testing.assert_array_equal(x, 1)
    del s  # outputs outlive the session
    np.testing.assert_allclose(y, expected(x, W, B)[0], rtol=1e-5, atol=1e-5)


def test_non_contiguous_feed_is_copied(mlp):
    path, W, B, _ = mlp
    s = oneinfer.Session(path, threads=1)
    wide = np.random.default_rng(2).standard_normal((3, 128)).astype(np.float32)
    x = wide[:, ::2]
    assert not x.flags.c_contiguous
    y, *_ = s.run({"X": x})
    np.testing.assert_allclose(y, expected(np.ascontiguousarray(x), W, B)[0], rtol=1e-5, atol=1e-5)
    # Fortran order and big-endian are accepted the same way; so is a read-only array.
    big = np.ascontiguousarray(x).astype(">f4")
    ro = np.ascontiguousarray(x)
    ro.flags.writeable = False
    for feed in (np.asfortranarray(x), big, ro):
        np.testing.assert_array_equal(s.run({"X": feed})[0], y)


def test_wrong_dtype(mlp):
    s = oneinfer.Session(mlp[0], threads=1)
    with pytest.raises(oneinfer.Error, match=r"^input 'X' must be float32, got float64$") as e:
        s.run({"X": np.zeros((2, 64))})
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(TypeError, match=r"input 'X': numpy dtype complex64 has no oneinfer type"):
        s.run({"X": np.zeros((2, 64), np.complex64)})


def test_wrong_shape(mlp):
    s = oneinfer.Session(mlp[0], threads=1)
    with pytest.raises(oneinfer.Error, match=r"^input 'X' dimension 1 must be 64, got shape \[2, ?63\]$") as e:
        s.run({"X": np.zeros((2, 63), np.float32)})
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(oneinfer.Error, match=r"^input 'X' must have rank 2, got shape \[1, ?2, ?64\]$"):
        s.run({"X": np.zeros((1, 2, 64), np.float32)})


def test_missing_and_unknown_names(mlp):
    s = oneinfer.Session(mlp[0], threads=1)
    with pytest.raises(oneinfer.Error, match=r"^input 'X' is missing$"):
        s.run({})
    with pytest.raises(oneinfer.Error, match=r"^unknown input 'Z' \(the model's inputs: X\)$"):
        s.run({"X": np.zeros((1, 64), np.float32), "Z": np.zeros(1, np.float32)})
    with pytest.raises(oneinfer.Error, match=r"^unknown output 'nope'$"):
        s.run({"X": np.zeros((1, 64), np.float32)}, outputs=["nope"])


def test_load_errors(tmp_path):
    with pytest.raises(oneinfer.Error) as e:
        oneinfer.Session(tmp_path / "absent.onnx")
    assert "absent.onnx" in str(e.value) and e.value.code == "NOT_FOUND"
    with pytest.raises(oneinfer.Error):
        oneinfer.Session(b"not a model")
    with pytest.raises(ValueError, match="matmul must be 'float32' or 'int8', got 'fp8'"):
        oneinfer.Session(tmp_path / "absent.onnx", matmul="fp8")


def test_load_from_bytes_and_options(mlp):
    path, W, B, _ = mlp
    x = np.ones((2, 64), np.float32)
    s = oneinfer.Session(path.read_bytes(), threads=1, constant_folding=False, prepare_weights=False)
    np.testing.assert_allclose(s.run({"X": x})[0], expected(x, W, B)[0], rtol=1e-5, atol=1e-5)
    # Dynamic A8W8 is an approximation of the float product.
    q = oneinfer.Session(path, threads=1, matmul="int8")
    np.testing.assert_allclose(q.run({"X": x})[0], expected(x, W, B)[0], rtol=0.05, atol=0.2)


def test_closed_session(mlp):
    s = oneinfer.Session(mlp[0], threads=1)
    s.close()
    assert s.closed
    for call in (lambda: s.run({"X": np.zeros((1, 64), np.float32)}), lambda: s.inputs, lambda: oneinfer.Generator(s)):
        with pytest.raises(oneinfer.Error, match=r"^the session is closed$") as e:
            call()
        assert e.value.code == "FAILED_PRECONDITION"
    s.close()  # closing twice is fine


def test_four_threads_share_one_session(mlp):
    s = oneinfer.Session(mlp[0], threads=1)
    rng = np.random.default_rng(3)
    feeds = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(8)]
    want = [s.run({"X": x}) for x in feeds]
    got = {}
    errors = []
    start = threading.Barrier(4)

    def work(t):
        try:
            start.wait()
            for rep in range(5):
                for k in range(t, len(feeds) + t):
                    k %= len(feeds)
                    got.setdefault((t, k), []).append(s.run({"X": feeds[k]}))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(got) == 4 * len(feeds)
    for (t, k), runs in got.items():
        assert len(runs) == 5
        for outs in runs:
            for a, b in zip(outs, want[k]):
                np.testing.assert_array_equal(a, b)


def one_node(op, dtype, np_dtype=None, **attrs):
    g = helper.make_graph([helper.make_node(op, ["A"], ["B"], **attrs)], "g",
                          [helper.make_tensor_value_info("A", dtype, [3])],
                          [helper.make_tensor_value_info("B", dtype, [3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_float16_bfloat16_and_strings():
    s = oneinfer.Session(one_node("Neg", T.FLOAT16), threads=1)
    a = np.array([1.5, -2.0, 65504], np.float16)
    (b,) = s.run({"A": a})
    assert b.dtype == np.float16
    np.testing.assert_array_equal(b, -a)
    # bfloat16 travels as its uint16 bit patterns.
    s = oneinfer.Session(one_node("Neg", T.BFLOAT16), threads=1)
    assert s.inputs[0].dtype == "bfloat16"
    bits = (np.array([1.5, -2.0, 3.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    (out,) = s.run({"A": bits})
    assert out.dtype == np.uint16
    np.testing.assert_array_equal((out.astype(np.uint32) << 16).view(np.float32), [-1.5, 2.0, -3.0])
    s = oneinfer.Session(one_node("Identity", T.STRING), threads=1)
    (out,) = s.run({"A": np.array(["a", "é", ""])})
    assert out.dtype == object and list(out) == ["a", "é", ""]
    (out,) = s.run({"A": np.array([b"x", b"y", b"z"], dtype=object)})
    assert list(out) == ["x", "y", "z"]
