// Seeded random inputs for the ONNX Runtime scripts here: never all ones or zeros.
'use strict';
const ort = require('onnxruntime-node');

// mulberry32: a small seeded generator, so every run feeds the same values.
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomTensor(type, dims, next) {
  const n = dims.reduce((p, d) => p * d, 1);
  if (type === 'float32') {
    const data = new Float32Array(n);
    for (let i = 0; i < n; i += 2) {  // Box-Muller
      const r = Math.sqrt(-2 * Math.log(1 - next())), t = 2 * Math.PI * next();
      data[i] = r * Math.cos(t);
      if (i + 1 < n) data[i + 1] = r * Math.sin(t);
    }
    return new ort.Tensor('float32', data, dims);
  }
  if (type === 'int64') return new ort.Tensor('int64', BigInt64Array.from({ length: n }, () => BigInt(Math.floor(next() * 8))), dims);
  if (type === 'int32') return new ort.Tensor('int32', Int32Array.from({ length: n }, () => Math.floor(next() * 8)), dims);
  if (type === 'bool') return new ort.Tensor('bool', Uint8Array.from({ length: n }, () => (next() < 0.5 ? 1 : 0)), dims);
  throw new Error(`input type ${type} is not generated here`);
}

module.exports = { generator, randomTensor };
