// Times warm runs of one model in ONNX Runtime 1.30 (CPU provider, all graph optimisations), as
// `oneinfer bench --json` does, on the inputs tests/conv_models.py wrote.
// usage: node bench/ort_bench.js MODEL.onnx IN.json [--threads T] [--runs N] [--warmup W]
//   Prints one JSON line: {"threads", "runs_ms", "median_ms", "min_ms"}.
const path = require('path');
const {ort, readFeeds} = require(path.join(__dirname, '..', 'tests', 'oracles', 'ort_io'));

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

(async () => {
  const [model, inputsJson] = process.argv.slice(2, 4);
  const threads = arg('--threads', 1), runs = arg('--runs', 20), warmup = arg('--warmup', 3);
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: threads, interOpNumThreads: 1,
                                                            graphOptimizationLevel: 'all'});
  const feeds = readFeeds(inputsJson);
  for (let i = 0; i < warmup; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < runs; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const sorted = [...times].sort((a, b) => a - b);
  console.log(JSON.stringify({threads, runs_ms: times, median_ms: sorted[Math.floor(sorted.length / 2)],
                              min_ms: sorted[0]}));
})().catch((e) => { console.error(e); process.exit(1); });
