// File-system helpers the Node readers and writers of model and run directories share.
import { access } from 'node:fs/promises';

/** Whether `path` exists (and can be seen by this process). */
export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
