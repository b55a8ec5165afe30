// A critic made from a causal LM (verl's default: critic.model.path = the actor's): the same trunk, the LM head
// dropped, and a fresh `score` head as transformers initialises *ForTokenClassification — weight
// normal(0, initializer_range), bias zero.
import type { Arena, Engine, FloatDType } from '../engine/index.ts';
import { Rng } from '../engine/rng.ts';
import { withHead, type DecoderConfig } from './hf-config.ts';
import { createParameterArena, readHfTensors, uploadHfTensors, type NamedTensor } from './parameter-store.ts';

export const SCORE_INIT_STD = 0.02;

/** The fresh value-head tensor `name` (score.weight or score.bias), or undefined for any other name. */
export function freshScoreTensor(name: string, shape: readonly number[], seed: number): NamedTensor | undefined {
  if (name !== 'score.weight' && name !== 'score.bias') return undefined;
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  if (name === 'score.weight') {
    const rng = new Rng(seed);
    for (let i = 0; i < data.length; i++) {
      data[i] = SCORE_INIT_STD * Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
    }
  }
  return { shape, data };
}

/** `weightDtype`: a frozen critic's stored dtype (see createParameterArena). */
export async function criticFromCausalLm(
  engine: Engine,
  actorConfig: DecoderConfig,
  actorParams: Arena,
  seed: number,
  weightDtype: FloatDType = 'f32',
): Promise<{ config: DecoderConfig; params: Arena }> {
  const config = withHead(actorConfig, 'token-classification');
  const trunk = await readHfTensors(engine, actorParams, actorConfig);
  const params = createParameterArena(engine, config, 'critic', weightDtype);
  uploadHfTensors(
    engine,
    params,
    config,
    (name) => trunk.get(name) ?? freshScoreTensor(name, name === 'score.bias' ? [1] : [1, config.hiddenSize], seed),
    'critic from actor',
  );
  return { config, params };
}
