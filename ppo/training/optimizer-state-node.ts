// AdamW state written to optimizer.safetensors tensor by tensor (optimizer-state.ts has the format): the file is
// never assembled in memory, so a save holds the moments once — the optimizer's own (offloaded: its host arrays) or
// the read-back of its device moments — not again as a file-sized buffer.
import { writeSafetensorsFile } from '../../models/safetensors-node.ts';
import type { AdamWState } from './adamw-optimizer.ts';
import { optimizerStateMetadata, optimizerStateTensors } from './optimizer-state.ts';

export async function writeOptimizerState(file: string, state: AdamWState): Promise<void> {
  await writeSafetensorsFile(file, optimizerStateTensors(state), optimizerStateMetadata(state));
}
