#!/usr/bin/env node
// What each tokenizer.ggml.pre tag's split does under Hugging Face's own `tokenizers`
// (Oniguruma regexes): GPT-2's vocabulary and merges (the parity fixture's
// gpt2/tokenizer.json) with the tag's regexes from llama.cpp's table
// (tests/data/tokenizers/llama_cpp_pre_tags.json) as a Sequence of Split(isolated)
// pre-tokenizers, then ByteLevel without its own regex, and the tag's ignore_merges. A
// wrong split shows as other ids, since GPT-2's merges join across any boundary they can.
//
//   node pre_tags_reference.js NODE_PREFIX GPT2_TOKENIZER_JSON TAGS_JSON OUT_JSON
//
// OUT_JSON: { "texts": [...], "tags": { tag: [ids of each text] } } for every tag cinfer
// reads (byte-level, not implemented with llama.cpp's own code).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const TEXTS = [
  'Hello world',
  "I'm sure they've said we'll go, but you'd NEVER've KNOWN'S it's 'quoted'",
  'numbers 1 12 123 1234 12345 123456789 and 3.14159, 1,000,000 and -42',
  '   leading spaces and trailing   ',
  'tabs\tand\nnewlines\r\n\n\nend\n',
  'CamelCaseWordsAndALLCAPS and mIxEd cAsE, HTTPServerURL',
  'Café, naïve, Ünïcödé, ÉCOLE, straße, ΑΘΗΝΑ Αθήνα, Москва МОСКВА',
  '中文字符和日本語のひらがなカタカナ、한국어 텍스트도 있습니다。',
  'emoji 😀👍🏽 and symbols ©®™ ≤≥ → ∑ ∞',
  'code: def f(x):\n    return x**2 + 1  # comment\n\tif (a && b) { c[i] = "s"; }',
  'punctuation!!! ... ??? --- ___ *** ~~~ @user #tag $100 50% <tag/>',
  'mixed123abc 4you A1B2C3 x86_64 v2.0.1',
  'श्री देवनागरी لغة عربية ภาษาไทย',
  'a\u00a0b\u2003c\u3000d',
];

function main() {
  const [prefix, gpt2Path, tagsPath, outPath] = process.argv.slice(2);
  if (!outPath) {
    console.error('usage: node pre_tags_reference.js NODE_PREFIX GPT2_TOKENIZER_JSON TAGS_JSON OUT_JSON');
    process.exit(2);
  }
  const { Tokenizer } = require(path.resolve(prefix, 'node_modules', 'tokenizers'));
  const base = JSON.parse(fs.readFileSync(gpt2Path, 'utf8'));
  const tags = JSON.parse(fs.readFileSync(tagsPath, 'utf8')).tags;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cinfer-pre-tags-'));
  const out = { texts: TEXTS, tags: {} };
  (async () => {
    for (const [tag, t] of Object.entries(tags)) {
      if (t.custom || !t.byte_level) continue;
      const tj = JSON.parse(JSON.stringify(base));
      tj.normalizer = null;
      tj.pre_tokenizer = {
        type: 'Sequence',
        pretokenizers: t.regexes.map((r) => ({ type: 'Split', pattern: { Regex: r }, behavior: 'Isolated',
                                               invert: false }))
          .concat([{ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }]),
      };
      tj.post_processor = null;
      tj.model.ignore_merges = !!t.ignore_merges;
      const file = path.join(tmp, 'tokenizer.json');
      fs.writeFileSync(file, JSON.stringify(tj));
      const tok = Tokenizer.fromFile(file);
      const ids = [];
      for (const text of TEXTS)
        ids.push(Array.from((await tok.encode(text, null, { addSpecialTokens: false })).getIds()));
      out.tags[tag] = ids;
    }
    fs.writeFileSync(outPath, JSON.stringify(out));
    fs.rmSync(tmp, { recursive: true, force: true });
    console.log(`${Object.keys(out.tags).length} tags x ${TEXTS.length} texts`);
  })().catch((e) => { console.error(e); process.exit(1); });
}

main();
