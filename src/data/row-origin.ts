/**
 * Where a loaded dataset row came from (file, split, row number), kept beside the row object, so
 * that a problem found long after loading (a prompt too long for the model's context, met at
 * rollout) can still name the row as a data error does. Rows are the objects `loadRows` returns;
 * items built in code have no origin.
 */
import { describeLocation, type DatasetErrorLocation } from './errors.js';

const origins = new WeakMap<object, DatasetErrorLocation>();

/** Records that `row` (an object) was read at `location`. */
export function recordRowOrigin(row: unknown, location: DatasetErrorLocation): void {
  if (row !== null && typeof row === 'object') origins.set(row, location);
}

/** Where `item` was read, when it is a row `loadRows` returned. */
export function rowOriginOf(item: unknown): DatasetErrorLocation | undefined {
  return item !== null && typeof item === 'object' ? origins.get(item) : undefined;
}

/**
 * `item` in words for messages: `train item 3 (data.jsonl, split 'train', row 12)`, with only
 * the kind and index for an item built in code. `index` is 0-based within the split's selection.
 */
export function describeItem(kind: 'train' | 'eval', index: number, item: unknown): string {
  const origin = rowOriginOf(item);
  return `${kind} item ${index}${origin !== undefined ? ` (${describeLocation(origin)})` : ''}`;
}
