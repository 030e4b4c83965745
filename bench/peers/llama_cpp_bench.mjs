// llama.cpp's side of bench/bench_model.c: the same measurements on the same GGUF
// file, through node-llama-cpp's prebuilt CPU binaries (3.21.1, pinned in package.json).
//
//   node llama_cpp_bench.mjs --model FILE [--threads 2] [--prompt-tokens 512]
//        [--prefill-reps 3] [--decode-steps 32] [--batches 1,8,32] [--seed 1]
//
// Prints one JSON object on stdout (everything else goes to stderr):
//   { prefill_tok_s, prefill_runs_tok_s[], decode: [{batch, steps, tok_s}], greedy_tokens[],
//     peak_rss_bytes, baseline_rss_bytes, llama_cpp_build }
// Prefill: one sequence evaluates the prompt (random ids from the xorshift32 stream
// shared with bench_model.c) from an empty KV cache; the median of the runs is reported.
// Decode at batch B: one context with B sequences; each evaluates one token per step and
// node-llama-cpp folds the pending tokens of all sequences into one llama_decode call,
// so every timed step is a batch of B tokens. Greedy sampling (temperature 0); the
// first timed step starts after two warm-up steps with every sequence in lockstep.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import process from "node:process";

// Installed by scripts/bench-model.sh with `npm ci --prefix <cache dir>`; NODE_PATH
// does not apply to ES modules, so resolve from that folder explicitly.
const moduleDir = process.env.CINFER_BENCH_NODE_MODULES;
const require = createRequire(moduleDir ? `${moduleDir}/` : import.meta.url);
const { getLlama, LlamaLogLevel } = await import(require.resolve("node-llama-cpp"));

function parseArgs(argv) {
    const opts = { threads: 2, promptTokens: 512, prefillReps: 3, decodeSteps: 32, batches: [1, 8, 32], seed: 1 };
    for (let i = 2; i < argv.length; i += 2) {
        const [key, value] = [argv[i], argv[i + 1]];
        if (value === undefined) throw new Error(`llama_cpp_bench: option ${key} needs a value`);
        switch (key) {
            case "--model": opts.model = value; break;
            case "--threads": opts.threads = Number(value); break;
            case "--prompt-tokens": opts.promptTokens = Number(value); break;
            case "--prefill-reps": opts.prefillReps = Number(value); break;
            case "--decode-steps": opts.decodeSteps = Number(value); break;
            case "--batches": opts.batches = value.split(",").map(Number); break;
            case "--seed": opts.seed = Number(value); break;
            default: throw new Error(`llama_cpp_bench: unknown option ${key}`);
        }
    }
    if (!opts.model) throw new Error("llama_cpp_bench: --model FILE is required");
    return opts;
}

// The token stream bench_model.c uses too: xorshift32, ids past the 259 special and
// byte tokens of the generated vocabulary.
function promptTokens(n, seed, vocab) {
    let x = seed >>> 0 || 1;
    const out = [];
    for (let i = 0; i < n; i++) {
        x ^= x << 13; x >>>= 0;
        x ^= x >>> 17;
        x ^= x << 5; x >>>= 0;
        out.push(259 + (x % (vocab - 259)));
    }
    return out;
}

// This process's peak RSS: VmHWM, not resourceUsage().maxRSS, which for a process
// started by posix_spawn (bench_model, bench_scheduler) carries the parent's high-water
// mark (bench_model's 1 GiB bandwidth buffer included) across the exec.
function peakRssBytes() {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"));
    return m ? Number(m[1]) * 1024 : process.resourceUsage().maxRSS * 1024;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const nowMs = () => performance.now();

async function measurePrefill(model, opts, prompt) {
    const context = await model.createContext({
        contextSize: opts.promptTokens + 16, batchSize: opts.promptTokens, sequences: 1, threads: opts.threads,
    });
    const seq = context.getSequence();
    const runs = [];
    for (let r = 0; r <= opts.prefillReps; r++) { // run 0 warms up
        await seq.clearHistory();
        const t0 = nowMs();
        await seq.evaluateWithoutGeneratingNewTokens(prompt);
        const ms = nowMs() - t0;
        if (r > 0) runs.push(prompt.length / (ms / 1000));
    }
    await context.dispose();
    return runs;
}

// Decodes `warm + steps` tokens on each of `batch` sequences; returns tok/s over the
// `steps` timed steps and the greedy tokens of sequence 0.
async function measureDecode(model, opts, batch, firstToken) {
    const warm = 2;
    const context = await model.createContext({
        contextSize: warm + opts.decodeSteps + 8, sequences: batch, threads: opts.threads,
    });
    let arrived = 0, releaseBarrier;
    const barrier = new Promise((resolve) => { releaseBarrier = resolve; });
    let t0 = 0;
    const greedy = [];
    const runSequence = async (s) => {
        const seq = context.getSequence();
        let n = 0;
        for await (const token of seq.evaluate([firstToken + s], { temperature: 0, yieldEogToken: true })) {
            if (s === 0) greedy.push(token);
            n++;
            if (n === warm) {
                if (++arrived === batch) { t0 = nowMs(); releaseBarrier(); }
                await barrier;
            }
            if (n === warm + opts.decodeSteps) break;
        }
    };
    await Promise.all(Array.from({ length: batch }, (_, s) => runSequence(s)));
    const ms = nowMs() - t0;
    await context.dispose();
    return { batch, steps: opts.decodeSteps, tok_s: (batch * opts.decodeSteps) / (ms / 1000), greedy };
}

async function main() {
    const opts = parseArgs(process.argv);
    const baselineRssBytes = process.memoryUsage().rss;
    const llama = await getLlama({
        gpu: false, build: "never", usePrebuiltBinaries: true, maxThreads: opts.threads,
        logLevel: LlamaLogLevel.error, progressLogs: false,
    });
    const model = await llama.loadModel({ modelPath: opts.model, gpuLayers: 0, useMmap: true });
    const vocab = model.fileInfo.metadata.llama?.vocab_size ?? model.tokens.trainContextSize;
    const prompt = promptTokens(opts.promptTokens, opts.seed, Number(vocab));

    const prefillRuns = await measurePrefill(model, opts, prompt);
    const decode = [];
    let greedy = [];
    for (const batch of opts.batches) {
        const r = await measureDecode(model, opts, batch, prompt[0]);
        if (batch === 1) greedy = r.greedy;
        decode.push({ batch: r.batch, steps: r.steps, tok_s: r.tok_s });
        process.stderr.write(`llama.cpp decode batch ${batch}: ${r.tok_s.toFixed(1)} tok/s\n`);
    }
    const result = {
        prefill_tok_s: median(prefillRuns),
        prefill_runs_tok_s: prefillRuns,
        decode,
        greedy_tokens: greedy,
        peak_rss_bytes: peakRssBytes(),
        baseline_rss_bytes: baselineRssBytes,
        llama_cpp_build: llama.llamaCppRelease?.release ?? "unknown",
        cpu_backend: llama.buildType ?? "prebuilt",
    };
    await model.dispose();
    await llama.dispose();
    process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
    process.stderr.write(`llama_cpp_bench: ${e.stack ?? e}\n`);
    process.exit(1);
});
