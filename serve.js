#!/usr/bin/env node
// Entry point: `node serve.js --model DIR [--port N] [--host 127.0.0.1]`. Registers the TypeScript and WGSL
// loaders, then serves the model over HTTP (OpenAI- and SGLang-compatible routes, docs/serving.md) until SIGINT or
// SIGTERM; an error that stops it is one line on stderr (TRAIN_DEBUG=1 adds its stack trace). As train.js, it runs
// in a child whose stderr passes through engine/native-stderr-node.ts, which drops Dawn's known harmless lines.
import './tools/node-loader.js';

async function runServer() {
  const { main } = await import('./ppo/jobs/serve-job-node.ts');
  const { runMain } = await import('./ppo/config/user-error.ts');
  return runMain(() => main(process.argv.slice(2)));
}

const { runWithFilteredStderr } = await import('./engine/native-stderr-node.ts');
process.exitCode = (await runWithFilteredStderr()) ?? (await runServer());
