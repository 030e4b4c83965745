// Renders chat templates with the official renderer, @huggingface/jinja (what
// transformers.js's apply_chat_template uses), for test_chat_template.
//
//   node render.mjs CASES.json RESULTS.json
//
// CASES.json: [{"template": "<source>", "context": "<JSON text>"}, ...]
// RESULTS.json: [{"ok": true, "output_b64": "..."} | {"ok": false, "error": "..."}, ...]
// The output goes as base64 of its UTF-8 bytes, exactly what a caller writing the
// string out would get (lone surrogates become U+FFFD there too).
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [casesPath, resultsPath] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const compiled = new Map();
const results = cases.map(({ template, context }) => {
  try {
    let t = compiled.get(template);
    if (!t) {
      t = new Template(template);
      compiled.set(template, t);
    }
    const out = t.render(JSON.parse(context));
    return { ok: true, output_b64: Buffer.from(out, "utf8").toString("base64") };
  } catch (e) {
    return { ok: false, error: String(e && e.message !== undefined ? e.message : e) };
  }
});
writeFileSync(resultsPath, JSON.stringify(results));
