#!/usr/bin/env node
// `node tools/jsonl-to-parquet.js IN.jsonl OUT.parquet [--gsm8k [--split=train|test]]`: verl-schema Parquet from
// JSONL without pyarrow; --gsm8k turns GSM8K's raw {question, answer} rows into verl's preprocessed rows.
import './node-loader.js';

const { runJsonlToParquet } = await import('./parquet/jsonl-to-parquet.ts');
process.exitCode = runJsonlToParquet(process.argv.slice(2));
