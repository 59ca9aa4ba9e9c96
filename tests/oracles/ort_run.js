// Runs one ONNX graph in ONNX Runtime (CPU provider) on raw little-endian inputs.
// usage: node ort_run.js MODEL.onnx INPUTS.json OUT_DIR [--opt-level disabled|basic|extended|all]
//   INPUTS.json: [{"name": ..., "type": "int8"|"uint8"|"float32"|"int64", "dims": [...], "file": "raw.bin"}]
//   (file relative to INPUTS.json). Writes OUT_DIR/output_<i>.bin and OUT_DIR/outputs.json
//   ([{"name", "type", "dims", "file"}]). A session or run error prints one JSON line
//   {"error": "..."} and exits 3, so callers can tell a refusal from a crash.
const {ort, readFeeds, writeOutputs} = require('./ort_io');

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : def;
}

(async () => {
  const [model, inputsJson, outDir] = process.argv.slice(2, 5);
  const level = arg('--opt-level', 'all');
  const feeds = readFeeds(inputsJson);
  let session, result;
  try {
    session = await ort.InferenceSession.create(model, {graphOptimizationLevel: level, intraOpNumThreads: 1});
    result = await session.run(feeds);
  } catch (e) {
    console.log(JSON.stringify({error: String(e.message || e).split('\n')[0], opt_level: level}));
    process.exit(3);
  }
  writeOutputs(session, result, outDir);
  console.log(JSON.stringify({ok: true, opt_level: level}));
})().catch((e) => { console.error(e); process.exit(1); });
