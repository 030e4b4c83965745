#!/usr/bin/env node
// Peer of bench_tokenizer.c: Hugging Face's `tokenizers` (node binding) encode
// throughput on one thread, over the same corpus.
//
//   RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false UV_THREADPOOL_SIZE=1 \
//     node bench_tokenizer_peer.js NODE_PREFIX CORPUS_JSON TOKENIZER_JSON MIN_SECONDS [MIN_STRING_BYTES]
//
// Encodes every corpus string with encode(text, null, {addSpecialTokens: false}), one
// after the other (no encodeBatch, so no parallelism), one warm-up pass, then whole
// passes until MIN_SECONDS have gone by. With MIN_STRING_BYTES only strings at least
// that long are encoded (per-call overhead then no longer counts). Prints one JSON line:
//   {"bytes": corpus UTF-8 bytes per pass, "passes", "seconds", "cpu_seconds", "tokens",
//    "mb_per_s" (by wall time), "mb_per_cpu_s" (by the process's CPU time, all threads)}
// The binding runs each encode as a libuv task: with UV_THREADPOOL_SIZE=1 and one call
// in flight at a time, one thread tokenizes.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [prefix, corpusPath, tokenizerPath, minSecondsArg, minStringBytesArg] = process.argv.slice(2);
  if (!minSecondsArg) {
    console.error('usage: node bench_tokenizer_peer.js NODE_PREFIX CORPUS_JSON TOKENIZER_JSON MIN_SECONDS [MIN_STRING_BYTES]');
    process.exit(2);
  }
  const { Tokenizer } = require(path.join(prefix, 'node_modules', 'tokenizers'));
  const minStringBytes = Number(minStringBytesArg || 0);
  const strings = JSON.parse(fs.readFileSync(corpusPath, 'utf8')).strings
    .filter((s) => Buffer.byteLength(s, 'utf8') >= minStringBytes);
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const bytes = strings.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
  const options = { addSpecialTokens: false };
  const pass = async () => {
    let tokens = 0;
    for (const s of strings) tokens += (await tokenizer.encode(s, null, options)).getLength();
    return tokens;
  };
  await pass();  // warm-up: caches, JIT, page faults
  const minSeconds = Number(minSecondsArg);
  let passes = 0;
  let tokens = 0;
  const start = process.hrtime.bigint();
  const cpuStart = process.cpuUsage();
  let seconds = 0;
  do {
    tokens += await pass();
    passes++;
    seconds = Number(process.hrtime.bigint() - start) / 1e9;
  } while (seconds < minSeconds);
  const cpu = process.cpuUsage(cpuStart);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  console.log(JSON.stringify({
    bytes, passes, seconds, cpu_seconds: cpuSeconds, tokens,
    mb_per_s: (bytes * passes) / seconds / 1e6, mb_per_cpu_s: (bytes * passes) / cpuSeconds / 1e6,
  }));
}

main().catch((e) => {
  console.error(`bench_tokenizer_peer: ${e.stack || e}`);
  process.exit(1);
});
