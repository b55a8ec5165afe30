// Reads a retrieval corpus in Search-R1's format: JSONL, one {"id", "contents"} object per line, the first line of
// contents being the title (other keys are ignored). Streams the file line by line, so that a corpus larger than
// the biggest string Node can hold still loads (as far as memory allows).
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { CorpusDocument } from './retriever.ts';

const EXPECTED = 'expected one JSON object {"id": string or number, "contents": string} per line';

export async function loadCorpus(path: string): Promise<CorpusDocument[]> {
  const corpus: CorpusDocument[] = [];
  const input = createReadStream(path, { encoding: 'utf8' });
  const lines = createInterface({ input, crlfDelay: Infinity });
  let lineNumber = 0;
  try {
    for await (const line of lines) {
      lineNumber++;
      if (line.trim() === '') continue;
      corpus.push(parseCorpusLine(line, `${path}:${lineNumber}`));
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== undefined) throw new Error(`corpus ${path}: cannot read: ${code}`);
    throw err;
  } finally {
    // Leaving the loop early closes readline but leaves the file open.
    input.destroy();
  }
  if (corpus.length === 0) throw new Error(`corpus ${path}: no documents; ${EXPECTED}`);
  return corpus;
}

function parseCorpusLine(line: string, where: string): CorpusDocument {
  let row: unknown;
  try {
    row = JSON.parse(line);
  } catch (err) {
    throw new Error(`${where}: not valid JSON (${(err as Error).message}); ${EXPECTED}`);
  }
  if (row === null || typeof row !== 'object' || Array.isArray(row))
    throw new Error(`${where}: got ${line.slice(0, 100)}; ${EXPECTED}`);
  const { id, contents } = row as { id?: unknown; contents?: unknown };
  if (typeof contents !== 'string')
    throw new Error(`${where}: "contents" is ${JSON.stringify(contents) ?? 'missing'}; ${EXPECTED}`);
  if (typeof id !== 'string' && typeof id !== 'number')
    throw new Error(`${where}: "id" is ${JSON.stringify(id) ?? 'missing'}; ${EXPECTED}`);
  return { id: String(id), contents };
}
