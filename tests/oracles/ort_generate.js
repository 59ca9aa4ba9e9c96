// ONNX Runtime as the numerical oracle for causal-LM graphs: greedy generation driving each
// convention the way oneinfer's generator does (include/oneinfer/generator.h): no cache, the stacked
// past_kv, or per-layer past_key_values.{i}.key/.value with attention_mask (all ones) and
// position_ids; writes the last-position logits of every step (as float32).
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
  const stacked = session.inputNames.includes('past_kv');
  const meta = {};
  for (const m of session.inputMetadata) meta[m.name] = m;
  const perLayer = session.inputNames.filter((n) => n.startsWith('past_key_values.'));
  const cached = stacked || perLayer.length > 0;
  const intType = (name) => meta[name].type;  // int64 or int32, as the graph declares
  const intTensor = (name, values, dims) => intType(name) === 'int64'
      ? new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), dims)
      : new ort.Tensor('int32', Int32Array.from(values), dims);
  // The cache: input name -> tensor, and the output each comes back from.
  let cache = {};
  const presentOf = {};
  if (stacked) {
    // [2L, 1, KVH, P, D]: the declared shape from the caller (kept for older scripts) or the graph.
    const pastDims = arg('--past-dims') ? arg('--past-dims').split(',').map(Number)
                                        : [meta.past_kv.shape[0], meta.past_kv.shape[2], meta.past_kv.shape[4]];
    cache.past_kv = new ort.Tensor('float32', new Float32Array(0), [pastDims[0], 1, pastDims[1], 0, pastDims[2]]);
    presentOf.past_kv = 'present_kv';
  }
  for (const name of perLayer) {
    const [, layer, part] = name.split('.');
    const shape = meta[name].shape;
    const type = meta[name].type;
    const empty = type === 'float16' ? new Uint16Array(0) : new Float32Array(0);
    cache[name] = new ort.Tensor(type, empty, [1, shape[1], 0, shape[3]]);
    presentOf[name] = `present.${layer}.${part}`;
  }
  const seq = ids.slice();
  let fed = 0;
  const out = [];
  const logitsRows = [];
  const times = [];
  const toFloat32 = (t, from, to) => {
    if (t.type === 'float32') return t.data.slice(from, to);
    const r = new Float32Array(to - from);  // float16 bits -> float32
    const dv = new DataView(new ArrayBuffer(4));
    for (let i = from; i < to; i++) {
      const h = t.data[i];
      const s = (h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
      let bits;
      if (e === 0) {
        if (m === 0) bits = s;
        else { let mm = m, ee = 113; while (!(mm & 0x400)) { mm <<= 1; ee--; } bits = s | (ee << 23) | ((mm & 0x3ff) << 13); }
      } else if (e === 31) bits = s | 0x7f800000 | (m << 13);
      else bits = s | ((e + 112) << 23) | (m << 13);
      dv.setUint32(0, bits >>> 0);
      r[i - from] = dv.getFloat32(0);
    }
    return r;
  };
  for (let step = 0; step < steps; step++) {
    const feedIds = cached ? seq.slice(fed) : seq;
    const first = cached ? fed : 0;
    const feeds = {input_ids: intTensor('input_ids', feedIds, [1, feedIds.length])};
    if (meta.attention_mask) feeds.attention_mask = intTensor('attention_mask', new Array(first + feedIds.length).fill(1), [1, first + feedIds.length]);
    if (meta.position_ids) feeds.position_ids = intTensor('position_ids', feedIds.map((_, i) => first + i), [1, feedIds.length]);
    if (meta.use_cache_branch) feeds.use_cache_branch = new ort.Tensor('bool', [first > 0], [1]);
    Object.assign(feeds, cache);
    const s0 = process.hrtime.bigint();
    const r = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s0) / 1e6);
    const logits = r.logits;
    const V = logits.dims[2];
    const n = logits.dims[1];
    const last = toFloat32(logits, (n - 1) * V, n * V);
    logitsRows.push(Buffer.from(last.buffer, last.byteOffset, last.byteLength));
    let best = 0;
    for (let i = 1; i < V; i++) if (last[i] > last[best]) best = i;
    out.push(best);
    if (cached) {
      const next = {};
      for (const name of Object.keys(cache)) next[name] = r[presentOf[name]];
      cache = next;
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
