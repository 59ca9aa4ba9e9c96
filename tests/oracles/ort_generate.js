// ONNX Runtime as the numerical oracle for causal-LM graphs: greedy generation with the same
// convention oneinfer's generator uses; writes the last-position logits of every step.
// usage: node ort_generate.js MODEL.onnx --prompt-ids 1,2,3 -n N --dump-logits FILE [--threads T]
//        [--opt-level disabled|basic|extended|all]  (graph optimisation level; default all)
const fs = require('fs');
const ort = require('onnxruntime-node');

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : def;
}

(async () => {
  const model = process.argv[2];
  const ids = arg('--prompt-ids').split(',').map(Number);
  const steps = Number(arg('-n', '8'));
  const threads = Number(arg('--threads', '2'));
  const dump = arg('--dump-logits');
  const t0 = Date.now();
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: threads, interOpNumThreads: 1,
                                                            graphOptimizationLevel: arg('--opt-level', 'all')});
  const loadMs = Date.now() - t0;
  const cached = session.inputNames.includes('past_kv');
  let pastDims = null;
  if (cached) {
    // [2L, 1, KVH, P, D] from the graph's declared shape is not exposed; read it from the model metadata
    // passed by the caller.
    pastDims = arg('--past-dims').split(',').map(Number);
  }
  let past = cached ? new ort.Tensor('float32', new Float32Array(0), [pastDims[0], 1, pastDims[1], 0, pastDims[2]]) : null;
  const seq = ids.slice();
  let fed = 0;
  const out = [];
  const logitsRows = [];
  const times = [];
  for (let step = 0; step < steps; step++) {
    const feedIds = cached ? seq.slice(fed) : seq;
    const feeds = {input_ids: new ort.Tensor('int64', BigInt64Array.from(feedIds.map(BigInt)), [1, feedIds.length])};
    if (cached) feeds.past_kv = past;
    const s0 = process.hrtime.bigint();
    const r = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s0) / 1e6);
    const logits = r.logits;
    const V = logits.dims[2];
    const n = logits.dims[1];
    const last = logits.data.slice((n - 1) * V, n * V);
    logitsRows.push(Buffer.from(last.buffer, last.byteOffset, last.byteLength));
    let best = 0;
    for (let i = 1; i < V; i++) if (last[i] > last[best]) best = i;
    out.push(best);
    if (cached) {
      past = r.present_kv;
      fed = seq.length;
    }
    seq.push(best);
  }
  if (dump) fs.writeFileSync(dump, Buffer.concat(logitsRows));
  const decode = times.slice(1);
  const median = decode.length ? decode.slice().sort((a, b) => a - b)[Math.floor(decode.length / 2)] : 0;
  console.log(JSON.stringify({generated_ids: out, load_ms: loadMs, prefill_ms: times[0],
                              decode_ms_median: median, cached}));
})().catch((e) => { console.error(e); process.exit(1); });
