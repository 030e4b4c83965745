// Encodes texts with Hugging Face's own tokenizers library and compares the ids with
// the ones our Python encoder produced (scripts/train/check_tokenizer.py writes them).
// Usage: node check_tokenizer_hf.js TOKENIZER_JSON CASES_JSON
// CASES_JSON: [{"name": ..., "text": ..., "ids": [...]}]. Exit status 1 on any mismatch.
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

async function main() {
  const [tokenizerPath, casesPath] = process.argv.slice(2);
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const cases = JSON.parse(fs.readFileSync(casesPath, "utf8"));
  let failures = 0, tokens = 0;
  for (const c of cases) {
    const encoding = await tokenizer.encode(c.text, null, { addSpecialTokens: false });
    const ids = encoding.getIds();
    tokens += ids.length;
    const first = ids.findIndex((id, i) => id !== c.ids[i]);
    if (ids.length !== c.ids.length || first >= 0) {
      failures++;
      const at = first >= 0 ? first : Math.min(ids.length, c.ids.length);
      console.log(`MISMATCH ${c.name}: hf ${ids.length} ids, python ${c.ids.length}; ` +
                  `first difference at ${at}: hf ${ids.slice(at, at + 5)} python ${c.ids.slice(at, at + 5)}`);
    }
    const decoded = await tokenizer.decode(ids, false);
    if (decoded !== c.text) {
      failures++;
      console.log(`DECODE MISMATCH ${c.name}`);
    }
  }
  console.log(`hf tokenizers: ${cases.length} texts, ${tokens} ids, ${failures} mismatches`);
  process.exit(failures ? 1 : 0);
}
main().catch((e) => { console.error(e); process.exit(2); });
