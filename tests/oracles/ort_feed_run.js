// ONNX Runtime on a graph whose inputs are all fed from files: one run, outputs[0]'s last
// position written as raw float32. For graphs that read weights as inputs (a Q4NX export fed
// with its dequantised weights).
// usage: node ort_feed_run.js MODEL.onnx MANIFEST.json OUT.bin [--threads T]
//   MANIFEST: [{"name", "dtype": "float32"|"int64", "dims": [...], "file": raw little-endian}]
const fs = require('fs');
const ort = require('onnxruntime-node');

(async () => {
  const [model, manifest, out] = process.argv.slice(2, 5);
  const ti = process.argv.indexOf('--threads');
  const threads = ti >= 0 ? Number(process.argv[ti + 1]) : 2;
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: threads, interOpNumThreads: 1});
  const feeds = {};
  for (const f of JSON.parse(fs.readFileSync(manifest, 'utf8'))) {
    const buf = fs.readFileSync(f.file);
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    const data = f.dtype === 'int64' ? new BigInt64Array(ab) : new Float32Array(ab);
    feeds[f.name] = new ort.Tensor(f.dtype, data, f.dims);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) throw new Error(`not fed: ${missing.join(', ')}`);
  const r = await session.run(feeds);
  const y = r[session.outputNames[0]];
  const V = y.dims[y.dims.length - 1];
  const last = y.data.slice(y.data.length - V);
  fs.writeFileSync(out, Buffer.from(last.buffer, last.byteOffset, last.byteLength));
})().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
