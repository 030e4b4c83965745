// llama.cpp's side of bench/bench_serving.c: a small HTTP server on loopback that runs
// llama.cpp through node-llama-cpp's binding (3.21.1, prebuilt CPU binaries, pinned in
// package.json) behind node's own HTTP layer. It is not llama-server (which is neither
// in Debian 12 nor on npm); it serves just what bench_serving's completions backend
// sends, so both servers run the same workload on the same GGUF file.
//
//   node llama_cpp_server.mjs --model FILE [--threads 2] [--parallel 8] [--ctx-per-seq 512]
//        [--host 127.0.0.1] [--port 0]
//
// Prints "llama_cpp_server: listening on http://HOST:PORT" on stderr once it accepts.
//   GET  /get_server_info  {"vocab_size", "parallel", "threads", "llama_cpp_build", ...}
//   POST /v1/completions   prompt: a string or an array of token ids; max_tokens,
//        temperature (0: greedy), top_p, top_k, seed, ignore_eos / min_tokens, stream
//        (SSE chunks shaped as OpenAI's text_completion, usage last when
//        stream_options.include_usage, then "data: [DONE]"); stream false answers one JSON.
// One context holds --parallel sequences and node-llama-cpp folds the pending tokens of
// all of them into one llama_decode per step (continuous batching); a request beyond
// --parallel waits for a free sequence, first come first served. A sequence's KV cells
// are cleared when its request ends, before it goes back to the pool.
// CINFER_PEER_TRACE=1 logs each request's queue wait, first-token time and stalls.
import { createRequire } from "node:module";
import http from "node:http";
import process from "node:process";

// Installed by the bench scripts with `npm ci --prefix <cache dir>`; NODE_PATH does not
// apply to ES modules, so resolve from that folder explicitly.
const moduleDir = process.env.CINFER_BENCH_NODE_MODULES;
const trace = process.env.CINFER_PEER_TRACE === "1"; // per request: queue wait, first token, stalls
const require = createRequire(moduleDir ? `${moduleDir}/` : import.meta.url);
const { getLlama, LlamaLogLevel } = await import(require.resolve("node-llama-cpp"));

function parseArgs(argv) {
    const opts = { threads: 2, parallel: 8, ctxPerSeq: 512, host: "127.0.0.1", port: 0 };
    for (let i = 2; i < argv.length; i += 2) {
        const [key, value] = [argv[i], argv[i + 1]];
        if (value === undefined) throw new Error(`llama_cpp_server: option ${key} needs a value`);
        switch (key) {
            case "--model": opts.model = value; break;
            case "--threads": opts.threads = Number(value); break;
            case "--parallel": opts.parallel = Number(value); break;
            case "--ctx-per-seq": opts.ctxPerSeq = Number(value); break;
            case "--host": opts.host = value; break;
            case "--port": opts.port = Number(value); break;
            default: throw new Error(`llama_cpp_server: unknown option ${key}`);
        }
    }
    if (!opts.model) throw new Error("llama_cpp_server: --model FILE is required");
    for (const k of ["threads", "parallel", "ctxPerSeq"])
        if (!(Number.isInteger(opts[k]) && opts[k] > 0))
            throw new Error(`llama_cpp_server: --${k} must be a positive integer, got ${opts[k]}`);
    return opts;
}

// A pool of sequences; take() resolves with a free one, in the order asked.
class SequencePool {
    constructor(sequences) { this.free = sequences; this.waiting = []; }
    take() {
        if (this.free.length) return Promise.resolve(this.free.pop());
        return new Promise((resolve) => this.waiting.push(resolve));
    }
    give(seq) {
        const next = this.waiting.shift();
        if (next) next(seq); else this.free.push(seq);
    }
}

class BadRequest extends Error {}

// The request's fields, checked the way bench_serving (and OpenAI) sends them.
function readRequest(body, model, vocab, ctxPerSeq) {
    let r;
    try { r = JSON.parse(body); } catch (e) { throw new BadRequest(`body: expected JSON, ${e.message}`); }
    if (typeof r !== "object" || r === null) throw new BadRequest("body: expected a JSON object");
    let prompt;
    if (typeof r.prompt === "string") prompt = model.tokenize(r.prompt);
    else if (Array.isArray(r.prompt) && r.prompt.length && r.prompt.every((t) => Number.isInteger(t) && t >= 0 && t < vocab))
        prompt = r.prompt;
    else throw new BadRequest(`prompt: expected a string or a non-empty array of token ids below ${vocab}`);
    const maxTokens = r.max_tokens ?? 16;
    if (!(Number.isInteger(maxTokens) && maxTokens > 0)) throw new BadRequest(`max_tokens: expected a positive integer, got ${JSON.stringify(r.max_tokens)}`);
    if (prompt.length + maxTokens > ctxPerSeq)
        throw new BadRequest(`prompt (${prompt.length} tokens) + max_tokens (${maxTokens}) exceed the ${ctxPerSeq} tokens of a sequence`);
    const minTokens = r.min_tokens ?? 0;
    if (!(Number.isInteger(minTokens) && minTokens >= 0)) throw new BadRequest(`min_tokens: expected a non-negative integer, got ${JSON.stringify(r.min_tokens)}`);
    const temperature = r.temperature ?? 1;
    if (typeof temperature !== "number" || temperature < 0) throw new BadRequest(`temperature: expected a number >= 0, got ${JSON.stringify(r.temperature)}`);
    return {
        prompt, maxTokens, temperature,
        // EOS ends a completion unless ignore_eos, or before min_tokens
        minTokens: r.ignore_eos === true ? maxTokens : Math.min(minTokens, maxTokens),
        topP: r.top_p ?? 1, topK: r.top_k ?? 0, seed: r.seed,
        stream: r.stream === true,
        includeUsage: r.stream_options?.include_usage === true,
        modelName: typeof r.model === "string" ? r.model : "default",
    };
}

async function main() {
    const opts = parseArgs(process.argv);
    const llama = await getLlama({
        gpu: false, build: "never", usePrebuiltBinaries: true, maxThreads: opts.threads,
        logLevel: LlamaLogLevel.error, progressLogs: false,
    });
    const model = await llama.loadModel({ modelPath: opts.model, gpuLayers: 0, useMmap: true });
    const vocab = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? Number(model.fileInfo.metadata.llama?.vocab_size);
    const context = await model.createContext({
        contextSize: opts.ctxPerSeq, sequences: opts.parallel, threads: opts.threads,
    });
    const pool = new SequencePool(Array.from({ length: opts.parallel }, () => context.getSequence()));
    let nextId = 0;

    async function complete(req, res, body) {
        const r = readRequest(body, model, vocab, opts.ctxPerSeq);
        const id = `cmpl-peer-${nextId++}`;
        const created = Math.floor(Date.now() / 1000);
        const chunk = (text, finish) => ({
            id, object: "text_completion", created, model: r.modelName,
            choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
        });
        const tArrive = performance.now();
        const seq = await pool.take();
        const tTaken = performance.now();
        let aborted = false;
        res.on("close", () => { aborted = !res.writableFinished; });
        const out = [];
        let sent = 0, finish = "length";
        try {
            const tCleared = performance.now();
            let tPrev = tCleared;
            if (r.stream) {
                res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
            }
            const gen = seq.evaluate(r.prompt, {
                temperature: r.temperature, topP: r.topP, topK: r.topK, seed: r.seed, yieldEogToken: true,
            });
            for await (const token of gen) {
                if (aborted) break;
                if (model.isEogToken(token) && out.length >= r.minTokens) { finish = "stop"; break; }
                out.push(token);
                if (trace) {
                    const t = performance.now();
                    if (out.length === 1)
                        process.stderr.write(`${id}: wait ${(tTaken - tArrive).toFixed(0)} ms, prompt ${r.prompt.length} -> first token ${(t - tCleared).toFixed(0)} ms\n`);
                    else if (t - tPrev > 500) process.stderr.write(`${id}: token ${out.length} after ${(t - tPrev).toFixed(0)} ms\n`);
                    tPrev = t;
                }
                if (out.length >= r.maxTokens) break; // its text goes with the finish, as cinfer sends it
                if (!r.stream) continue;
                // the text so far, less a character still being spelled (U+FFFD at the end)
                const full = model.detokenize(out);
                if (!full.endsWith("\uFFFD") && full.length > sent) {
                    res.write(`data: ${JSON.stringify(chunk(full.slice(sent), null))}\n\n`);
                    sent = full.length;
                }
            }
            if (aborted) return;
            const full = model.detokenize(out);
            const usage = { prompt_tokens: r.prompt.length, completion_tokens: out.length, total_tokens: r.prompt.length + out.length };
            if (r.stream) {
                res.write(`data: ${JSON.stringify(chunk(full.slice(sent), finish))}\n\n`);
                if (r.includeUsage) res.write(`data: ${JSON.stringify({ ...chunk("", null), choices: [], usage })}\n\n`);
                res.end("data: [DONE]\n\n");
            } else {
                const answer = { ...chunk(full, finish), usage };
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end(JSON.stringify(answer));
            }
        } finally {
            // cleared before it goes back: clearing waits for the batch in flight, which
            // a request taking the sequence would otherwise wait for on its way in
            seq.clearHistory().then(() => pool.give(seq), (e) => {
                process.stderr.write(`llama_cpp_server: clearing sequence of ${id}: ${e.message}\n`);
            });
        }
    }

    const server = http.createServer((req, res) => {
        const chunks = [];
        req.on("data", (c) => chunks.push(c));
        req.on("end", () => {
            const body = Buffer.concat(chunks).toString("utf8");
            const fail = (status, message) => {
                if (res.headersSent) { res.end(); return; }
                res.writeHead(status, { "Content-Type": "application/json" });
                res.end(JSON.stringify({ error: { message, type: status === 400 ? "invalid_request_error" : "server_error" } }));
            };
            if (req.method === "GET" && req.url === "/get_server_info") {
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end(JSON.stringify({
                    vocab_size: vocab, model_path: opts.model, parallel: opts.parallel, threads: opts.threads,
                    ctx_per_seq: context.contextSize, batch_size: context.batchSize,
                    llama_cpp_build: llama.llamaCppRelease?.release ?? "unknown",
                    server: "llama.cpp via node-llama-cpp 3.21.1 + node http (bench/peers/llama_cpp_server.mjs)",
                }));
            } else if (req.method === "POST" && req.url === "/v1/completions") {
                complete(req, res, body).catch((e) => fail(e instanceof BadRequest ? 400 : 500, e.message));
            } else {
                fail(404, `${req.method} ${req.url}: this peer serves GET /get_server_info and POST /v1/completions`);
            }
        });
    });
    server.keepAliveTimeout = 5000;
    server.requestTimeout = 0; // a long benchmark stream must not be cut at node's 300 s default
    const stop = () => {
        server.close();
        server.closeAllConnections?.();
        // disposing waits for a batch in flight; whoever stops the peer should not
        setTimeout(() => process.exit(0), 1000).unref();
        context.dispose().then(() => model.dispose()).then(() => llama.dispose()).finally(() => process.exit(0));
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    server.listen(opts.port, opts.host, () => {
        const { address, port } = server.address();
        process.stderr.write(`llama_cpp_server: listening on http://${address}:${port}\n`);
    });
}

main().catch((e) => {
    process.stderr.write(`llama_cpp_server: ${e.stack ?? e}\n`);
    process.exit(1);
});
