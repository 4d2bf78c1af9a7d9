import { BACKEND_NAMES, type BackendName } from '../src/backend/index.js';

// The backend-sensitive test files run twice in `npm test`: on their own backends (wasm, cpu),
// then with COMLRL_TEST_BACKEND=tensorflow (vitest.tensorflow.config.ts), where every backend a
// file asks for becomes that one.

function override(): BackendName | null {
  const v = process.env.COMLRL_TEST_BACKEND;
  if (v === undefined || v === '') return null;
  if (!(BACKEND_NAMES as readonly string[]).includes(v)) throw new Error(`COMLRL_TEST_BACKEND: unknown backend '${v}'`);
  return v as BackendName;
}

/** The backend this test file runs on: COMLRL_TEST_BACKEND when set, else `fallback`. */
export function backendUnderTest(fallback: BackendName): BackendName {
  return override() ?? fallback;
}

/** The backends a test loops over: just COMLRL_TEST_BACKEND when set, else `defaults`. */
export function backendsUnderTest(defaults: readonly BackendName[]): BackendName[] {
  const o = override();
  return o === null ? [...defaults] : [o];
}
