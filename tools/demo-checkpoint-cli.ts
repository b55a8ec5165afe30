// Writes the browser demo's starting checkpoint: the built-in actor after the default job's own warm start
// (ppo/jobs/builtin-run.ts's warmStartedBuiltinActor, the code `node train.js` runs before PPO), as a Hugging Face
// directory the page fetches from its static files. Weights are stored in BF16: half the bytes of F32 for a
// page that downloads them, and training continues in F32 from the rounded values. warm_start.json records how
// the checkpoint was made (command, seeds, stages) and its loss per step, which the page charts.
import { writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { Engine } from '../engine/index.ts';
import { loadConfig } from '../ppo/config.ts';
import { DEFAULT_JOB, WARM_START_RECORD_FILE, type WarmStartRecord } from '../ppo/tasks/default-job.ts';
import { builtinDataset, builtinTask, builtinTokenizer, warmStartedBuiltinActor } from '../ppo/jobs/builtin-run.ts';
import { saveHfCheckpoint } from '../models/checkpoint-io-node.ts';
import { readHfTensors } from '../models/parameter-store.ts';

const USAGE = 'usage: node tools/demo-checkpoint.js [--out DIR] [key.sub=value ...]';
export const DEFAULT_OUT = 'demo/public/warm-start';

export async function writeDemoCheckpoint(argv: string[]): Promise<number> {
  const outAt = argv.indexOf('--out');
  if (outAt >= 0 && outAt + 1 >= argv.length) throw new Error(`--out needs a directory (${USAGE})`);
  const out = resolve(outAt >= 0 ? argv[outAt + 1] : DEFAULT_OUT);
  const overrides = argv.filter((_, i) => i !== outAt && i !== outAt + 1);
  const config = loadConfig({ layers: [DEFAULT_JOB], overrides });
  if (config.data.builtin_task !== 'arithmetic')
    throw new Error(`data.builtin_task: the demo runs the arithmetic task, got ${config.data.builtin_task}`);
  const engine = await Engine.create();
  try {
    const task = builtinTask(config);
    const { tokenizer, template, files } = builtinTokenizer(task);
    const { train } = await builtinDataset(config, task, tokenizer, template);
    const started = performance.now();
    const stages: WarmStartRecord['stages'] = [];
    const { actor, history } = await warmStartedBuiltinActor(engine, config, task, tokenizer, train, null, {
      onWarmStartStep: (r, { stage, totalSteps }) => {
        if (stages.at(-1)?.name !== stage) stages.push({ name: stage, steps: 0 });
        stages.at(-1)!.steps++;
        if (r.step === 1 || r.step % 50 === 0 || r.step === totalSteps)
          console.log(`warm start (${stage}) step ${r.step}/${totalSteps}: loss ${r.loss.toFixed(4)}`);
      },
    });
    const tensors = await readHfTensors(engine, actor.params, actor.config);
    await saveHfCheckpoint(out, {
      config: actor.config,
      tensors: [...tensors].map(([name, t]) => ({ name, shape: t.shape, dtype: 'BF16' as const, data: t.data })),
    });
    for (const [name, text] of Object.entries(files)) await writeFile(join(out, name), text);
    const record: WarmStartRecord = {
      command: ['node tools/demo-checkpoint.js', ...argv].join(' '),
      trainerSeed: config.trainer.seed,
      dataSeed: config.data.seed,
      stages,
      loss: history.map((r) => Number(r.loss.toFixed(5))),
    };
    await writeFile(join(out, WARM_START_RECORD_FILE), `${JSON.stringify(record)}\n`);
    console.log(
      `wrote ${relative(process.cwd(), out)}: ${history.length} warm-start steps in ${((performance.now() - started) / 1000).toFixed(0)} s`,
    );
    return 0;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}
