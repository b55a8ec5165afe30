import source from './loss-partials.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import { withWorkgroupReduce } from './ppo-shared.ts';

export const lossPartialsSpec: KernelSpec = {
  name: 'loss-partials',
  source: withWorkgroupReduce(source),
  bindings: [
    { name: 'partials', access: 'read' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'B', type: 'u32' },
    { name: 'K', type: 'u32' },
    { name: 'ratioMask', type: 'u32' },
    { name: 'denCol', type: 'u32' },
  ],
};

/** out [K] = column sums of partials [B, K]; the columns in `ratioColumns` are divided by column denCol (+1e-8). */
export function reduceLossPartials(
  engine: Engine,
  partials: Tensor,
  out: Tensor,
  B: number,
  K: number,
  ratioColumns: readonly number[],
  denCol: number,
): void {
  expectSize('loss-partials', 'partials', partials, B * K, `[B=${B}, K=${K}]`);
  expectSize('loss-partials', 'out', out, K, `[K=${K}]`);
  engine.dispatch(lossPartialsSpec, {
    bindings: { partials, out },
    uniforms: { B, K, ratioMask: ratioColumns.reduce((m, k) => m | (1 << k), 0), denCol },
    workgroups: [1],
  });
}
