#!/usr/bin/env node
// Prints what Hugging Face's own `tokenizers` library (npm) makes of some texts, in the
// form tests/test_tokenizer_bpe.c pastes in: the reference for the unit test's ids.
//
//   node expected_ids.js NODE_MODULES TOKENIZER_JSON [--special] < texts.json
//
// texts.json is a JSON array of strings (or {"hex": "..."} for raw bytes, decoded with
// the WHATWG replacing decoder as tokenizer.h specifies). Prints one JSON line per text:
// {text, ids, decoded, decoded_skip}.
'use strict';
const path = require('path');
const fs = require('fs');
const [nodeModules, tokenizerJson, ...flags] = process.argv.slice(2);
const { Tokenizer } = require(path.join(nodeModules, 'tokenizers'));
const special = flags.includes('--special');
(async () => {
  const tok = Tokenizer.fromFile(tokenizerJson);
  const texts = JSON.parse(fs.readFileSync(0, 'utf8'));
  for (const t of texts) {
    const text = typeof t === 'string' ? t : new TextDecoder('utf-8').decode(Buffer.from(t.hex, 'hex'));
    const enc = await tok.encode(text, null, { addSpecialTokens: special });
    const ids = enc.getIds();
    const decoded = await tok.decode(ids, false);
    const decodedSkip = await tok.decode(ids, true);
    console.log(JSON.stringify({ text: t, ids, decoded, decoded_skip: decodedSkip }));
  }
})().catch((e) => { console.error(e); process.exit(1); });
