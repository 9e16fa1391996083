// Where ONNX Runtime's time goes on a model, per node and per op type, for comparing with
// `strider bench --profile`. Runs the model as ort_bench.js does (CPU provider, every graph
// optimization), with ORT's profiler on, and prints the mean kernel time per run.
//   node ort_profile.js MODEL --threads N [--iterations I] [--top K]
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');
const { generator, randomTensor } = require('./ort_inputs');

async function main() {
  const argv = process.argv.slice(2);
  let model = null, threads = 1, iterations = 50, top = 20;
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--threads') threads = Number(argv[++i]);
    else if (argv[i] === '--iterations') iterations = Number(argv[++i]);
    else if (argv[i] === '--top') top = Number(argv[++i]);
    else model = argv[i];
  }
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: threads,
    interOpNumThreads: 1, executionMode: 'sequential', enableProfiling: true,
    profileFilePrefix: `/tmp/ort_profile_${process.pid}`,
  });
  const next = generator(1);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const meta = session.inputMetadata[i];
    feeds[name] = randomTensor(meta.type, meta.shape, next);
  });
  for (let i = 0; i < 10 + iterations; ++i) await session.run(feeds);
  // The node binding's endProfiling() returns nothing: the file is the prefix plus a time stamp.
  session.endProfiling();
  const prefix = `ort_profile_${process.pid}_`;
  const file = '/tmp/' + fs.readdirSync('/tmp').filter((f) => f.startsWith(prefix)).sort().pop();
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.unlinkSync(file);
  // The first 10 runs are warm-up: keep the last `iterations` runs' node events.
  const runs = events.filter((e) => e.name === 'model_run');
  const from = runs[runs.length - iterations].ts;
  const nodes = new Map(), ops = new Map();
  let total = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < from) continue;
    const name = e.name.slice(0, -'_kernel_time'.length), op = e.args.op_name;
    const n = nodes.get(name) || { op, us: 0 };
    n.us += e.dur / iterations;
    nodes.set(name, n);
    ops.set(op, (ops.get(op) || 0) + e.dur / iterations);
    total += e.dur / iterations;
  }
  const runUs = runs.slice(-iterations).reduce((s, e) => s + e.dur, 0) / iterations;
  console.log(`ORT ${model} threads ${threads}: run ${(runUs / 1000).toFixed(3)} ms, kernels ${(total / 1000).toFixed(3)} ms, ${nodes.size} nodes`);
  [...nodes.entries()].sort((a, b) => b[1].us - a[1].us).slice(0, top)
    .forEach(([name, n]) => console.log(`  ${(n.us / 1000).toFixed(4)} ms  ${n.op.padEnd(22)} ${name}`));
  console.log('per op type:');
  [...ops.entries()].sort((a, b) => b[1] - a[1])
    .forEach(([op, us]) => console.log(`  ${(us / 1000).toFixed(4)} ms  ${op}`));
}

main().catch((e) => { console.error(`ort_profile: ${e.message}`); process.exit(1); });
