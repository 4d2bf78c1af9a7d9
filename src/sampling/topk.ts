/**
 * The k-th largest value of `values` (k ≥ 1, k ≤ length), in O(n log k) with a size-k min-heap, so
 * that top-k over a 151k vocabulary never sorts the whole row.
 */
export function kthLargest(values: ArrayLike<number>, k: number): number {
  const n = values.length;
  if (!Number.isInteger(k) || k < 1 || k > n) {
    throw new Error(`kthLargest: k must be an integer in [1, ${n}], got ${k}`);
  }
  const heap = new Float64Array(k);
  for (let i = 0; i < k; i++) heap[i] = values[i];
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(heap, i, k);
  for (let i = k; i < n; i++) {
    const v = values[i];
    // NaN never enters; it compares false.
    if (v > heap[0]) {
      heap[0] = v;
      siftDown(heap, 0, k);
    }
  }
  return heap[0];
}

function siftDown(heap: Float64Array, start: number, size: number): void {
  let i = start;
  const x = heap[i];
  for (;;) {
    const l = 2 * i + 1;
    if (l >= size) break;
    const r = l + 1;
    const c = r < size && heap[r] < heap[l] ? r : l;
    if (heap[c] >= x) break;
    heap[i] = heap[c];
    i = c;
  }
  heap[i] = x;
}
