/**
 * comlrl from a research script: load (or create) two agents, build an environment, train them
 * with MAGRPO for a few epochs, evaluate before and after, save the agents and plot the metrics.
 *
 *   npm run build && node dist/examples/quickstart.js              # tiny models, ~10 s on a laptop
 *   COMLRL_AGENT_MODELS=/m/a,/m/b node dist/examples/quickstart.js  # your own HF checkpoints
 *
 * In your own project import from the package instead of the relative paths below:
 *   import { initBackend, loadCausalLM, loadTokenizer, MetricsLogger, writePlots } from 'comlrl';
 *   import { MAGRPOTrainer } from 'comlrl/trainers';
 *   import { ToyCoordEnv, toyTrainTasks, toyTasks, toyWords } from 'comlrl/envs';
 *
 * Environment variables: COMLRL_AGENT_MODELS (comma-separated model directories, one per agent),
 * COMLRL_QUICKSTART_EPOCHS (default 20), COMLRL_QUICKSTART_OUT (default runs/quickstart),
 * COMLRL_BACKEND (wasm, cpu, tensorflow, ...).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ToyCoordEnv, toyTasks, toyTrainTasks, toyWords } from '../envs/index.js';
import { createTinyModel, initBackend, loadCausalLM, loadTokenizer, MetricsLogger, writePlots, type Agent } from '../src/index.js';
import { MAGRPOTrainer } from '../trainers/index.js';

/** Options of {@link quickstart} (every field has an environment-variable default). */
export interface QuickstartOptions {
  /** One HF model directory per agent; default: two tiny random checkpoints made on the fly. */
  modelDirs?: string[];
  /** Passes over the 16 training items. */
  epochs?: number;
  /** Output directory (metrics, plots, saved agents). */
  out?: string;
  /** Print progress lines (default true). */
  verbose?: boolean;
}

/** What the script measured. */
export interface QuickstartResult {
  before: number;
  after: number;
  savedTo: string[];
  metricsFile: string;
}

/** Mean over eval episodes of the summed reward. */
function episodeReward(episodes: readonly { rewards: readonly number[] }[]): number {
  return episodes.reduce((s, e) => s + e.rewards.reduce((a, b) => a + b, 0), 0) / episodes.length;
}

export async function quickstart(options: QuickstartOptions = {}): Promise<QuickstartResult> {
  const say = options.verbose === false ? () => {} : (line: string) => console.log(line);
  // 1. A tensor backend: wasm by default on CPU; tfjs-node(-gpu) when installed and asked for.
  await initBackend();

  // 2. Agents: Hugging Face directories (config.json + safetensors + tokenizer.json).
  let dirs = options.modelDirs ?? process.env.COMLRL_AGENT_MODELS?.split(',').filter((d) => d !== '');
  let tmp: string | null = null;
  if (!dirs || dirs.length === 0) {
    tmp = await mkdtemp(join(tmpdir(), 'comlrl-quickstart-'));
    dirs = [join(tmp, 'agent-a'), join(tmp, 'agent-b')];
    // Tiny qwen3 checkpoints with a word-level tokenizer over the toy task's 15 words.
    for (const [i, dir] of dirs.entries()) {
      await createTinyModel({ dir, arch: 'qwen3', seed: i + 1, tokenizer: 'word', words: [...toyWords], hiddenSize: 32, numLayers: 1 });
    }
  }
  const agents: Agent[] = [];
  for (const [i, dir] of dirs.entries()) {
    agents.push({ name: `agent_${i}`, model: await loadCausalLM(dir), tokenizer: await loadTokenizer(dir), chat: false });
  }

  // 3. The task: both agents see a cue word and score 1 when they answer with the same fitting word.
  const env = new ToyCoordEnv();

  // 4. Metrics go to a JSONL file with CoMLRL's names (turn_1/reward_mean, eval/turn_1/mean_reward, ...).
  const out = resolve(options.out ?? process.env.COMLRL_QUICKSTART_OUT ?? join('runs', 'quickstart'));
  const logger = MetricsLogger.open(join(out, 'metrics.jsonl'), { overwrite: true });

  // 5. The trainer: CoMLRL's MAGRPOConfig fields, snake_case.
  const trainer = new MAGRPOTrainer({
    agents,
    env,
    trainTasks: toyTrainTasks,
    evalTasks: toyTasks(16, 'eval'),
    logger,
    config: {
      num_turns: 1,
      num_generations: 8,
      max_new_tokens: 2,
      temperature: 1,
      top_p: 1,
      top_k: 0,
      agent_learning_rate: 3e-3,
      num_train_epochs: options.epochs ?? Number(process.env.COMLRL_QUICKSTART_EPOCHS ?? 20),
      eval_interval: 16,
      eval_num_samples: 16,
      eval_batch_size: 16,
      logging_steps: 1,
      seed: 0,
    },
  });

  // 6. Evaluate, train, evaluate.
  const before = episodeReward((await trainer.evaluate()).episodes);
  say(`eval reward before training: ${before.toFixed(3)}`);
  await trainer.train({
    onItemEnd: ({ epoch, index }) => {
      if (index === toyTrainTasks.length - 1) say(`epoch ${epoch + 1} done`);
    },
  });
  const after = episodeReward((await trainer.evaluate()).episodes);
  say(`eval reward after training:  ${after.toFixed(3)}`);

  // 7. Save the agents in Hugging Face format (loadCausalLM and transformers read them back) and plot.
  const savedTo = await trainer.save(join(out, 'final'));
  await writePlots(out, logger.rows(), { title: 'quickstart' });
  say(`saved ${savedTo.join(', ')}; metrics and plots in ${out}`);

  trainer.dispose();
  for (const a of agents) a.model.dispose();
  // The tiny starting checkpoints were scratch; the trained agents are under `out`.
  if (tmp !== null) await rm(tmp, { recursive: true, force: true });
  return { before, after, savedTo, metricsFile: logger.path };
}

// Run when executed directly (not when imported by a test).
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  quickstart().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
