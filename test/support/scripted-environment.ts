// A scripted tool for multi-turn rollout tests: `turnEndTokenIds` end a turn; every turn but the last gets an
// observation of 1–4 tokens whose length and ids depend on the sample and the turn, so the rows' caches fall out of
// step.
import type { TurnEnd, TurnEnvironment } from '../../ppo/generation/types.ts';

export class ScriptedEnvironment implements TurnEnvironment {
  readonly maxTurns = 3;
  readonly turnEndStrings: string[] = [];
  readonly calls: { turn: number; ended: TurnEnd[] }[] = [];
  /** Observations handed out. */
  given = 0;

  /** Ids 20–29 end a turn unless told otherwise. */
  constructor(readonly turnEndTokenIds: number[] = Array.from({ length: 10 }, (_, i) => 20 + i)) {}

  static observation(sample: number, turn: number): number[] {
    return Array.from({ length: 1 + ((sample + 2 * turn) % 4) }, (_, j) => 40 + ((sample * 7 + turn * 3 + j) % 20));
  }

  async observe(turn: number, ended: readonly TurnEnd[]): Promise<(number[] | null)[]> {
    this.calls.push({ turn, ended: [...ended] });
    return ended.map((end) => {
      if (turn + 1 >= this.maxTurns || end.reason !== 'stop') return null;
      this.given++;
      return ScriptedEnvironment.observation(end.sample, turn);
    });
  }
}
