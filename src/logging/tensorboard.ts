/**
 * TensorBoard event files, written without TensorFlow: TFRecord-framed protobuf `Event` messages
 * (tensorflow/core/util/event.proto), the first carrying the file version, each later one a
 * `Summary` of scalar values (`simple_value`) at a step. Only the handful of protobuf fields these
 * need are encoded here, by hand.
 *
 * Resume: given the rows the run's metrics log holds (a resumed run's, cut back to its checkpoint),
 * {@link TensorBoardWriter.open} keeps the event file's records that match those rows one for one,
 * truncates the rest (what the run logged after its checkpoint, or a record cut short by a kill)
 * and writes the rows it lacks, so TensorBoard never shows a step twice.
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { MetricsRow, MetricValue } from './metrics.js';
import { frameRecord, readRecords } from './tfrecord.js';

/** The version string of the first event of every file TensorBoard writes today. */
export const EVENT_FILE_VERSION = 'brain.Event:2';

/** The prefix TensorBoard looks for in event file names. */
export const EVENT_FILE_PREFIX = 'events.out.tfevents.';

// Protobuf wire types.
const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;

/** A growable byte buffer with the protobuf encodings the event messages use. */
class ProtoWriter {
  private bytes: number[] = [];

  private key(field: number, wire: number): void {
    this.varint(BigInt((field << 3) | wire));
  }

  private varint(v: bigint): void {
    let x = BigInt.asUintN(64, v);
    while (x >= 0x80n) {
      this.bytes.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.bytes.push(Number(x));
  }

  /** A double field; 0 is left out, as proto3 encoders do. */
  double(field: number, v: number): this {
    if (v === 0) return this;
    this.key(field, FIXED64);
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.bytes.push(...b);
    return this;
  }

  /** A float field, always written (`simple_value` is a oneof member: its presence counts). */
  float(field: number, v: number): this {
    this.key(field, FIXED32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.bytes.push(...b);
    return this;
  }

  /** An int64 field; 0 is left out, as proto3 encoders do. */
  int64(field: number, v: number): this {
    if (v === 0) return this;
    this.key(field, VARINT);
    this.varint(BigInt(v));
    return this;
  }

  bytesField(field: number, v: Uint8Array): this {
    this.key(field, LENGTH_DELIMITED);
    this.varint(BigInt(v.length));
    this.bytes.push(...v);
    return this;
  }

  string(field: number, v: string): this {
    return this.bytesField(field, new TextEncoder().encode(v));
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

// Field numbers: Event (event.proto), Summary and Summary.Value (summary.proto).
const EVENT_WALL_TIME = 1;
const EVENT_STEP = 2;
const EVENT_FILE_VERSION_FIELD = 3;
const EVENT_SUMMARY = 5;
const SUMMARY_VALUE = 1;
const VALUE_TAG = 1;
const VALUE_SIMPLE_VALUE = 2;

/** One scalar of an event: its tag and value (stored as float32, as TensorBoard's `simple_value` is). */
export interface TensorBoardScalar {
  readonly tag: string;
  readonly value: number;
}

function checkStep(step: number): void {
  if (!Number.isSafeInteger(step)) throw new Error(`TensorBoard events need an integer step, got ${step}`);
}

/** The protobuf bytes of the first `Event` of a file: `wall_time` and `file_version` (step 0). */
export function encodeFileVersionEvent(wallTime: number, version: string = EVENT_FILE_VERSION): Uint8Array {
  return new ProtoWriter().double(EVENT_WALL_TIME, wallTime).string(EVENT_FILE_VERSION_FIELD, version).finish();
}

/** The protobuf bytes of an `Event` at `step` whose summary holds `scalars` (`tag`, `simple_value`). */
export function encodeScalarEvent(wallTime: number, step: number, scalars: readonly TensorBoardScalar[]): Uint8Array {
  checkStep(step);
  const summary = new ProtoWriter();
  for (const { tag, value } of scalars) summary.bytesField(SUMMARY_VALUE, new ProtoWriter().string(VALUE_TAG, tag).float(VALUE_SIMPLE_VALUE, value).finish());
  return new ProtoWriter().double(EVENT_WALL_TIME, wallTime).int64(EVENT_STEP, step).bytesField(EVENT_SUMMARY, summary.finish()).finish();
}

/**
 * The scalars of a metrics row, in its order: numbers as they are, booleans as 1/0, null as NaN
 * (metrics.jsonl writes a non-finite value as null); strings (and `step`, `undefined`) are left out.
 */
export function scalarsOf(metrics: Readonly<Record<string, MetricValue | undefined>>): TensorBoardScalar[] {
  const out: TensorBoardScalar[] = [];
  for (const [tag, v] of Object.entries(metrics)) {
    if (tag === 'step' || v === undefined || typeof v === 'string') continue;
    out.push({ tag, value: v === null ? Number.NaN : typeof v === 'boolean' ? Number(v) : v });
  }
  return out;
}

/** The `wall_time` of an event encoded by this module: its first field, or 0 when left out. */
function wallTimeOf(event: Uint8Array): number {
  if (event.length < 9 || event[0] !== ((EVENT_WALL_TIME << 3) | FIXED64)) return 0;
  return new DataView(event.buffer, event.byteOffset + 1, 8).getFloat64(0, true);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Whether `event` is `row` as this module encodes it (at the event's own wall time). */
function eventIsRow(event: Uint8Array, row: MetricsRow): boolean {
  return Number.isSafeInteger(row.step) && sameBytes(event, encodeScalarEvent(wallTimeOf(event), row.step, scalarsOf(row)));
}

/** Options of {@link TensorBoardWriter.open}. */
export interface TensorBoardWriterOptions {
  /**
   * The rows the event file is to hold, in order: the metrics log of the run as it stands (a resumed
   * run's cut back to its checkpoint; none for a new run). The directory's event file keeps the
   * records that match them, loses the rest and gets the missing rows written (at the current wall
   * time); any other event file in the directory is removed. Not given: a new event file is started
   * beside whatever the directory holds.
   */
  readonly rows?: readonly MetricsRow[];
  /** Wall time in seconds since the epoch (default: the system clock). */
  readonly clock?: () => number;
}

/**
 * Writes TensorBoard scalars into `<dir>/events.out.tfevents.<time>.<host>`, one event per call,
 * appended synchronously (like the JSONL metrics) so what a run logged survives a crash. Point
 * `tensorboard --logdir` at the directory or a parent of it.
 */
export class TensorBoardWriter {
  /** The event file written to. */
  readonly path: string;
  private readonly clock: () => number;

  private constructor(path: string, clock: () => number) {
    this.path = path;
    this.clock = clock;
  }

  /** Opens (creating `dir`) an event file for appending; see {@link TensorBoardWriterOptions.rows} for resume. */
  static open(dir: string, options: TensorBoardWriterOptions = {}): TensorBoardWriter {
    const clock = options.clock ?? (() => Date.now() / 1000);
    mkdirSync(dir, { recursive: true });
    const existing = readdirSync(dir)
      .filter((f) => f.startsWith(EVENT_FILE_PREFIX))
      .sort();
    const rows = options.rows;
    if (rows === undefined || existing.length === 0) {
      const writer = new TensorBoardWriter(newEventFile(dir, clock()), clock);
      writeFileSync(writer.path, frameRecord(encodeFileVersionEvent(clock())));
      for (const row of rows ?? []) writer.writeRow(row);
      return writer;
    }
    // One event file per run: older sessions' extra files would show their steps twice.
    for (const extra of existing.slice(1)) rmSync(join(dir, extra), { force: true });
    const writer = new TensorBoardWriter(join(dir, existing[0]), clock);
    writer.reconcile(rows);
    return writer;
  }

  /** Appends one event: the scalars of `metrics` (see {@link scalarsOf}) at `step`. */
  write(step: number, metrics: Readonly<Record<string, MetricValue | undefined>>): void {
    appendFileSync(this.path, frameRecord(encodeScalarEvent(this.clock(), step, scalarsOf(metrics))));
  }

  /** Appends a metrics row (`{ step, ...metrics }`) as one event. */
  writeRow(row: MetricsRow): void {
    this.write(row.step, row);
  }

  /** Keeps the file's events that match `rows` one for one, drops what follows, writes the rest. */
  private reconcile(rows: readonly MetricsRow[]): void {
    const records = readRecords(readFileSync(this.path));
    let kept = 0;
    const header = records[0];
    if (header === undefined || !sameBytes(header.data, encodeFileVersionEvent(wallTimeOf(header.data)))) {
      // Not a file this writer began (or its first record was cut short): start it over.
      writeFileSync(this.path, frameRecord(encodeFileVersionEvent(this.clock())));
    } else {
      while (kept < rows.length && kept + 1 < records.length && eventIsRow(records[kept + 1].data, rows[kept])) kept++;
      truncateSync(this.path, records[kept].end);
    }
    for (const row of rows.slice(kept)) this.writeRow(row);
  }
}

/** A fresh event file name in `dir`: `events.out.tfevents.<seconds>.<host>`, suffixed if taken. */
function newEventFile(dir: string, wallTime: number): string {
  const base = join(dir, `${EVENT_FILE_PREFIX}${Math.floor(wallTime)}.${hostname() || 'localhost'}`);
  let path = base;
  for (let n = 1; existsSync(path); n++) path = `${base}.${n}`;
  return path;
}
