// The text a Search-R1 rollout inserts between <information> and </information>, as Search-R1's
// _passages2string: per document "Doc {i}(Title: {first line}) {remaining lines}\n" (no space before the
// parenthesis, a trailing newline after every document, the title kept verbatim, quotes included).
import type { RetrievedDocument } from './retriever.ts';

export function formatDocuments(docs: readonly RetrievedDocument[]): string {
  return docs
    .map((doc, i) => {
      const [title, ...text] = doc.contents.split('\n');
      return `Doc ${i + 1}(Title: ${title}) ${text.join('\n')}\n`;
    })
    .join('');
}
