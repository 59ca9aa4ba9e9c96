// Runs many one-graph cases in ONNX Runtime (CPU provider) in one process.
// usage: node ort_run_cases.js ROOT CASE... [--opt-level disabled|basic|extended|all]
//   For each CASE: ROOT/CASE/model.onnx, ROOT/CASE/in.json ([{"name", "type", "dims", "file"}],
//   type float32|float16|int8|uint8|int32|int64, file relative to in.json). Writes
//   ROOT/CASE/ort/output_<i>.bin and outputs.json ([{"name", "type", "dims", "file"}]), or
//   ROOT/CASE/ort/error.txt with ONNX Runtime's message when it refuses the graph.
const fs = require('fs');
const path = require('path');
const {ort, readFeeds, writeOutputs} = require('./ort_io');

(async () => {
  const args = process.argv.slice(2);
  const li = args.indexOf('--opt-level');
  const level = li >= 0 ? args.splice(li, 2)[1] : 'all';
  const [root, ...cases] = args;
  for (const c of cases) {
    const dir = path.join(root, c);
    const outDir = path.join(dir, 'ort');
    fs.mkdirSync(outDir, {recursive: true});
    const feeds = readFeeds(path.join(dir, 'in.json'));
    let session, result;
    try {
      session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'),
                                                  {graphOptimizationLevel: level, intraOpNumThreads: 1});
      result = await session.run(feeds);
    } catch (e) {
      fs.writeFileSync(path.join(outDir, 'error.txt'), String(e.message || e).split('\n')[0]);
      continue;
    }
    writeOutputs(session, result, outDir);
  }
})().catch((e) => { console.error(e); process.exit(1); });
