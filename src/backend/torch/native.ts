import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { backendHome, setupHint } from '../setup-home.js';

/**
 * The compiled addon (native/torch/comlrl_torch.cc): a table of `at::Tensor` handles and a few
 * generic entry points. Tensors are plain numbers (handles) on this side.
 */
export interface TorchAddon {
  /** Index of the ATen operator `name.overload` (e.g. `aten::add`, `Tensor`); throws when torch lacks it. */
  resolve(name: string, overload: string): number;
  /** Calls a resolved operator; arguments are converted by its schema, missing trailing ones take defaults. */
  call(op: number, args: readonly TorchArg[]): TorchResult;
  /** A new tensor on `device` holding a copy of the values (float32, int32 or bool by array type). */
  upload(values: Float32Array | Int32Array | Uint8Array, shape: readonly number[], device: string): number;
  /** The values on the host: floats as Float32Array, integers as Int32Array, bool as Uint8Array. */
  download(handle: number): Float32Array | Int32Array | Uint8Array;
  free(handle: number): void;
  /** [torch scalar type code, device, ...shape] */
  meta(handle: number): [number, string, ...number[]];
  runtime(command: TorchRuntimeCommand, value: number): number | string;
  /**
   * RMSNorm of float32 CPU tensors in one pass: [y, rstd], rstd = 1/sqrt(mean(x²) + eps) per row
   * (x's shape with a last axis of 1). Absent from an addon built from older source.
   */
  rmsNorm?(x: number, weight: number, eps: number): [number, number];
  /** ∂x (or ∂weight when `wrtWeight`) of {@link TorchAddon.rmsNorm} given dy and the forward's rstd. */
  rmsNormGrad?(dy: number, x: number, weight: number, rstd: number, wrtWeight: boolean): number;
}

/** A tensor handle, int (bigint), float, bool, string, list or null (None), as the schema wants. */
export type TorchArg = number | bigint | boolean | string | null | undefined | readonly TorchArg[];
export type TorchResult = number | boolean | null | TorchResult[];

export type TorchRuntimeCommand =
  | 'version'
  | 'live'
  | 'cuda_devices'
  | 'get_threads'
  | 'set_threads'
  | 'seed'
  | 'tf32'
  | 'deterministic'
  | 'sync'
  | 'allocated'
  | 'peak'
  | 'reserved'
  | 'reset_peak'
  | 'empty_cache'
  | 'device_memory';

/** What `npx comlrl setup torch` records in <backend home>/build/setup.json (written last). */
export interface TorchSetupManifest {
  backend: 'torch';
  torch: { version: string; cuda: string | null; dir: string; source: 'pip' | 'python' };
  addon: string;
  node: { modules: string };
}

/** The folder `npx comlrl setup torch` builds into (it may not exist; see setup-home.ts for where). */
export function torchSetupDir(): string | null {
  const home = backendHome('torch');
  return home === null ? null : path.join(home.base, 'build');
}

/** The addon file to load: `COMLRL_TORCH_ADDON`, else the setup build's, else null. */
export function torchAddonPath(): string | null {
  const env = process.env.COMLRL_TORCH_ADDON;
  if (env !== undefined && env !== '') return path.resolve(env);
  const dir = torchSetupDir();
  const m = readManifest();
  if (dir === null || m === null || m.backend !== 'torch' || typeof m.addon !== 'string') return null;
  const file = path.join(dir, m.addon);
  return fs.existsSync(file) ? file : null;
}

/** Whether the `torch` backend is set up (`npx comlrl setup torch`, or COMLRL_TORCH_ADDON). */
export function torchInstalled(): boolean {
  return torchAddonPath() !== null;
}

function readManifest(): Partial<TorchSetupManifest> | null {
  const dir = torchSetupDir();
  if (dir === null) return null;
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, 'setup.json'), 'utf8')) as Partial<TorchSetupManifest>;
  } catch {
    return null;
  }
}

/**
 * Whether the torch that is set up was built with CUDA and sees a GPU now. Loads the addon only
 * when the setup recorded a CUDA build (or COMLRL_TORCH_ADDON names an addon of unknown build).
 */
export function torchSetupHasCuda(): boolean {
  if (!torchInstalled()) return false;
  const fromEnv = process.env.COMLRL_TORCH_ADDON !== undefined && process.env.COMLRL_TORCH_ADDON !== '';
  if (!fromEnv && (readManifest()?.torch?.cuda ?? null) === null) return false;
  try {
    return Number(loadTorchAddon().runtime('cuda_devices', 0)) > 0;
  } catch {
    return false;
  }
}

let loaded: TorchAddon | null = null;

/** Loads the addon once; a missing or broken build is an error that says how to (re)build it. */
export function loadTorchAddon(): TorchAddon {
  if (loaded !== null) return loaded;
  const file = torchAddonPath();
  if (file === null) {
    throw new Error(`backend 'torch' is not set up: run \`${setupHint('torch')}\` (uses your PyTorch, or installs the CPU wheel with pip, and compiles a small addon against it)`);
  }
  try {
    loaded = createRequire(import.meta.url)(file) as TorchAddon;
  } catch (err) {
    const cause = err instanceof Error ? err.message : String(err);
    throw new Error(`backend 'torch': the addon ${file} failed to load (${cause}); rebuild it with \`${setupHint('torch', '--force')}\``);
  }
  return loaded;
}
