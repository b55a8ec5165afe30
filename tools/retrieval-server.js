#!/usr/bin/env node
// `node tools/retrieval-server.js [--corpus FILE.jsonl | --seed N] [--host H] [--port P]`: Search-R1's /retrieve API
// over BM25, by default over the built-in search_qa corpus.
import './node-loader.js';

const { runRetrievalServer } = await import('./retrieval-server.ts');
const code = await runRetrievalServer(process.argv.slice(2));
if (code !== null) process.exitCode = code;
