// comlrl from your own project: two tiny agents, the toy collaboration task, MAGRPO on 2 items.
//   npm install comlrl            (from a git URL or a packed tarball: see docs/install.md)
//   node library.mjs
import { createTinyModel, initBackend, loadAgent } from 'comlrl';
import { MAGRPOTrainer } from 'comlrl/trainers';
import { ToyCoordEnv, toyEvalTasks, toyTrainTasks, toyWords } from 'comlrl/envs';

const out = process.env.COMLRL_EXAMPLE_OUT ?? 'runs/library';
await initBackend(); // auto: a native backend once `npx comlrl setup ...` has built one, else wasm

// Two random word-level models; put your own Hugging Face checkpoint folders here instead.
for (const seed of [1, 2]) await createTinyModel({ dir: `${out}/agent${seed}`, arch: 'qwen3', seed, tokenizer: 'word', words: [...toyWords] });
const agents = await Promise.all([1, 2].map((seed) => loadAgent(`${out}/agent${seed}`)));

const trainer = new MAGRPOTrainer({
  agents, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 2), evalTasks: toyEvalTasks,
  config: { num_turns: 1, num_generations: 4, max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0,
            agent_learning_rate: 3e-3, num_train_epochs: 1, eval_num_samples: 2, seed: 0 },
});
console.log('before', (await trainer.evaluate()).metrics['eval/turn_1/mean_reward']);
await trainer.train(); // one pass over the 2 training items
console.log('after', (await trainer.evaluate()).metrics['eval/turn_1/mean_reward']);
await trainer.save(`${out}/final`); // agent_0/, agent_1/: Hugging Face format
console.log('saved', `${out}/final`);
