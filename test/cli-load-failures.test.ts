/**
 * `comlrl train` refuses bad models, tokenizers and data while loading them, naming the token or
 * row and the file, and before it creates anything in `output.dir`: a failed start leaves no run
 * directory behind, so the same command runs once the file is fixed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { cp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { cli, toyConfigYaml, useCliWorkspace } from './cli-helpers.js';

const ws = useCliWorkspace('cli-load-failures');

/** A copy of agent 1's model folder, changed by `edit`. */
async function brokenCopy(name: string, edit: (dir: string) => Promise<void>): Promise<string> {
  const dir = join(ws.root, name);
  await cp(ws.agents[1], dir, { recursive: true });
  await edit(dir);
  return dir;
}

async function editJson(file: string, edit: (o: Record<string, unknown>) => void): Promise<void> {
  const o = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  edit(o);
  await writeFile(file, JSON.stringify(o, null, 2));
}

/** Runs `train` on agents [agent 0, `second`]; returns the run's stderr and exit code, and whether output.dir exists after it. */
async function train(name: string, second: string, set: string[] = [], output: Record<string, unknown> = {}): Promise<{ code: number; err: string; created: boolean; out: string; file: string }> {
  const out = join(ws.root, `${name}-run`);
  const file = join(ws.root, `${name}.yaml`);
  await writeFile(file, toyConfigYaml({ agents: [ws.agents[0], second], out, trainItems: 1, output: { eval_before_after: false, plots: false, ...output } }));
  const r = await cli(['train', '--config', file, ...set.flatMap((s) => ['--set', s])]);
  return { code: r.code, err: r.err, created: existsSync(out), out, file };
}

test('a word-level vocabulary without its unknown token is refused at load, naming the token and the file; no run directory is left; the rerun works once fixed', async () => {
  const tokFile = (dir: string) => join(dir, 'tokenizer.json');
  const dir = await brokenCopy('no-unk', (d) =>
    editJson(tokFile(d), (o) => {
      delete (o.model as { vocab: Record<string, number> }).vocab['[UNK]'];
    }),
  );
  const r = await train('no-unk', dir);
  expect(r.code).not.toBe(0);
  expect(r.err).toContain(`tokenizer.json in ${dir}: the unknown token "[UNK]" (field "model.unk_token") is not in the vocabulary`);
  expect(r.created).toBe(false);
  // Fixed, the same command starts the run where the failed one would have been.
  await cp(tokFile(ws.agents[1]), tokFile(dir));
  const again = await cli(['train', '--config', r.file]);
  expect(again.code, again.err).toBe(0);
  expect(existsSync(join(r.out, 'final'))).toBe(true);
});

test("an EOS the model's embedding has no row for is refused at load, naming the token and the files", async () => {
  const dir = await brokenCopy('eos-beyond', async (d) => {
    const vocabSize = (JSON.parse(readFileSync(join(d, 'config.json'), 'utf8')) as { vocab_size: number }).vocab_size;
    await editJson(join(d, 'tokenizer.json'), (o) => {
      (o.added_tokens as unknown[]).push({ id: vocabSize, content: '<|extra_eos|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
    });
    await editJson(join(d, 'tokenizer_config.json'), (o) => {
      o.eos_token = '<|extra_eos|>';
    });
  });
  const r = await train('eos-beyond', dir);
  expect(r.code).not.toBe(0);
  expect(r.err).toMatch(/the EOS token "<\|extra_eos\|>" of the tokenizer in .*eos-beyond \(tokenizer\.json \/ tokenizer_config\.json\) has id \d+, but the model's config\.json vocab_size is \d+/);
  expect(r.created).toBe(false);
});

test('model.use_chat_template with a tokenizer that has no chat template is refused at load, naming the folder', async () => {
  const dir = await brokenCopy('no-template', (d) =>
    editJson(join(d, 'tokenizer_config.json'), (o) => {
      delete o.chat_template;
    }),
  );
  const r = await train('no-template', dir, ['model.use_chat_template=true']);
  expect(r.code).not.toBe(0);
  expect(r.err).toContain(`agent 1: model.use_chat_template is true, but the tokenizer in ${dir} has no chat template`);
  expect(r.created).toBe(false);
});

test('a missing model folder and a bad data row (1-based, as the file counts rows) leave no run directory', async () => {
  const missing = await train('missing-model', join(ws.root, 'nowhere'));
  expect(missing.code).not.toBe(0);
  expect(missing.err).toMatch(/agent 1: model directory .*nowhere not found/);
  expect(missing.created).toBe(false);

  const data = join(ws.root, 'posts.jsonl');
  await writeFile(data, ['{"prompt": "a post"}', '{"prompt": "another post"}', '{"completion": "no prompt"}'].join('\n') + '\n');
  const bad = await train('bad-data', ws.agents[1], ['dataset.task=tldr', `dataset.path=${data}`]);
  expect(bad.code).not.toBe(0);
  expect(bad.err).toContain(`${data}, row 3, field 'prompt'`);
  expect(bad.created).toBe(false);
});
