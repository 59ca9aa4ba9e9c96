// Shared by ort_run.js and ort_run_cases.js: raw little-endian feeds in, raw outputs out.
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, float32: Float32Array, float16: Uint16Array,
                int32: Int32Array, int64: BigInt64Array};

// INPUTS.json ([{"name", "type", "dims", "file"}], file relative to it) -> ORT feeds.
function readFeeds(inputsJson) {
  const specs = JSON.parse(fs.readFileSync(inputsJson, 'utf8'));
  const feeds = {};
  for (const s of specs) {
    const T = arrays[s.type];
    if (!T) throw new Error(`unsupported input type ${s.type}`);
    const buf = fs.readFileSync(path.join(path.dirname(inputsJson), s.file));
    const copy = new Uint8Array(buf).buffer;  // aligned for typed arrays
    feeds[s.name] = new ort.Tensor(s.type, new T(copy), s.dims);
  }
  return feeds;
}

// OUT_DIR/output_<i>.bin and OUT_DIR/outputs.json ([{"name", "type", "dims", "file"}]).
function writeOutputs(session, result, outDir) {
  fs.mkdirSync(outDir, {recursive: true});
  const outs = [];
  session.outputNames.forEach((name, i) => {
    const t = result[name];
    const file = `output_${i}.bin`;
    fs.writeFileSync(path.join(outDir, file), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    outs.push({name, type: t.type, dims: t.dims, file});
  });
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(outs));
}

module.exports = {ort, readFeeds, writeOutputs};
