/**
 * TensorBoard event files: CRC32C and its masking against published test vectors, the TFRecord
 * framing and the protobuf bytes of events against what TensorBoard's own Python writer produces
 * (the hex below came from `tensorboard` 2.21's RecordWriter and event_pb2), the writer's rows read
 * back by an independent reader, and resume: records past the resumed rows, a torn record and
 * extra event files are dropped so no step shows twice.
 */
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { configHash } from '../src/config/hash.js';
import { ConfigError, parseRunConfig, runConfigIdentity } from '../src/config/schema.js';
import type { MetricsRow } from '../src/logging/metrics.js';
import { EVENT_FILE_VERSION, encodeFileVersionEvent, encodeScalarEvent, scalarsOf, TensorBoardWriter } from '../src/logging/tensorboard.js';
import { crc32c, frameRecord, maskCrc, readRecords } from '../src/logging/tfrecord.js';
import { decodeEvent, maskedCrc32c, readEventDir, splitRecords } from './tensorboard-reader.js';

const ascii = (s: string) => new TextEncoder().encode(s);
const hex = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'comlrl-tb-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('CRC32C and TFRecord framing', () => {
  test('CRC32C matches the published check values', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
    // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of ones, ascending.
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
  });

  test('the mask rotates right by 15 and adds 0xa282ead8 (values from TensorBoard)', () => {
    expect(maskCrc(0)).toBe(0xa282ead8);
    expect(maskCrc(crc32c(ascii('123456789')))).toBe(0xc78ab0e5);
    expect(maskCrc(crc32c(new Uint8Array(32)))).toBe(0x0fd7fffa);
    // The test reader's bitwise CRC agrees.
    expect(maskedCrc32c(ascii('123456789'))).toBe(0xc78ab0e5);
  });

  test("a framed record is TensorBoard's RecordWriter's bytes: uint64 length, masked CRCs", () => {
    const event = encodeScalarEvent(1.5, 3, [{ tag: 'a', value: 0.5 }]);
    const framed = frameRecord(event);
    expect(toHex(framed)).toBe('1700000000000000e7cef81e09000000000000f83f10032a0a0a080a0161150000003fde5768cd');
    const view = new DataView(framed.buffer);
    expect(view.getBigUint64(0, true)).toBe(BigInt(event.length));
    expect(view.getUint32(8, true)).toBe(maskCrc(crc32c(framed.subarray(0, 8))));
    expect(view.getUint32(12 + event.length, true)).toBe(maskCrc(crc32c(event)));
    expect(framed.length).toBe(event.length + 16);
  });

  test('readRecords returns the sound prefix: a cut-short or corrupted record ends it', () => {
    const records = [ascii('first'), ascii(''), ascii('third record')].map(frameRecord);
    const all = Buffer.concat(records);
    expect(readRecords(all).map((r) => Buffer.from(r.data).toString())).toEqual(['first', '', 'third record']);
    expect(readRecords(all).map((r) => r.end)).toEqual([21, 37, 65]);
    // Cut inside the last record: the first two remain.
    expect(readRecords(all.subarray(0, all.length - 3)).length).toBe(2);
    // A flipped data byte fails the data CRC; a flipped length byte fails the length CRC.
    const badData = Buffer.from(all);
    badData[37 + 12] ^= 1;
    expect(readRecords(badData).length).toBe(2);
    const badLength = Buffer.from(all);
    badLength[21] ^= 1;
    expect(readRecords(badLength).length).toBe(1);
  });
});

describe('event protobufs', () => {
  test("scalar and file-version events are protobuf's own serialisation of Event", () => {
    expect(toHex(encodeScalarEvent(1.5, 3, [{ tag: 'a', value: 0.5 }]))).toBe('09000000000000f83f10032a0a0a080a0161150000003f');
    expect(toHex(encodeFileVersionEvent(1.5))).toBe('09000000000000f83f1a0d627261696e2e4576656e743a32');
    expect(
      toHex(
        encodeScalarEvent(1700000000.25, 300, [
          { tag: 'turn_1/reward_mean', value: -0.1 },
          { tag: 'x', value: Number.NaN },
        ]),
      ),
    ).toBe('0900001040fc54d94110ac022a250a190a127475726e5f312f7265776172645f6d65616e15cdccccbd0a080a0178150000c07f');
  });

  test('one scalar event decodes to its wall time, step, tags and float32 values', () => {
    const e = decodeEvent(encodeScalarEvent(1234.5, 2 ** 40 + 7, [{ tag: 'eval/turn_1/mean_reward', value: 0.1 }, { tag: 'lr', value: 3e-6 }, { tag: 'zero', value: 0 }]));
    expect(e).toEqual({
      wallTime: 1234.5,
      step: 2 ** 40 + 7,
      scalars: [
        { tag: 'eval/turn_1/mean_reward', value: Math.fround(0.1) },
        { tag: 'lr', value: Math.fround(3e-6) },
        { tag: 'zero', value: 0 },
      ],
    });
    expect(decodeEvent(encodeFileVersionEvent(99))).toEqual({ wallTime: 99, step: 0, fileVersion: EVENT_FILE_VERSION });
  });

  test('scalarsOf: numbers as they are, booleans 1/0, null NaN; strings and step left out', () => {
    expect(scalarsOf({ step: 4, a: 1.25, b: 'wasm', c: true, d: null, e: undefined, f: false })).toEqual([
      { tag: 'a', value: 1.25 },
      { tag: 'c', value: 1 },
      { tag: 'd', value: Number.NaN },
      { tag: 'f', value: 0 },
    ]);
  });

  test('a step that is not an integer is refused', () => {
    expect(() => encodeScalarEvent(1, 1.5, [])).toThrow('TensorBoard events need an integer step, got 1.5');
  });
});

/** Rows as metrics.jsonl holds them. */
function rows(n: number, offset = 0): MetricsRow[] {
  return Array.from({ length: n }, (_, i) => ({ step: 10 * (i + 1), 'turn_1/reward_mean': (i + offset) / 7, 'run/backend': 'wasm', 'perf/tokens_per_s': 100 + i + offset }));
}

/** A clock that ticks one second per call, from `start`. */
function ticking(start: number): () => number {
  let t = start;
  return () => t++;
}

describe('TensorBoardWriter', () => {
  test('writes a version event, then one event per row with its numeric values', () => {
    const dir = tempDir();
    const w = TensorBoardWriter.open(dir, { clock: ticking(1000) });
    expect(w.path).toMatch(/\/events\.out\.tfevents\.1000\.[^/]+$/);
    for (const r of rows(2)) w.writeRow(r);
    w.write(30, { 'eval/turn_1/mean_reward': 0.75 });
    const { events } = readEventDir(dir);
    expect(events).toEqual([
      { wallTime: 1001, step: 0, fileVersion: 'brain.Event:2' },
      { wallTime: 1002, step: 10, scalars: [{ tag: 'turn_1/reward_mean', value: 0 }, { tag: 'perf/tokens_per_s', value: 100 }] },
      { wallTime: 1003, step: 20, scalars: [{ tag: 'turn_1/reward_mean', value: Math.fround(1 / 7) }, { tag: 'perf/tokens_per_s', value: 101 }] },
      { wallTime: 1004, step: 30, scalars: [{ tag: 'eval/turn_1/mean_reward', value: 0.75 }] },
    ]);
  });

  test('resume: keeps the events of the kept rows, drops later ones and a torn record, writes what is missing', () => {
    const dir = tempDir();
    const first = TensorBoardWriter.open(dir, { rows: [], clock: ticking(1000) });
    for (const r of rows(5)) first.writeRow(r);
    // A kill -9 mid-write leaves half a record.
    appendFileSync(first.path, frameRecord(encodeScalarEvent(2000, 60, [{ tag: 'x', value: 1 }])).subarray(0, 9));
    expect(() => readEventDir(dir)).toThrow(/cut short/);

    // The checkpoint kept 3 rows; the resumed run logs its 4th row again (with other values).
    const kept = rows(3);
    const again = TensorBoardWriter.open(dir, { rows: kept, clock: ticking(5000) });
    expect(again.path).toBe(first.path);
    again.writeRow(rows(4, 100)[3]);
    const { events } = readEventDir(dir);
    expect(events.map((e) => [e.step, e.wallTime])).toEqual([
      [0, 1001],
      [10, 1002],
      [20, 1003],
      [30, 1004],
      [40, 5000],
    ]);
    expect(events[4].scalars).toEqual([{ tag: 'turn_1/reward_mean', value: Math.fround(103 / 7) }, { tag: 'perf/tokens_per_s', value: 203 }]);
  });

  test('resume: rows the event file lacks (a kill between the two writes, or TensorBoard turned on later) are written', () => {
    const dir = tempDir();
    const w = TensorBoardWriter.open(dir, { rows: [], clock: ticking(1000) });
    for (const r of rows(2)) w.writeRow(r);
    TensorBoardWriter.open(dir, { rows: rows(4), clock: ticking(5000) });
    expect(readEventDir(dir).events.map((e) => [e.step, e.wallTime])).toEqual([
      [0, 1001],
      [10, 1002],
      [20, 1003],
      [30, 5000],
      [40, 5001],
    ]);
    // A row whose values differ from its event is written again, and all after it.
    const changed = rows(4);
    changed[1] = { ...changed[1], 'turn_1/reward_mean': -1 };
    TensorBoardWriter.open(dir, { rows: changed, clock: ticking(7000) });
    const events = readEventDir(dir).events;
    expect(events.map((e) => [e.step, e.wallTime])).toEqual([
      [0, 1001],
      [10, 1002],
      [20, 7000],
      [30, 7001],
      [40, 7002],
    ]);
    expect(events[2].scalars?.[0]).toEqual({ tag: 'turn_1/reward_mean', value: -1 });
  });

  test('a run started over (rows: []) keeps only the version event; extra event files and foreign files are replaced', () => {
    const dir = tempDir();
    const w = TensorBoardWriter.open(dir, { clock: ticking(1000) });
    for (const r of rows(3)) w.writeRow(r);
    const extra = TensorBoardWriter.open(dir, { clock: ticking(1000) });
    expect(extra.path).toBe(`${w.path}.1`);
    expect(readdirSync(dir).length).toBe(2);
    TensorBoardWriter.open(dir, { rows: [], clock: ticking(3000) });
    expect(readdirSync(dir)).toEqual([w.path.split('/').pop()]);
    expect(readEventDir(dir).events).toEqual([{ wallTime: 1001, step: 0, fileVersion: 'brain.Event:2' }]);

    // A file that does not begin with this writer's version event is begun again.
    writeFileSync(w.path, Buffer.concat([frameRecord(ascii('not an event')), frameRecord(encodeScalarEvent(1, 1, []))]));
    TensorBoardWriter.open(dir, { rows: rows(1), clock: ticking(4000) });
    expect(readEventDir(dir).events.map((e) => [e.step, e.wallTime, e.fileVersion])).toEqual([
      [0, 4000, 'brain.Event:2'],
      [10, 4001, undefined],
    ]);
  });

  test('every byte on disk is sound TFRecord framing', () => {
    const dir = tempDir();
    const w = TensorBoardWriter.open(dir, { rows: rows(3), clock: ticking(1) });
    const records = splitRecords(readFileSync(w.path));
    expect(records.length).toBe(4);
    expect(existsSync(w.path)).toBe(true);
  });
});

describe('the logging section', () => {
  const parse = (doc: unknown) => parseRunConfig(doc, TRAINER_CONFIG_SCHEMAS, 'test.yaml');
  const base = { model: { agent_model: '/m/a' }, dataset: { task: 'toy-coord' }, magrpo: { num_turns: 1 } };

  test('logging.tensorboard defaults to false; a bad value or key is named', () => {
    expect(parse(base).logging).toEqual({ tensorboard: false });
    expect(parse({ ...base, logging: { tensorboard: true } }).logging.tensorboard).toBe(true);
    const messages = (doc: unknown): string[] => {
      try {
        parse(doc);
        return [];
      } catch (err) {
        return (err as ConfigError).issues.map((i) => `${i.key}: ${i.message}`);
      }
    };
    expect(messages({ ...base, logging: { tensorboard: 'yes' } })).toEqual([expect.stringMatching(/^logging\.tensorboard: /)]);
    expect(messages({ ...base, logging: { wandb: true } })).toEqual([expect.stringMatching(/^logging\.wandb: unknown key \(allowed here: tensorboard\)/)]);
  });

  test('it is not part of the config hash: a run resumes with TensorBoard turned on or off', () => {
    const off = parse(base);
    const on = parse({ ...base, logging: { tensorboard: true } });
    expect(configHash(runConfigIdentity(on))).toBe(configHash(runConfigIdentity(off)));
    expect(runConfigIdentity(on)).not.toHaveProperty('logging');
  });
});
