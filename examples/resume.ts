import { createTinyModel, initBackend, loadAgent } from '../src/index.js';
import { agentDir, checkpointEvery, checkpointWriter, latestCheckpoint, MAGRPOTrainer, resumeTrainer } from '../trainers/index.js';
import { ToyCoordEnv, toyEvalTasks, toyTrainTasks, toyWords } from '../envs/index.js';

await initBackend();
const out = process.env.COMLRL_RESUME_OUT ?? 'runs/resume';
// Run it, kill it, run it again: it goes on from its newest checkpoint, to the same final bytes.
const checkpoint = await latestCheckpoint(`${out}/checkpoints`);
if (!checkpoint) for (const seed of [1, 2]) await createTinyModel({ dir: `${out}/base${seed}`, arch: 'qwen3', seed, tokenizer: 'word', words: [...toyWords], hiddenSize: 32, numLayers: 1 });
const agents = await Promise.all([0, 1].map((i) => loadAgent(checkpoint ? agentDir(checkpoint, i) : `${out}/base${i + 1}`)));
const trainer = new MAGRPOTrainer({
  agents, env: new ToyCoordEnv(), trainTasks: toyTrainTasks, evalTasks: toyEvalTasks,
  config: { num_turns: 1, num_generations: 4, max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0,
            rollout_buffer_size: 3, agent_learning_rate: 3e-3, num_train_epochs: 2, eval_interval: 8, seed: 0 },
});
if (checkpoint) console.log('resuming at step', await resumeTrainer(trainer, checkpoint)); // weights, AdamW, buffers, streams
await trainer.train({
  callbacks: [checkpointEvery(4), { onSave: ({ dir }) => console.log('checkpoint', dir) }],
  saveCheckpoint: checkpointWriter(trainer, `${out}/checkpoints`, { keep: 2 }),
});
await trainer.save(`${out}/final`);
