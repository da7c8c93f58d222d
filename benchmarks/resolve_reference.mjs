// Reference timing for benchmarks/resolve.py: the recipes site's own JavaScript over the same corpus.
//
//   node benchmarks/resolve_reference.mjs SYNTHESIS_MJS DATA_JSON CORPUS_JSONL_GZ REPEAT
//
// SYNTHESIS_MJS: upstream's src/lib/command-synthesis.js (from a vllm-project/recipes checkout),
// copied under an .mjs name so Node loads it as an ES module. DATA_JSON: {recipes, strategies,
// taxonomy} as resolve.py writes it. Loading happens before the clock; each timed run replays
// every case: resolveCommand, then the docker wrapping of every process, as the corpus recorded it.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { gunzipSync } from "node:zlib";

const [synthesisPath, dataPath, corpusPath, repeatText] = process.argv.slice(2);
const site = await import(pathToFileURL(synthesisPath).href);
const { recipes, strategies, taxonomy } = JSON.parse(readFileSync(dataPath, "utf8"));
const cases = gunzipSync(readFileSync(corpusPath)).toString("utf8").split("\n").filter(Boolean).map(JSON.parse);
const profiles = taxonomy.hardware_profiles || {};

// The ports the corpus's docker processes carry: prefill 8001, decode 8002, every other process 8000.
function wrapped(meta, command, argv, env, port) {
  return {
    port,
    argv: site.buildDockerArgv({ argv, env, meta, port }),
    command: site.buildDockerRun({ command, env, image: meta.image, gpuFlags: meta.gpuFlags, port }),
  };
}

function dockerProcesses(out, meta) {
  if (out.prefill && out.decode) {
    return {
      prefill: wrapped(meta, out.prefill.command, out.prefill.argv, out.prefill.env, 8001),
      decode: wrapped(meta, out.decode.command, out.decode.argv, out.decode.env, 8002),
    };
  }
  if (out.vllm) {
    const v = out.vllm;
    const procs = { vllm: wrapped(meta, v.command, v.argv, v.env, 8000) };
    if (v.workerCommands) procs.vllm_workers = v.workerCommands.map((c, i) => wrapped(meta, c, v.workerArgvs[i], v.env, 8000));
    return procs;
  }
  if (out.headCommand !== undefined) {
    return {
      head: wrapped(meta, out.headCommand, out.headArgv, out.env, 8000),
      workers: out.workerCommands.map((c, i) => wrapped(meta, c, out.workerArgvs[i], out.env, 8000)),
    };
  }
  return { single: wrapped(meta, out.command, out.argv, out.env, 8000) };
}

function replay(c) {
  const recipe = recipes[c.hf_id];
  const out = site.resolveCommand(recipe, c.variant, c.strategy, c.hardware, c.features, strategies, taxonomy,
    c.advanced_args, c.node_count, c.pd_nodes, c.feature_modes, c.kv_offload, c.kv_instances);
  const variants = recipe.variants || {};
  const meta = site.computeDockerMeta(recipe, variants[c.variant] || variants.default || {}, profiles[c.hardware] || {},
    c.hardware);
  return dockerProcesses(out, meta);
}

const timings = [];
let errors = 0;
let kept = 0;
for (let run = 0; run < Math.max(1, Number(repeatText) || 3); run++) {
  errors = 0;
  const start = process.hrtime.bigint();
  for (const c of cases) {
    try {
      kept += Object.keys(replay(c)).length;
    } catch {
      errors += 1;
    }
  }
  timings.push(Number(process.hrtime.bigint() - start) / 1e9);
}
console.log(JSON.stringify({ cases: cases.length, errors, timings, kept }));
