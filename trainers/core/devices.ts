/**
 * CoMLRL's parallelism and device keys of a trainer section (`parallel_training`, `agent_devices`,
 * `critic_devices`; `reference_devices` is with the reference KL's fields), spread into the
 * schemas. The schema checks each value's form (a torch device: `cpu`, `cuda`, `cuda:N`); what
 * depends on the rest of the config, the number of agents or the backend is checked where that is
 * known (src/config/devices.ts). Absent, they leave the config (and its hash) as it was.
 */
import { z } from 'zod';
import { DEVICE_NAME, PARALLEL_TRAINING_MODES } from '../../src/config/devices.js';

/** CoMLRL's spellings of `parallel_training: none` (its None and "null"), read case-insensitively. */
function normalizeMode(v: unknown): unknown {
  if (v === null) return 'none';
  if (typeof v !== 'string') return v;
  const mode = v.trim().toLowerCase();
  return mode === 'null' ? 'none' : mode;
}

/** A torch device name, refused with the key named. */
function deviceName(key: string) {
  return z.string({ error: `${key} must be a torch device: cpu, cuda or cuda:N` }).regex(DEVICE_NAME, { error: `${key} must be a torch device: cpu, cuda or cuda:N` });
}

/**
 * A device spec as CoMLRL reads it: one device for every model of the role, or a list (one per
 * model, or one for all); null or absent: the run's device.
 */
export function deviceSpecField(key: string) {
  return z
    .union([deviceName(key), z.array(deviceName(`each entry of ${key}`), { error: `${key} must be a device or a list of devices` }).min(1, { error: `${key} must not be an empty list: give one device per model, one for all, or leave it out` })], {
      error: `${key} must be a torch device (cpu, cuda, cuda:N), a list of them, or null`,
    })
    .nullable();
}

/** `parallel_training` and `agent_devices`: every trainer section has them (CoMLRL's MAGRPO family, MADPO, MARLHF, IAC, MAAC). */
export function parallelTrainingFields() {
  return {
    /**
     * CoMLRL's parallel mode. none (also CoMLRL's null): every model on the run's one device, the
     * agents one after the other. mp (each agent, critic and reference on a device of its own,
     * agents at the same time; requires the device keys) is refused: comlrl does not run it yet.
     */
    parallel_training: z.preprocess(normalizeMode, z.enum(PARALLEL_TRAINING_MODES, { error: "parallel_training must be 'none' or 'mp' (CoMLRL's modes; its null means none)" })).optional(),
    /**
     * CoMLRL's devices of the agents: a torch device (cpu, cuda, cuda:N) for all, or a list with
     * one per agent. Today every device must be the run's one device (the torch backend's; cpu on
     * wasm and tensorflow); absent: that device.
     */
    agent_devices: deviceSpecField('agent_devices').optional(),
  };
}

/** `critic_devices`: the actor-critic sections (CoMLRL's IAC and MAAC). */
export function criticDevicesFields() {
  return {
    /**
     * CoMLRL's devices of the critic LMs: a torch device for all, or one per critic. Today every
     * device must be the run's one device; absent: that device.
     */
    critic_devices: deviceSpecField('critic_devices').optional(),
  };
}
