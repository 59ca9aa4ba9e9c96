// Runs one ONNX graph in ONNX Runtime (CPU provider) on raw little-endian inputs.
// usage: node ort_run.js MODEL.onnx INPUTS.json OUT_DIR [--opt-level disabled|basic|extended|all]
//   INPUTS.json: [{"name": ..., "type": "int8"|"uint8"|"float32"|"int64", "dims": [...], "file": "raw.bin"}]
//   (file relative to INPUTS.json). Writes OUT_DIR/output_<i>.bin and OUT_DIR/outputs.json
//   ([{"name", "type", "dims", "file"}]). A session or run error prints one JSON line
//   {"error": "..."} and exits 3, so callers can tell a refusal from a crash.
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {int8: Int8Array, uint8: Uint8Array, float32: Float32Array, int32: Int32Array, int64: BigInt64Array};

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : def;
}

(async () => {
  const [model, inputsJson, outDir] = process.argv.slice(2, 5);
  const level = arg('--opt-level', 'all');
  const specs = JSON.parse(fs.readFileSync(inputsJson, 'utf8'));
  const feeds = {};
  for (const s of specs) {
    const buf = fs.readFileSync(path.join(path.dirname(inputsJson), s.file));
    const T = arrays[s.type];
    if (!T) throw new Error(`unsupported input type ${s.type}`);
    const copy = new Uint8Array(buf).buffer;  // aligned for typed arrays
    feeds[s.name] = new ort.Tensor(s.type, new T(copy), s.dims);
  }
  let session, result;
  try {
    session = await ort.InferenceSession.create(model, {graphOptimizationLevel: level, intraOpNumThreads: 1});
    result = await session.run(feeds);
  } catch (e) {
    console.log(JSON.stringify({error: String(e.message || e).split('\n')[0], opt_level: level}));
    process.exit(3);
  }
  fs.mkdirSync(outDir, {recursive: true});
  const outs = [];
  session.outputNames.forEach((name, i) => {
    const t = result[name];
    const file = `output_${i}.bin`;
    fs.writeFileSync(path.join(outDir, file), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    outs.push({name, type: t.type, dims: t.dims, file});
  });
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(outs));
  console.log(JSON.stringify({ok: true, opt_level: level}));
})().catch((e) => { console.error(e); process.exit(1); });
