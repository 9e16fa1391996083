// Median latency of one ONNX Runtime (CPU provider, every graph optimization) call on a
// model, with seeded random inputs, for bench/cpu-peers/run. Prints one JSON line.
//   node ort_bench.js MODEL --threads N [--shape NAME:1x3x224x224] [--warmup W] [--iterations I]
// Inputs the model declares static need no --shape; float inputs are normal(0, 1), integer
// inputs small non-negative integers, from a fixed seed (never all ones or zeros).
'use strict';
const ort = require('onnxruntime-node');
const { generator, randomTensor } = require('./ort_inputs');

function parseArgs(argv) {
  const args = { model: null, threads: 1, shapes: {}, warmup: 20, iterations: 200 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--threads') args.threads = Number(argv[++i]);
    else if (a === '--warmup') args.warmup = Number(argv[++i]);
    else if (a === '--iterations') args.iterations = Number(argv[++i]);
    else if (a === '--shape') {
      const [name, dims] = argv[++i].split(':');
      args.shapes[name] = dims.split('x').map(Number);
    } else if (!args.model) args.model = a;
    else throw new Error(`unexpected argument '${a}'`);
  }
  if (!args.model) throw new Error('usage: ort_bench.js MODEL --threads N [--shape NAME:AxB] ...');
  return args;
}

function median(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const next = generator(1);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const meta = session.inputMetadata[i];
    const dims = args.shapes[name] || meta.shape;
    if (dims.some((d) => typeof d !== 'number' || d < 0)) throw new Error(`input '${name}' has dynamic dims: give --shape ${name}:...`);
    feeds[name] = randomTensor(meta.type, dims, next);
  });
  for (let i = 0; i < args.warmup; ++i) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < args.iterations; ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  console.log(JSON.stringify({ model: args.model, threads: args.threads, median_ms: median(ms), runs: args.iterations }));
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message}`);
  process.exit(1);
});
