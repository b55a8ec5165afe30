// verl's Gsm8kTool (verl/tools/gsm8k_tool.py, examples/sglang_multiturn): the model submits its answer to
// calc_gsm8k_reward and reads back whether it parses to the ground truth (GSM8K's rule reward, flexible method); a
// submission that does not improve on the instance's last one gets a -0.05 step reward, as verl's.
import { computeScore } from '../../rewards/gsm8k.ts';
import { newInstanceId, type AgentTool, type ToolResponse, type ToolSchema } from './agent-tool.ts';

interface Gsm8kInstance {
  response: string;
  groundTruth: string | null;
  reward: number;
}

/** Python's repr of a str, as verl's f"{answer=}" writes it. */
function pythonRepr(text: string): string {
  return text.includes("'") && !text.includes('"')
    ? `"${text}"`
    : `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/** Python's str of a float (1.0, not 1). */
function pythonFloat(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

export class Gsm8kTool implements AgentTool {
  private readonly instances = new Map<string, Gsm8kInstance>();

  constructor(
    readonly config: Record<string, unknown>,
    readonly toolSchema: ToolSchema,
  ) {}

  async create(
    instanceId: string | null,
    kwargs: { create_kwargs?: Record<string, unknown> },
  ): Promise<[string, ToolResponse]> {
    const id = instanceId ?? newInstanceId();
    const groundTruth = kwargs.create_kwargs?.ground_truth;
    this.instances.set(id, {
      response: '',
      groundTruth: groundTruth === undefined || groundTruth === null ? null : String(groundTruth),
      reward: 0,
    });
    return [id, {}];
  }

  async execute(
    instanceId: string,
    parameters: Record<string, unknown>,
  ): Promise<[ToolResponse, number, Record<string, unknown>]> {
    const instance = this.instanceOf(instanceId);
    const raw = parameters.answer ?? '';
    const answer = typeof raw === 'string' ? raw : String(raw);
    instance.response = answer.startsWith('#### ') ? answer : `#### ${answer}`;
    const reward = await this.calc_reward(instanceId);
    // verl's penalty for a submission that does not improve on the last.
    const toolReward = reward > instance.reward ? 0 : -0.05;
    instance.reward = reward;
    return [{ text: `Current parsed answer=${pythonRepr(answer)} reward=${pythonFloat(reward)}` }, toolReward, {}];
  }

  async calc_reward(instanceId: string): Promise<number> {
    const instance = this.instanceOf(instanceId);
    // verl scores against ground_truth None too (the comparison fails): 0 unless there is one.
    return instance.groundTruth === null ? 0 : computeScore(instance.response, instance.groundTruth, 'flexible', 0, 1);
  }

  async release(instanceId: string): Promise<void> {
    this.instances.delete(instanceId);
  }

  private instanceOf(instanceId: string): Gsm8kInstance {
    const instance = this.instances.get(instanceId);
    if (!instance) throw new Error(`calc_gsm8k_reward: no instance ${instanceId} (create it first)`);
    return instance;
  }
}
