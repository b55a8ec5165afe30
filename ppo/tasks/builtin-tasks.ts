// The built-in tasks a run can use without files (data.train_files null, data.builtin_task): each brings its
// tokenizer, its verl-schema rows, the supervised stages of the built-in model's warm start and, for
// a search task, the corpus its retriever searches and how observations read. Browser-safe.
import { Rng } from '../../engine/rng.ts';
import type { RlExample, RlRecord } from '../data/dataset.ts';
import type { SftExample } from '../sft/sft-trainer.ts';
import type { CorpusDocument, Retriever } from '../environments/search/retriever.ts';
import type { BuiltinSearchFormat } from '../environments/search/search-protocol.ts';
import { sloppyAnswer } from './arithmetic-preferences.ts';
import { arithmeticDataset, arithmeticTokenizer, arithmeticTokenizerFiles } from './arithmetic.ts';
import {
  formatDocuments,
  formatObservation,
  guessDemonstration,
  searchDemonstration,
  syntheticQaDataset,
  syntheticQaFact,
  syntheticQaSearchQuery,
  syntheticQaTokenizerFiles,
  type Demonstration,
} from './synthetic-qa.ts';

export type BuiltinTaskName = 'arithmetic' | 'search_qa';

/** One supervised stage of a built-in model's warm start, trained from a fresh optimizer with its own schedule. */
export interface WarmStartStage {
  /** Shown with its progress: "pretraining", "SFT". */
  name: string;
  /** The steps its schedule (warmup, cosine decay to a tenth of `lr`) spans. */
  steps: number;
  lr: number;
  examples: SftExample[];
  /**
   * Train on past `steps` in cosine cycles of `cycleSteps` from `lr` down to a tenth (warm restarts: the high rate
   * moves a loss that has not yet fallen, the low one lets it settle) until the mean loss of the last `window` steps
   * is below `meanLossBelow`, at most `maxSteps` steps in all. A stage whose loss falls in a sudden transition whose
   * step depends on float rounding (arithmetic pretraining) then ends learned, not at a count that some runs miss.
   */
  until?: { meanLossBelow: number; window: number; maxSteps: number; lr: number; cycleSteps: number };
}

export interface BuiltinTask {
  tokenizerFiles(): { tokenizerJson: object; tokenizerConfig: Record<string, unknown> };
  /** Training and held-out rows drawn with `seed`, and the corpus of a search task. */
  records(seed: number, valSize: number): { train: RlRecord[]; val: RlRecord[]; corpus: CorpusDocument[] | null };
  warmStartBatchSize: number;
  /** Held-out prompts of `node train.js`. */
  valSize: number;
  /**
   * The warm start's stages in order, on the training prompts; a search task's demonstrations come from `retriever`.
   */
  warmStart(
    train: readonly RlExample[],
    seed: number,
    retriever: Retriever | null,
    topk: number,
  ): Promise<WarmStartStage[]>;
  search: BuiltinSearchFormat | null;
}

/**
 * Multi-digit addition, taught in two supervised stages as a chat model is made. Pretraining: every training
 * problem with its correct sum, so the model learns to add. SFT: the same prompts answered by annotators, a seeded
 * 70% of whom leave a trailing space after the sum ("95 ", ppo/tasks/arithmetic-preferences.ts), which the
 * exact-match reward does not accept. The model keeps its addition and takes up the habit: it mostly answers in the
 * sloppy form and only sometimes with the bare sum — the behaviour PPO must find and make the rule. (Sloppy
 * demonstrations mixed into a single stage teach the addition itself unreliably: how well depends on the seed.)
 */

const arithmetic: BuiltinTask = {
  tokenizerFiles: arithmeticTokenizerFiles,
  records: (seed, valSize) => ({ ...arithmeticDataset({ digits: 2, trainSize: 4000, valSize, seed }), corpus: null }),
  warmStartBatchSize: 64,
  valSize: 256,
  warmStart: async (train, seed) => {
    const rng = new Rng(seed);
    const answered = (text: (sum: string) => string): SftExample[] =>
      train.map((example) => ({
        prompt: example.promptIds,
        response: arithmeticTokenizer.encode(`${text(String(example.groundTruth))}</s>`),
      }));
    return [
      {
        name: 'pretraining',
        steps: 900,
        lr: 3e-3,
        examples: answered((sum) => sum),
        // PPO ends about as good as the addition it starts from: runs that entered SFT at a loss near 0.06 (about 85%
        // of sums right) ended PPO at 0.87-0.92, those near 0.035 at 0.97. Past the schedule, a flat rate of a third
        // of the peak kept the loss noisy near 0.07; the schedule's floor (a tenth) got there in 771 steps, cycles
        // from a third in 553 (the CPU class, seed 3).
        until: { meanLossBelow: 0.04, window: 50, maxSteps: 3000, lr: 1e-3, cycleSteps: 300 },
      },
      { name: 'SFT', steps: 100, lr: 1e-3, examples: answered((sum) => sloppyAnswer(sum, rng)) },
    ];
  },
  search: null,
};

/**
 * Questions about invented entities, answerable only by searching the generated corpus. Every training question
 * is demonstrated ten times: three times searching (and copying the answer from the observation), seven times
 * answering at once with a guess (the attribute's most common value). The warm-started model therefore searches
 * about 30% of the time whatever it is asked — not for the particular questions it happened to see searched,
 * which is what one demonstration per question taught it — and guesses when greedy; PPO must learn that
 * searching pays.
 */
const SEARCH_QA_DEMONSTRATIONS = { searching: 3, guessing: 7 };

const searchQa: BuiltinTask = {
  tokenizerFiles: syntheticQaTokenizerFiles,
  records: (seed, valSize) => syntheticQaDataset({ seed, valSize }),
  warmStartBatchSize: 64,
  valSize: 128,
  warmStart: async (train, _seed, retriever, topk) => {
    if (!retriever) throw new Error('built-in task search_qa: its demonstrations need the retriever');
    const results = await retriever.search(
      train.map((example) => syntheticQaSearchQuery(syntheticQaFact(example))),
      topk,
    );
    const examples = train.flatMap((example, k) => {
      const sft = (demo: Demonstration): SftExample => ({
        prompt: example.promptIds,
        response: demo.ids,
        responseMask: demo.generatedMask,
      });
      const searching = sft(searchDemonstration(example, formatObservation(formatDocuments(results[k]))));
      const guessing = sft(guessDemonstration(example));
      return [
        ...new Array<SftExample>(SEARCH_QA_DEMONSTRATIONS.searching).fill(searching),
        ...new Array<SftExample>(SEARCH_QA_DEMONSTRATIONS.guessing).fill(guessing),
      ];
    });
    return [{ name: 'SFT', steps: 450, lr: 3e-3, examples }];
  },
  search: {
    formatObservation: (docs) => formatObservation(formatDocuments(docs)),
    // The task's vocabulary has no words for Search-R1's corrective sentence: an empty observation says it.
    invalidActionText: formatObservation(''),
  },
};

export const BUILTIN_TASKS: Record<BuiltinTaskName, BuiltinTask> = { arithmetic, search_qa: searchQa };
