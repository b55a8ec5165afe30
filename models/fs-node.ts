// File-system helpers the Node readers and writers of model and run directories share.
import { access, rename, writeFile } from 'node:fs/promises';

/** Whether `path` exists (and can be seen by this process). */
export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** Replaces `path` with `text` atomically: written under a staging name beside it, then renamed over it, so a reader
 *  or a kill mid-write sees the whole old file or the whole new one. */
export async function replaceFile(path: string, text: string): Promise<void> {
  const staging = `${path}.writing-${process.pid}`;
  await writeFile(staging, text);
  await rename(staging, path);
}
