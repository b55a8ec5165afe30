// How a run that stops on an error tells its user: one line on stderr that names the file, key, row or tensor
// and what was expected, a non-zero exit status, and the stack trace only with TRAIN_DEBUG=1. Node's own
// file-system errors ("ENOSPC: no space left on device, write") name neither the path nor what was being done,
// so the places that touch the run directory wrap them with withFileContext.
import { readTrainDebug } from '../../engine/knobs.ts';

/** Exit status of a run stopped by an error (2 is a configuration error, 130 an interrupt). */
const ERROR_EXIT_CODE = 1;

const SYSTEM_ERROR_REASONS: Record<string, string> = {
  ENOSPC: 'the disk is full (ENOSPC)',
  EDQUOT: 'the disk quota is exhausted (EDQUOT)',
  EACCES: 'permission denied (EACCES)',
  EPERM: 'operation not permitted (EPERM)',
  EROFS: 'the file system is read-only (EROFS)',
  ENOENT: 'no such file or directory (ENOENT)',
  ENOTDIR: 'a part of the path is not a directory (ENOTDIR)',
  EISDIR: 'is a directory, expected a file (EISDIR)',
  EMFILE: 'too many open files (EMFILE)',
};

function systemErrorCode(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) ? code : null;
}

/**
 * Re-throws a file-system error as "<what>: <reason>" (e.g. "saving checkpoint /runs/x/global_step_3: the disk is full
 * (ENOSPC)").
 */
export async function withFileContext<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const code = systemErrorCode(err);
    if (code === null) throw err;
    const path = (err as NodeJS.ErrnoException).path;
    const reason = SYSTEM_ERROR_REASONS[code] ?? (err as Error).message;
    throw new Error(`${what}: ${reason}${path && !what.includes(path) ? ` at ${path}` : ''}`, { cause: err });
  }
}

/** The one line a user sees: the message with its line breaks folded, prefixed with "error:". */
export function formatRunError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const folded = message
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .join('; ');
  const code = systemErrorCode(err);
  const path = (err as NodeJS.ErrnoException | null)?.path;
  const context = code !== null && path && !folded.includes(path) ? ` (${path})` : '';
  return `error: ${folded}${context}`;
}

/**
 * Runs a command-line main: an error it throws becomes one line on stderr and exit status 1 (with TRAIN_DEBUG=1,
 * the stack follows); otherwise main's own status.
 */
export async function runMain(
  main: () => Promise<number>,
  writeError: (text: string) => void = (text) => process.stderr.write(`${text}\n`),
): Promise<number> {
  try {
    return await main();
  } catch (err) {
    writeError(formatRunError(err));
    if (readTrainDebug() && err instanceof Error && err.stack) writeError(err.stack);
    return ERROR_EXIT_CODE;
  }
}
