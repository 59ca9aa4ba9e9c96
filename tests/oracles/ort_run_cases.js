// Runs many one-graph cases in ONNX Runtime (CPU provider) in one process.
// usage: node ort_run_cases.js ROOT CASE... [--opt-level disabled|basic|extended|all]
//   For each CASE: ROOT/CASE/model.onnx, ROOT/CASE/in.json ([{"name", "type", "dims", "file"}],
//   type float32|float16|int8|uint8|int32|int64, file relative to in.json). Writes
//   ROOT/CASE/ort/output_<i>.bin and outputs.json ([{"name", "type", "dims", "file"}]), or
//   ROOT/CASE/ort/error.txt with ONNX Runtime's message when it refuses the graph.
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {int8: Int8Array, uint8: Uint8Array, float32: Float32Array, float16: Uint16Array,
                int32: Int32Array, int64: BigInt64Array};

(async () => {
  const args = process.argv.slice(2);
  const li = args.indexOf('--opt-level');
  const level = li >= 0 ? args.splice(li, 2)[1] : 'all';
  const [root, ...cases] = args;
  for (const c of cases) {
    const dir = path.join(root, c);
    const outDir = path.join(dir, 'ort');
    fs.mkdirSync(outDir, {recursive: true});
    const specs = JSON.parse(fs.readFileSync(path.join(dir, 'in.json'), 'utf8'));
    const feeds = {};
    for (const s of specs) {
      const buf = fs.readFileSync(path.join(dir, s.file));
      const copy = new Uint8Array(buf).buffer;  // aligned for typed arrays
      feeds[s.name] = new ort.Tensor(s.type, new arrays[s.type](copy), s.dims);
    }
    let session, result;
    try {
      session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'),
                                                  {graphOptimizationLevel: level, intraOpNumThreads: 1});
      result = await session.run(feeds);
    } catch (e) {
      fs.writeFileSync(path.join(outDir, 'error.txt'), String(e.message || e).split('\n')[0]);
      continue;
    }
    const outs = [];
    session.outputNames.forEach((name, i) => {
      const t = result[name];
      const file = `output_${i}.bin`;
      fs.writeFileSync(path.join(outDir, file), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      outs.push({name, type: t.type, dims: t.dims, file});
    });
    fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(outs));
  }
})().catch((e) => { console.error(e); process.exit(1); });
