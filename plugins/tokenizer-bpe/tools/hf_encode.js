'use strict';
const path=require('path'); const fs=require('fs');
const [nm, tj] = process.argv.slice(2);
const { Tokenizer } = require(path.join(nm, 'tokenizers'));
(async () => {
  const tok = Tokenizer.fromFile(tj);
  const inputs = JSON.parse(fs.readFileSync(0,'utf8'));
  for (const hex of inputs) {
    const text = new TextDecoder('utf-8').decode(Buffer.from(hex,'hex'));
    const a = (await tok.encode(text, null, {addSpecialTokens:false})).getIds();
    const b = (await tok.encode(text, null, {addSpecialTokens:true})).getIds();
    const d = await tok.decode(b, false); const ds = await tok.decode(b, true);
    console.log(JSON.stringify({a, b, d, ds}));
  }
})();
