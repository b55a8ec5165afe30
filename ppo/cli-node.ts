// Node command line of the trainer (Node-only: the browser demo drives ppo/ directly).
import { Engine } from '../engine/index.ts';
import { DEFAULT_SFT_WARM_START, runSftWarmStart } from './default-job.ts';

export async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help')) {
    console.log('usage: node train.js   (runs the embedded default job)');
    return 0;
  }
  const engine = await Engine.create();
  try {
    console.log(`device: ${engine.caps.description}`);
    const started = performance.now();
    const options = DEFAULT_SFT_WARM_START;
    let first = NaN;
    const result = await runSftWarmStart(engine, options, (r) => {
      if (r.step === 1) first = r.loss;
      if (r.step === 1 || r.step % 10 === 0 || r.step === options.steps) {
        console.log(`sft step ${String(r.step).padStart(4)}/${options.steps}  loss ${r.loss.toFixed(4)}  ${Math.round(r.tokensPerSecond)} tokens/s  ${r.ms.toFixed(0)} ms`);
      }
    });
    const last = result.history[result.history.length - 1];
    console.log(`sft: loss ${first.toFixed(4)} -> ${last.loss.toFixed(4)} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return 0;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}
