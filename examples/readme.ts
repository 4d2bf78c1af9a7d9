import { createTinyModel, initBackend, loadAgent } from 'comlrl';
import { MAGRPOTrainer } from 'comlrl/trainers';
import { ToyCoordEnv, toyEvalTasks, toyTrainTasks, toyWords } from 'comlrl/envs';

await initBackend(); // auto: torch or tensorflow once set up (npm run setup:torch / setup:tensorflow), else wasm
const out = process.env.COMLRL_README_OUT ?? 'runs/readme';
for (const seed of [1, 2]) await createTinyModel({ dir: `${out}/agent${seed}`, arch: 'qwen3', seed, tokenizer: 'word', words: [...toyWords] });
const agents = await Promise.all([1, 2].map((seed) => loadAgent(`${out}/agent${seed}`)));
const trainer = new MAGRPOTrainer({
  agents, env: new ToyCoordEnv(), trainTasks: toyTrainTasks, evalTasks: toyEvalTasks,
  config: { num_turns: 1, num_generations: 8, max_new_tokens: 2, temperature: 1, top_p: 1, top_k: null,
            agent_learning_rate: 3e-3, num_train_epochs: 12, eval_num_samples: 4, seed: 0 },
});
console.log('before', (await trainer.evaluate()).metrics['eval/turn_1/mean_reward']);
await trainer.train();
console.log('after', (await trainer.evaluate()).metrics['eval/turn_1/mean_reward']);
await trainer.save(`${out}/final`); // agent_0/, agent_1/: HF format, loadable by transformers
