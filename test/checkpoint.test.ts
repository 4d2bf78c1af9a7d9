import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CheckpointError,
  checkpointName,
  listCheckpoints,
  verifyCheckpoint,
  writeCheckpointAtomically,
} from '../src/checkpoint/index.js';
import { configHash, stableStringify } from '../src/config/index.js';

let root: string;
beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'comlrl-ckpt-'));
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

async function writeSample(dir: string, payload: string): Promise<void> {
  await writeCheckpointAtomically(dir, { step: 3, configHash: 'abc' }, async (tmp) => {
    await fs.mkdir(path.join(tmp, 'agent_0'));
    await fs.writeFile(path.join(tmp, 'agent_0', 'weights.bin'), payload);
    await fs.writeFile(path.join(tmp, 'state.json'), '{"step":3}');
  });
}

describe('atomic checkpoints', () => {
  it('publishes a complete directory with a manifest that verifies', async () => {
    const dir = path.join(root, checkpointName(3));
    await writeSample(dir, 'hello');
    const manifest = await verifyCheckpoint(dir, { configHash: 'abc' });
    expect(manifest.step).toBe(3);
    expect(manifest.files.map((f) => f.path)).toEqual(['agent_0/weights.bin', 'state.json']);
    // No temporary directories are left beside it.
    expect(await fs.readdir(root)).toEqual(['step-000003']);
  });

  it('leaves the previous checkpoint untouched when the writer fails', async () => {
    const dir = path.join(root, checkpointName(3));
    await writeSample(dir, 'first');
    await expect(
      writeCheckpointAtomically(dir, { step: 3, configHash: 'abc' }, async (tmp) => {
        await fs.writeFile(path.join(tmp, 'state.json'), 'partial');
        throw new Error('disk full');
      }),
    ).rejects.toThrow('disk full');
    expect(await fs.readFile(path.join(dir, 'agent_0', 'weights.bin'), 'utf8')).toBe('first');
    expect(await fs.readdir(root)).toEqual(['step-000003']);
  });

  it('refuses truncated, modified, missing and foreign checkpoints with the reason', async () => {
    const dir = path.join(root, checkpointName(3));
    await writeSample(dir, 'hello world');
    const weights = path.join(dir, 'agent_0', 'weights.bin');
    await fs.truncate(weights, 4);
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/agent_0\/weights.bin has 4 bytes.*truncated/);
    await fs.writeFile(weights, 'hello WORLD');
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/agent_0\/weights.bin does not match its recorded SHA-256/);
    await fs.rm(weights);
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/missing file agent_0\/weights.bin/);
    await writeSample(dir, 'hello');
    await expect(verifyCheckpoint(dir, { configHash: 'zzz' })).rejects.toThrow(/config mismatch.*abc.*zzz/);
    await fs.rm(path.join(dir, 'manifest.json'));
    await expect(verifyCheckpoint(dir)).rejects.toBeInstanceOf(CheckpointError);
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/missing manifest.json/);
  });

  it('refuses manifest entries outside the checkpoint folder, even with the right size and hash', async () => {
    const dir = path.join(root, 'ckpts', checkpointName(3));
    await writeSample(dir, 'hello');
    // A file outside the checkpoint whose size and SHA-256 are recorded correctly.
    const outside = path.join(root, 'secret.txt');
    await fs.writeFile(outside, 'top secret');
    const { createHash } = await import('node:crypto');
    const sha = createHash('sha256').update('top secret').digest('hex');
    const manifestPath = path.join(dir, 'manifest.json');
    const manifest = JSON.parse(await fs.readFile(manifestPath, 'utf8')) as { files: { path: string; bytes: number; sha256: string }[] };
    const withEntry = async (p: string) => {
      await fs.writeFile(manifestPath, JSON.stringify({ ...manifest, files: [...manifest.files, { path: p, bytes: 10, sha256: sha }] }));
    };
    await withEntry('../../secret.txt');
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/entry '\.\.\/\.\.\/secret\.txt' leaves the checkpoint folder.*refused/);
    await withEntry(outside);
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/is not a relative path inside the checkpoint folder/);
    await withEntry('agent_0/../../../secret.txt');
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/leaves the checkpoint folder/);
    // A symbolic link inside the folder, or a linked folder on the way, is refused too.
    await fs.symlink(outside, path.join(dir, 'link.txt'));
    await withEntry('link.txt');
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/'link.txt' is a symbolic link; refused/);
    await fs.mkdir(path.join(root, 'elsewhere'));
    await fs.writeFile(path.join(root, 'elsewhere', 'secret.txt'), 'top secret');
    await fs.symlink(path.join(root, 'elsewhere'), path.join(dir, 'linked'));
    await withEntry('linked/secret.txt');
    await expect(verifyCheckpoint(dir)).rejects.toThrow(/resolves outside the checkpoint folder/);
    await withEntry('agent_0/weights.bin');
    await fs.writeFile(manifestPath, JSON.stringify(manifest));
    await expect(verifyCheckpoint(dir)).resolves.toBeDefined();
  });

  it('lists checkpoints newest first', async () => {
    for (const step of [2, 10, 7]) {
      await writeCheckpointAtomically(path.join(root, checkpointName(step)), { step, configHash: 'h' }, async (tmp) => {
        await fs.writeFile(path.join(tmp, 'x'), String(step));
      });
    }
    expect((await listCheckpoints(root)).map((d) => path.basename(d))).toEqual([
      'step-000010',
      'step-000007',
      'step-000002',
    ]);
  });
});

describe('config hash', () => {
  it('ignores key order and undefined fields but not values', () => {
    expect(stableStringify({ b: 1, a: { d: [1, 2], c: undefined } })).toBe('{"a":{"d":[1,2]},"b":1}');
    expect(configHash({ a: 1, b: 2 })).toBe(configHash({ b: 2, a: 1 }));
    expect(configHash({ a: 1 })).not.toBe(configHash({ a: 2 }));
  });
});
