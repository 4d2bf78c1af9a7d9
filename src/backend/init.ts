import * as tf from '@tensorflow/tfjs';
import { installWasmKernelFixes } from './wasm-kernels.js';
import { loadTensorflowPackage, quietTensorflowLogs, tensorflowInstalled } from './tensorflow.js';
import { describeTorch, registerTorchBackend, torchInstalled, torchSetupHasCuda } from './torch/index.js';
import { setupHint } from './setup-home.js';

/** Tensor backends comlrl can run on. */
export type BackendName = 'wasm' | 'cpu' | 'tensorflow' | 'tensorflow-gpu' | 'torch' | 'webgpu';

export const BACKEND_NAMES: readonly BackendName[] = ['wasm', 'cpu', 'tensorflow', 'tensorflow-gpu', 'torch', 'webgpu'];

/** A backend to ask for: a {@link BackendName}, or `auto` (see {@link autoBackend}). */
export type BackendChoice = 'auto' | BackendName;

export const BACKEND_CHOICES: readonly BackendChoice[] = ['auto', ...BACKEND_NAMES];

/** Receives the one-line notice naming the chosen backend; `null` silences it. */
export type BackendLogger = ((line: string) => void) | null;

let logger: BackendLogger = (line) => console.error(line);
let active: BackendName | null = null;
const announced = new Set<BackendName>();

/** Replaces (or with `null` silences) the line logged when a backend is chosen. */
export function setBackendLogger(next: BackendLogger): void {
  logger = next;
}

/** The backend chosen by the last successful {@link initBackend}, or null before any. */
export function activeBackend(): BackendName | null {
  return active;
}

function parseBackendChoice(value: string, source: string): BackendChoice {
  if ((BACKEND_CHOICES as readonly string[]).includes(value)) return value as BackendChoice;
  throw new Error(`${source}: unknown backend '${value}'; expected one of ${BACKEND_CHOICES.join(', ')}`);
}

// Module names are held in variables so TypeScript does not resolve these optional packages.
async function importOptional(pkg: string, why: string, version = '4.22.0'): Promise<unknown> {
  try {
    return await import(pkg);
  } catch (err) {
    const cause = err instanceof Error ? err.message : String(err);
    throw new Error(`backend ${why} needs the optional package ${pkg}: run \`npm i ${pkg}@${version}\` (${cause})`);
  }
}

async function registerBackend(name: BackendName): Promise<string> {
  switch (name) {
    case 'wasm':
      await import('@tensorflow/tfjs-backend-wasm');
      installWasmKernelFixes();
      return 'wasm';
    case 'cpu':
      return 'cpu';
    case 'tensorflow':
      quietTensorflowLogs();
      await loadTensorflowPackage();
      return 'tensorflow';
    case 'torch':
      registerTorchBackend();
      return 'torch';
    case 'tensorflow-gpu':
      quietTensorflowLogs();
      // tfjs-node-gpu registers itself under the same kernel-backend name as tfjs-node.
      await importOptional('@tensorflow/tfjs-node-gpu', "'tensorflow-gpu'");
      return 'tensorflow';
    case 'webgpu': {
      // Experimental: Node has no navigator.gpu, so Dawn (the `webgpu` package) provides one.
      const dawn = (await importOptional('webgpu', "'webgpu' (experimental)", '0.6.2')) as {
        create?: (flags: string[]) => unknown;
        globals?: Record<string, unknown>;
      };
      if (typeof dawn.create !== 'function') throw new Error("backend 'webgpu': the `webgpu` package has no create()");
      if (dawn.globals) Object.assign(globalThis, dawn.globals);
      const g = globalThis as { navigator?: { gpu?: unknown } };
      if (!g.navigator) {
        Object.defineProperty(globalThis, 'navigator', { value: { gpu: dawn.create([]) }, configurable: true, writable: true });
      } else if (!g.navigator.gpu) {
        // Node >= 21 has a navigator without gpu: add the property, keep the rest.
        Object.defineProperty(g.navigator, 'gpu', { value: dawn.create([]), configurable: true });
      }
      await importOptional('@tensorflow/tfjs-backend-webgpu', "'webgpu' (experimental)");
      return 'webgpu';
    }
  }
}

/**
 * What `auto` picks, and why: torch on a CUDA GPU when it is set up with one; on CPU torch when set
 * up, then tensorflow; else wasm. torch trains faster than tensorflow on CPU at both sizes the bench
 * measures (docs/benchmarks.md; same day, same machine): the 4 M bench model's forward+backward
 * 206 ms against 451, and a 1.7 B LoRA CoopHE CoLLM-CC item 623 s against 755.
 */
export function autoBackend(): { name: BackendName; why: string } {
  if (torchInstalled() && torchSetupHasCuda()) return { name: 'torch', why: 'torch is set up with CUDA' };
  if (torchInstalled()) return { name: 'torch', why: tensorflowInstalled() ? 'torch trains faster than tensorflow on CPU' : 'torch is installed' };
  if (tensorflowInstalled()) return { name: 'tensorflow', why: 'tensorflow is installed' };
  return { name: 'wasm', why: `no native backend is set up; ${setupHint('tensorflow')} or ${setupHint('torch')} adds one` };
}

/**
 * Selects and initialises the tensor backend. Choice: `name`, else env `COMLRL_BACKEND`, else
 * `auto` ({@link autoBackend}: torch on a CUDA GPU, else torch or tensorflow when set up, else
 * wasm). The optional native backends are loaded only when asked for; a missing one is an error
 * naming how to set it up. Logs `[comlrl] backend: <name> (<details>)` once per chosen backend.
 */
export async function initBackend(name?: BackendChoice): Promise<BackendName> {
  const env = process.env.COMLRL_BACKEND;
  const choice: BackendChoice =
    name !== undefined
      ? parseBackendChoice(name, 'initBackend')
      : env !== undefined && env !== ''
        ? parseBackendChoice(env, 'COMLRL_BACKEND')
        : 'auto';
  const auto = choice === 'auto' ? autoBackend() : null;
  const wanted: BackendName = auto !== null ? auto.name : (choice as BackendName);
  // tfjs's own console nags ("install the node backend", ...) are noise for library users.
  tf.env().set('PROD', true);
  const kernelName = await registerBackend(wanted);
  if (active === wanted && tf.getBackend() === kernelName) return wanted;
  // setBackend's boolean is the truth: getBackend() can name a backend whose init failed.
  const ok = await tf.setBackend(kernelName);
  if (!ok) {
    const hint = wanted === 'webgpu' ? ' (no WebGPU adapter: needs a Vulkan/Metal/D3D12-capable driver)' : '';
    throw new Error(`backend '${wanted}' failed to initialise${hint}`);
  }
  await tf.ready();
  active = wanted;
  if (!announced.has(wanted)) {
    announced.add(wanted);
    const notes = [wanted === 'webgpu' ? 'experimental' : null, wanted === 'torch' ? describeTorch() : null, auto !== null ? `auto: ${auto.why}` : null].filter((x) => x !== null);
    logger?.(`[comlrl] backend: ${wanted}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`);
  }
  return wanted;
}
