// Checks constrained-decoding outputs with references independent of cinfer:
//   {"schemas": [{name, dialect, schema, outputs: [text]}],   ajv (draft-04 or 2020-12, with
//                                                            ajv-formats) on JSON.parse(text)
//    "regexes": [{regex, outputs}],                          JavaScript's RegExp, whole match
//    "checks": [{name, kind, outputs}]}                      hand-written checks (kind: ints)
// read from the file named by argv[2]. Prints each failure, then a JSON summary line
// {"outputs": n, "valid": n, "invalid": [...]}; exit status 0 only when all are valid.
import { readFileSync } from 'node:fs';
import Ajv04 from 'ajv-draft-04';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const input = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const make = (Cls) => {
  const ajv = new Cls({ strict: false, allErrors: false, validateFormats: true, validateSchema: false });
  addFormats(ajv);
  return ajv;
};
const validators = { 'draft-04': make(Ajv04), '2020-12': make(Ajv2020) };
let outputs = 0, valid = 0;
const invalid = [];
function fail(name, text, why) {
  invalid.push(name);
  console.log(`not ok - ${name}: ${JSON.stringify(text).slice(0, 300)}: ${why}`);
}
for (const s of input.schemas ?? []) {
  let validate;
  try {
    validate = validators[s.dialect ?? 'draft-04'].compile(s.schema);
  } catch (e) {
    for (const t of s.outputs) fail(s.name, t, `ajv cannot compile the schema: ${e.message}`);
    outputs += s.outputs.length;
    continue;
  }
  for (const text of s.outputs) {
    outputs++;
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      fail(s.name, text, `not JSON: ${e.message}`);
      continue;
    }
    if (validate(value)) valid++;
    else fail(s.name, text, JSON.stringify(validate.errors).slice(0, 300));
  }
}
for (const r of input.regexes ?? []) {
  const re = new RegExp(`^(?:${r.regex})$`, 'u');
  for (const text of r.outputs) {
    outputs++;
    if (re.test(text)) valid++;
    else fail(`regex ${r.regex}`, text, 'does not match');
  }
}
for (const c of input.checks ?? []) {
  for (const text of c.outputs) {
    outputs++;
    let ok = false;
    try {
      const v = JSON.parse(text);
      if (c.kind === 'ints') ok = Array.isArray(v) && v.every((x) => Number.isInteger(x));
      if (c.kind === 'object-of-bools') ok = v !== null && typeof v === 'object' && !Array.isArray(v) &&
                                            Object.values(v).every((x) => typeof x === 'boolean');
    } catch {
      ok = false;
    }
    if (ok) valid++;
    else fail(c.name, text, `fails the ${c.kind} check`);
  }
}
console.log(JSON.stringify({ outputs, valid, invalid }));
process.exit(invalid.length ? 1 : 0);
