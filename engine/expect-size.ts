// The one size check of the kernel launchers: every launcher checks each tensor before it dispatches, and the
// error names the launcher, the tensor's role, the tensor with its shape, and the shape the launcher expected.
import { shapeString, type Tensor } from './tensor.ts';

/** Throws unless `tensor` holds exactly `expected` elements, or with `match` 'at least', no fewer (a strided view
 *  into a larger buffer, a cache holding more sequences than are written). `shape` says what `expected` is made of:
 *  `[B=2, T=7]`.
 *  Message: `rmsnormForward: x (tensor h, shape [4, 8]) has 32 elements, expected 40 = [rows=5, C=8]`. */
export function expectSize(
  launcher: string,
  what: string,
  tensor: Tensor,
  expected: number,
  shape: string,
  match: 'exactly' | 'at least' = 'exactly',
): void {
  if (match === 'exactly' ? tensor.size === expected : tensor.size >= expected) return;
  throw new Error(
    `${launcher}: ${what} (tensor ${tensor.name}, shape ${shapeString(tensor.shape)}) has ${tensor.size} elements, ` +
      `expected ${match === 'at least' ? 'at least ' : ''}${expected} = ${shape}`,
  );
}
