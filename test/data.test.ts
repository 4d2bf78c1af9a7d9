import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteFile } from 'hyparquet-writer';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  firstInvalidUtf8,
  DatasetError,
  coopHERowSchema,
  houseBuildTaskSchema,
  loadCoopHERows,
  loadHouseBuildTasks,
  loadRows,
  loadTLDRRows,
  paperSplits,
  parseSplitSpec,
  resolveSlice,
} from '../src/data/index.js';

const dir = mkdtempSync(join(tmpdir(), 'comlrl-data-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Small problems written by the test (CoopHE data itself has no licence and is never used here).
const problems = Array.from({ length: 20 }, (_, i) => ({
  task_id: `Toy/${i}`,
  prompt: `def f${i}(x):\n    """Return x plus ${i}."""\n`,
  test: `def check(candidate):\n    assert candidate(1) == ${1 + i}\n`,
  entry_point: `f${i}`,
}));
const posts = Array.from({ length: 10 }, (_, i) => ({ prompt: `SUBREDDIT: r/test TITLE: post ${i} POST: body ${i}`, completion: ` tl;dr ${i}` }));

function errorOf(p: Promise<unknown>): Promise<DatasetError> {
  return p.then(
    () => {
      throw new Error('expected a DatasetError');
    },
    (e: unknown) => {
      expect(e).toBeInstanceOf(DatasetError);
      return e as DatasetError;
    },
  );
}

describe('formats round trip', () => {
  it('JSON array', async () => {
    const file = join(dir, 'che.json');
    writeFileSync(file, JSON.stringify(problems));
    expect(await loadCoopHERows(file)).toEqual(problems);
  });

  it('JSON {split: rows}', async () => {
    const file = join(dir, 'tldr.json');
    writeFileSync(file, JSON.stringify({ train: posts.slice(0, 6), test: posts.slice(6) }));
    expect(await loadTLDRRows(file, 'train')).toEqual(posts.slice(0, 6));
    expect(await loadTLDRRows(file, 'test')).toEqual(posts.slice(6));
    const e = await errorOf(loadTLDRRows(file, 'validation[:2]'));
    expect(e.message).toContain("no split 'validation'");
    expect(e.message).toContain("'train', 'test'");
    // Two splits and no spec: ambiguous.
    await errorOf(loadTLDRRows(file));
  });

  it('JSONL (blank lines skipped)', async () => {
    const file = join(dir, 'che.jsonl');
    writeFileSync(file, problems.map((p) => JSON.stringify(p)).join('\n') + '\n\n');
    expect(await loadCoopHERows(file, 'train[16:]')).toEqual(problems.slice(16));
  });

  it('Parquet written with hyparquet-writer, INT64 back as numbers', async () => {
    const file = join(dir, 'tldr.parquet');
    parquetWriteFile({
      filename: file,
      columnData: [
        { name: 'prompt', data: posts.map((p) => p.prompt), type: 'STRING' },
        { name: 'completion', data: posts.map((p) => p.completion), type: 'STRING' },
        { name: 'n', data: posts.map((_, i) => BigInt(i)), type: 'INT64' },
      ],
    });
    expect(await loadTLDRRows(file, 'train[:3]')).toEqual(posts.slice(0, 3));
    const withN = await loadRows(file, { schema: z.object({ n: z.number().int() }) });
    expect(withN.map((r) => r.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('hub-layout directory: data/<split>-NNNNN-of-NNNNN.parquet shards concatenate', async () => {
    const root = join(dir, 'hub');
    mkdirSync(join(root, 'data'), { recursive: true });
    const shard = (name: string, rows: typeof posts) =>
      parquetWriteFile({ filename: join(root, 'data', name), columnData: [{ name: 'prompt', data: rows.map((r) => r.prompt), type: 'STRING' }] });
    shard('train-00000-of-00002.parquet', posts.slice(0, 3));
    shard('train-00001-of-00002.parquet', posts.slice(3, 7));
    shard('test-00000-of-00001.parquet', posts.slice(7));
    const train = await loadTLDRRows(root, 'train');
    expect(train.map((r) => r.prompt)).toEqual(posts.slice(0, 7).map((p) => p.prompt));
    expect((await loadTLDRRows(root, 'test[-1:]')).map((r) => r.prompt)).toEqual([posts[9].prompt]);
  });
});

describe('malformed rows', () => {
  it('names file, row number (from 1, within the split, before slicing) and field', async () => {
    const file = join(dir, 'bad.jsonl');
    const rows = problems.slice(0, 5).map((p) => ({ ...p }));
    (rows[3] as Record<string, unknown>).entry_point = 7;
    writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n'));
    const e = await errorOf(loadCoopHERows(file, 'train[2:]'));
    // rows[3] is the file's fourth row: row numbers count from 1, as a reader counts them.
    expect(e.location).toMatchObject({ file, row: 4, field: 'entry_point' });
    expect(e.message).toContain(file);
    expect(e.message).toContain('row 4');
    expect(e.message).toContain("field 'entry_point'");
    // Rows outside the slice are not validated.
    await expect(loadCoopHERows(file, 'train[:3]')).resolves.toHaveLength(3);
  });

  it('names the split and a nested field', async () => {
    const file = join(dir, 'hb.json');
    const good = (await loadHouseBuildTasks())[0];
    const broken = structuredClone(good);
    broken.target_spec.layers[2].rows[4] = 'CCC';
    writeFileSync(file, JSON.stringify({ train: [good, broken] }));
    const e = await errorOf(loadHouseBuildTasks(file, 'train'));
    expect(e.location).toMatchObject({ split: 'train', row: 2, field: 'target_spec.layers.2.rows.4' });
    expect(e.message).toMatch(/expected 6 characters/);
  });

  it('a missing field and invalid JSONL lines', async () => {
    const file = join(dir, 'missing.json');
    writeFileSync(file, JSON.stringify([{ prompt: 'a' }, { completion: 'b' }]));
    const e = await errorOf(loadTLDRRows(file));
    expect(e.location).toMatchObject({ row: 2, field: 'prompt' });
    const bad = join(dir, 'broken.jsonl');
    writeFileSync(bad, '{"prompt":"a"}\n{"prompt":\n');
    expect((await errorOf(loadTLDRRows(bad))).message).toMatch(/row 2.*line 2: invalid JSON/);
  });

  it('non-UTF-8 bytes are refused with file, row and byte offset (never read as U+FFFD)', async () => {
    const file = join(dir, 'latin1.jsonl');
    // Rows 1 and 2, a blank line, then row 3 whose prompt holds "café" in Latin-1 (é = 0xE9).
    const head = Buffer.from('{"prompt":"a"}\n{"prompt":"b"}\n\n{"prompt":"caf');
    writeFileSync(file, Buffer.concat([head, Buffer.from([0xe9]), Buffer.from('"}\n')]));
    const e = await errorOf(loadTLDRRows(file));
    // Offset = bytes before the é: 15 + 15 + 1 + 14 = 45; it is on line 4, column 15.
    expect(head.length).toBe(45);
    expect(e.location).toMatchObject({ file, row: 3 });
    expect(e.message).toBe(`${file}, row 3: invalid UTF-8 at byte offset 45 (line 4, column 15: byte 0xe9); save the file as UTF-8`);
    // Overlong encodings and UTF-16 surrogates are not UTF-8 either; a BOM and 4-byte characters are.
    expect(firstInvalidUtf8(Buffer.from([0x61, 0xc0, 0xaf]))).toBe(1);
    expect(firstInvalidUtf8(Buffer.from([0xed, 0xa0, 0x80]))).toBe(0);
    expect(firstInvalidUtf8(Buffer.from([0xe2, 0x82]))).toBe(0);
    expect(firstInvalidUtf8(Buffer.from('\ufeff{"prompt":"😀 é"}'))).toBe(-1);
    const json = join(dir, 'latin1.json');
    writeFileSync(json, Buffer.concat([Buffer.from('[{"prompt":"'), Buffer.from([0xff]), Buffer.from('"}]')]));
    expect((await errorOf(loadTLDRRows(json))).message).toBe(`${json}: invalid UTF-8 at byte offset 12 (line 1, column 13: byte 0xff); save the file as UTF-8`);
  });
});

describe('split-slice syntax', () => {
  it('parses HF forms', () => {
    expect(parseSplitSpec('train')).toEqual([{ split: 'train', from: null, to: null, unit: 'rows', rounding: 'closest' }]);
    expect(parseSplitSpec('train[100:200]')[0]).toMatchObject({ from: 100, to: 200, unit: 'rows' });
    expect(parseSplitSpec('test[:50%]')[0]).toMatchObject({ split: 'test', from: null, to: 50, unit: 'percent' });
    expect(parseSplitSpec('[8:]')[0]).toMatchObject({ split: '', from: 8, to: null });
    expect(parseSplitSpec('train[:10]+test[-5:]').map((s) => s.split)).toEqual(['train', 'test']);
    expect(() => parseSplitSpec('train[1:5%]')).toThrow(/mixes percent/);
    expect(() => parseSplitSpec('train[1:2')).toThrow(/cannot parse/);
    expect(() => parseSplitSpec('train[:101%]')).toThrow(/outside/);
  });

  it('resolves like datasets: clamping, negatives, round-half-even percents', () => {
    const r = (spec: string, n: number) => resolveSlice(parseSplitSpec(spec)[0], n);
    expect(r('train[:1000]', 300)).toEqual({ start: 0, end: 300 });
    expect(r('train[100:200]', 1000)).toEqual({ start: 100, end: 200 });
    expect(r('train[-10:]', 25)).toEqual({ start: 15, end: 25 });
    expect(r('train[-100:-90]', 25)).toEqual({ start: 0, end: 0 });
    expect(r('train[20:10]', 25)).toEqual({ start: 20, end: 20 });
    // 50% of 82 = 41; 25% of 10 = 2.5 → 2 (half to even); 35% of 10 = 3.5 → 4.
    expect(r('test[:50%]', 82)).toEqual({ start: 0, end: 41 });
    expect(r('test[:25%]', 10)).toEqual({ start: 0, end: 2 });
    expect(r('test[:35%]', 10)).toEqual({ start: 0, end: 4 });
    expect(r('test[-20%:]', 10)).toEqual({ start: 8, end: 10 });
    // pct1_dropremainder: boundary · trunc(n/100) = 10 · 2.
    expect(r('train[:10%](pct1_dropremainder)', 250)).toEqual({ start: 0, end: 20 });
  });

  it("a flat file is the split 'train' (or unnamed); other names are refused, not answered with its rows", async () => {
    const file = join(dir, 'che2.json');
    writeFileSync(file, JSON.stringify(problems));
    const a = await loadRows(file, { schema: coopHERowSchema, split: 'train[18:]+[:1]' });
    expect(a.map((p) => p.task_id)).toEqual(['Toy/18', 'Toy/19', 'Toy/0']);
    // The README's TLDR recipe once exported only the train split to one file and evaluated on
    // 'test[:1100]': the "test" rows were the training rows.
    const e = await errorOf(loadRows(file, { schema: coopHERowSchema, split: 'test[:1]' }));
    expect(e.message).toContain(`${file}: split 'test' (in 'test[:1]') does not exist: a single file holds one split, named 'train'`);
    expect(e.message).toContain('point dataset.path at it, or point dataset.eval_path at the test file');
  });
});

describe('packaged HouseBuild tasks and paper splits', () => {
  it('10 tasks: [:8] train, [8:] eval', async () => {
    const all = await loadHouseBuildTasks();
    expect(all).toHaveLength(10);
    const train = await loadHouseBuildTasks(undefined, paperSplits.housebuild.train);
    const evalSet = await loadHouseBuildTasks(undefined, paperSplits.housebuild.eval);
    expect(train.map((t) => t.task_id)).toEqual(['house_build_0002', ...[1, 2, 3, 4, 5, 6, 7].map((i) => `house_build_010${i}`)]);
    expect(evalSet.map((t) => t.task_id)).toEqual(['house_build_0108', 'house_build_0109']);
    // 6 × 7 × 7 = 294 cells per task.
    for (const t of all) {
      const [w, h, d] = t.target_spec.size;
      expect(w * h * d).toBe(294);
      expect(houseBuildTaskSchema.safeParse(t).success).toBe(true);
    }
  });

  it('CoopHE paper split: 16 eval, the rest train', async () => {
    const file = join(dir, 'che82.json');
    const many = Array.from({ length: 82 }, (_, i) => ({ ...problems[0], task_id: `Toy/${i}` }));
    writeFileSync(file, JSON.stringify(many));
    const train = await loadCoopHERows(file, paperSplits.coophe.train);
    const ev = await loadCoopHERows(file, paperSplits.coophe.eval);
    expect(ev.map((p) => p.task_id)).toEqual(Array.from({ length: 16 }, (_, i) => `Toy/${i}`));
    expect(train).toHaveLength(66);
    expect(train[0].task_id).toBe('Toy/16');
  });
});
