// The run's metric sinks, chosen by trainer.logger as in verl's Tracking: `file` appends verl's JSONL records
// ({"step": N, "data": {...}}) to RUN_DIR/metrics.jsonl; `tensorboard` writes an event file under
// $TENSORBOARD_DIR or RUN_DIR/tensorboard. `console` is the trainer's progress line (ppo/jobs/ppo-run-node.ts). wandb,
// mlflow and swanlab need services this engine does not ship: they are accepted and skipped with one line.
import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { SERVICE_LOGGERS, type PpoConfig } from '../config.ts';
import { fileVersionRecord, scalarsRecord, textRecord } from './tensorboard-events.ts';

export const METRICS_FILE = 'metrics.jsonl';

export class Tracking {
  private constructor(
    private readonly metricsFile: string | null,
    private readonly eventFile: string | null,
  ) {}

  /**
   * Opens the sinks. A fresh run empties metrics.jsonl; a resumed one appends to it. Each run (and each resume)
   * writes its own event file, as TensorBoard's writers do; TensorBoard reads a directory of them in order.
   */
  static async open(
    config: PpoConfig,
    runDir: string,
    resumed: boolean,
    env: Readonly<Record<string, string | undefined>>,
  ): Promise<Tracking> {
    const loggers = config.trainer.logger;
    let metricsFile: string | null = null;
    if (loggers.includes('file')) {
      metricsFile = join(runDir, METRICS_FILE);
      if (!resumed) await writeFile(metricsFile, '');
    }
    let eventFile: string | null = null;
    if (loggers.includes('tensorboard')) {
      const dir = resolve(env.TENSORBOARD_DIR ?? join(runDir, 'tensorboard'));
      await mkdir(dir, { recursive: true });
      const now = Date.now() / 1000;
      eventFile = join(dir, `events.out.tfevents.${Math.floor(now)}.${hostname()}.${process.pid}.webgpu`);
      await writeFile(eventFile, fileVersionRecord(now));
    }
    return new Tracking(metricsFile, eventFile);
  }

  /** The line saying which trainer.logger values were skipped and what to use instead, or null. */
  static skippedServicesNote(config: PpoConfig): string | null {
    const skipped = config.trainer.logger.filter((l) => (SERVICE_LOGGERS as readonly string[]).includes(l));
    if (skipped.length === 0) return null;
    return (
      `trainer.logger: skipped ${skipped.join(', ')} (needs a service this engine does not ship) — use tensorboard; ` +
      'its event files import into W&B (wandb sync --sync-tensorboard DIR) and SwanLab (swanlab convert -t ' +
      'tensorboard --tb-logdir DIR)'
    );
  }

  /** Where the TensorBoard event file is, when trainer.logger has tensorboard. */
  get tensorboardFile(): string | null {
    return this.eventFile;
  }

  async log(step: number, data: Record<string, number>): Promise<void> {
    if (this.metricsFile) await appendFile(this.metricsFile, `${JSON.stringify({ step, data })}\n`);
    if (this.eventFile) await appendFile(this.eventFile, scalarsRecord(Date.now() / 1000, step, data));
  }

  /**
   * trainer.log_val_generations: the validation samples as a markdown table under val/generations, as verl's
   * ValidationGenerationsLogger gives TensorBoard (the console prints them; verl's JSONL file has no place for text).
   */
  async logGenerations(
    step: number,
    samples: readonly { input: string; output: string; score: number }[],
  ): Promise<void> {
    if (!this.eventFile || samples.length === 0) return;
    const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, '<br>');
    const table = [
      '| input | output | score |',
      '| --- | --- | --- |',
      ...samples.map((s) => `| ${cell(s.input)} | ${cell(s.output)} | ${s.score} |`),
    ];
    await appendFile(this.eventFile, textRecord(Date.now() / 1000, step, 'val/generations', table.join('\n')));
  }
}
