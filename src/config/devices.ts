/**
 * CoMLRL's parallelism and device keys of a trainer section, checked as CoMLRL checks them and
 * against what comlrl runs today. CoMLRL's `parallel_training: mp` places each agent, critic and
 * reference on a device of its own and runs the agents at the same time; comlrl runs
 * `parallel_training: none` only, with every role on the run's one device (the torch backend's
 * device; `cpu` on wasm and tensorflow). So a CoMLRL config whose devices all name that device
 * trains as it would without them, and anything else is refused naming the key.
 *
 * Two stages: {@link parallelConfigIssues} when the config is parsed (what needs no agent count or
 * backend), {@link runDeviceIssues} once the backend is up and the agents are counted.
 */
import type { ConfigFileIssue } from './issues.js';
import { referencesNeeded, type TrainerRoles } from './roles.js';
import { PARALLEL_TRAINING_MODES, type DeviceSpec, type ParallelTraining, type TrainerSectionFields } from './section-fields.js';

export { PARALLEL_TRAINING_MODES, type DeviceSpec, type ParallelTraining };


/** A torch device name: `cpu`, `cuda` (device 0) or `cuda:N`. */
export const DEVICE_NAME = /^(cpu|cuda|cuda:\d+)$/;


/** What runs today, for every refusal. */
const RUNS_TODAY = 'what runs today is parallel_training: none with every role on one device (leave the device keys out, or give every role the run\'s device)';

/** `cuda` is device 0, as torch reads it. */
function canonical(device: string): string {
  return device === 'cuda' ? 'cuda:0' : device;
}

/** The entries of a spec with their keys (`agent_devices` for one device, `agent_devices[i]` in a list). */
function entries(key: string, spec: DeviceSpec): { key: string; device: string }[] {
  if (spec === null || spec === undefined) return [];
  if (typeof spec === 'string') return [{ key, device: spec }];
  return spec.map((device, i) => ({ key: `${key}[${i}]`, device }));
}

/** The device keys of a section that hold devices now: agents, critics (unless turned off), references (when loaded). */
function placedKeys(section: TrainerSectionFields, roles: TrainerRoles<TrainerSectionFields>): { key: 'agent_devices' | 'critic_devices' | 'reference_devices'; spec: DeviceSpec }[] {
  const out: { key: 'agent_devices' | 'critic_devices' | 'reference_devices'; spec: DeviceSpec }[] = [{ key: 'agent_devices', spec: section.agent_devices }];
  if (roles.critics?.placedByCriticDevices === true && roles.critics.off?.(section) === undefined) out.push({ key: 'critic_devices', spec: section.critic_devices });
  if (referencesNeeded(roles, section)) out.push({ key: 'reference_devices', spec: section.reference_devices });
  return out;
}

/** Whether a section places critic LMs with `critic_devices` and has some this run (any agent count). */
function hasCritics(section: TrainerSectionFields, roles: TrainerRoles<TrainerSectionFields>): boolean {
  const { critics } = roles;
  return critics?.placedByCriticDevices === true && critics.off?.(section) === undefined && critics.count(section, 1) > 0;
}

/**
 * The issues of `parallel_training: mp` in a parsed section, keyed by the bare field: CoMLRL's
 * rule that it needs `agent_devices` (and `critic_devices` when `withCritics`), then `mp` itself,
 * which comlrl does not run yet. None for `none` or an absent key. The library's config parsers
 * (`parseConfig`) refuse it too, so a trainer built in code never runs `none` in its place.
 */
export function parallelModeIssues(section: TrainerSectionFields, withCritics: boolean): ConfigFileIssue[] {
  if (section.parallel_training !== 'mp') return [];
  const issues: ConfigFileIssue[] = [];
  if (section.agent_devices === null || section.agent_devices === undefined) {
    issues.push({ key: 'agent_devices', message: 'parallel_training: mp requires agent_devices: a device per agent (or one for all), as in CoMLRL' });
  }
  if (withCritics && (section.critic_devices === null || section.critic_devices === undefined)) {
    issues.push({ key: 'critic_devices', message: 'parallel_training: mp requires critic_devices: a device per critic (or one for all), as in CoMLRL' });
  }
  issues.push({ key: 'parallel_training', message: `parallel_training: mp (each role on its own device, the agents at the same time) is not supported by comlrl; ${RUNS_TODAY}` });
  return issues;
}

/**
 * The device issues of a parsed section that need neither the agent count nor the backend, keyed
 * `<section>.<key>`: CoMLRL's rules (`mp` requires `agent_devices`, and `critic_devices` where
 * there are critics), `critic_devices` where the section trains no critic models (it would be
 * ignored), `mp` itself and devices that differ between roles (neither is built yet).
 */
export function parallelConfigIssues(sectionName: string, section: TrainerSectionFields, roles: TrainerRoles<TrainerSectionFields>): ConfigFileIssue[] {
  const at = (key: string): string => `${sectionName}.${key}`;
  const issues = parallelModeIssues(section, hasCritics(section, roles)).map((i) => ({ ...i, key: at(i.key) }));
  const off = roles.critics?.off?.(section);
  if (section.critic_devices !== null && section.critic_devices !== undefined && off !== undefined) {
    issues.push({ key: at('critic_devices'), message: `would be ignored: ${sectionName}.${off.field} ${off.means}, so there are no critic models to place; remove it` });
  }
  // Every placed device must be one device; the first that differs is named.
  let first: { key: string; device: string } | undefined;
  for (const { key, spec } of placedKeys(section, roles)) {
    for (const e of entries(key, spec)) {
      if (first === undefined) first = e;
      else if (canonical(e.device) !== canonical(first.device)) {
        issues.push({ key: at(e.key), message: `is ${e.device} but ${sectionName}.${first.key} is ${first.device}: roles on different devices are not supported by comlrl; ${RUNS_TODAY}` });
        return issues;
      }
    }
  }
  return issues;
}

/** The run's device, as the device keys are checked against it. */
export interface RunDevice {
  /** The backend's name (`torch`, `wasm`, `tensorflow`). */
  readonly backend: string;
  /** Where every model of the run lives: the torch backend's device (`cpu`, `cuda:N`); `cpu` otherwise. */
  readonly device: string;
  /** CUDA devices torch sees (0 off torch or without a GPU). */
  readonly cudaDevices: number;
}

/**
 * The device issues of a section once the backend is up and the run has `numAgents` agents,
 * keyed `<section>.<key>` or `<section>.<key>[i]`: a list's length must be 1 or the role's count
 * (as CoMLRL's `resolve_devices`); off torch, every device must be `cpu` (other names need the
 * torch backend); on torch a `cuda:N` must be a visible GPU; and every device must be the run's
 * one device.
 */
export function runDeviceIssues(sectionName: string, section: TrainerSectionFields, roles: TrainerRoles<TrainerSectionFields>, numAgents: number, run: RunDevice): ConfigFileIssue[] {
  const issues: ConfigFileIssue[] = [];
  const at = (key: string): string => `${sectionName}.${key}`;
  const { critics } = roles;
  const counts: Record<string, { n: number; what: string }> = {
    agent_devices: { n: numAgents, what: 'one per agent' },
    critic_devices: { n: critics?.count(section, numAgents) ?? 0, what: 'one per critic' },
    reference_devices: { n: numAgents, what: 'one per agent\'s reference' },
  };
  for (const { key, spec } of placedKeys(section, roles)) {
    if (Array.isArray(spec) && spec.length !== 1 && spec.length !== counts[key].n) {
      issues.push({ key: at(key), message: `has ${spec.length} entries; it needs 1 (for all) or ${counts[key].n} (${counts[key].what})` });
      continue;
    }
    for (const e of entries(key, spec)) {
      const device = canonical(e.device);
      if (run.backend !== 'torch') {
        if (device !== 'cpu') issues.push({ key: at(e.key), message: `is ${e.device}, but the ${run.backend} backend runs every model on its one device and takes no device name but cpu: devices per role need the torch backend (backend: torch); give cpu, or leave ${key} out` });
        continue;
      }
      const cuda = /^cuda:(\d+)$/.exec(device);
      if (cuda !== null && Number(cuda[1]) >= run.cudaDevices) {
        const seen = run.cudaDevices === 0 ? 'torch sees no CUDA device' : `torch sees ${run.cudaDevices} CUDA device${run.cudaDevices === 1 ? '' : 's'} (cuda:0${run.cudaDevices > 1 ? `..cuda:${run.cudaDevices - 1}` : ''})`;
        issues.push({ key: at(e.key), message: `is ${e.device}, GPU index ${cuda[1]}, but ${seen}; give a visible device` });
        continue;
      }
      if (device !== canonical(run.device)) {
        issues.push({ key: at(e.key), message: `is ${e.device}, but this run's models are on ${run.device} (the torch backend's device; COMLRL_TORCH_DEVICE picks it): roles on another device than the run's are not supported by comlrl; ${RUNS_TODAY}` });
      }
    }
  }
  return issues;
}
