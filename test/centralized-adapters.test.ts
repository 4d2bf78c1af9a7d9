/**
 * The CoopHE and HouseBuild centralized adapters (CentralizedMAGRPO): the joint prompt carries both
 * roles' own prompts and the output format; joint completions split into the roles' responses on
 * hand cases, malformed ones as CoMLRL's adapters handle them (CoopHE: its lenient readers and
 * partial snippets; HouseBuild: CoMLRL's indexed tags, a missing section empty, none at all no
 * parse); and a joint completion stepped through the task's environment is scored as the split
 * responses are.
 */
import { describe, expect, test } from 'vitest';
import { coopHECentralizedAdapter, coopHEMainSignature, parseCoopHECompletion } from '../envs/coophe/centralized.js';
import { CoopHEEnv } from '../envs/coophe/index.js';
import { houseBuildCentralizedAdapter } from '../envs/housebuild/centralized.js';
import { HouseBuildEnv } from '../envs/housebuild/index.js';
import type { HouseBuildTask } from '../src/data/schemas.js';
import { loadHouseBuildTasks } from '../src/data/tasks.js';
import type { CoMLRLState } from '../src/decpomdp/comlrl-adapter.js';
import { CENTRALIZED_ROLES_KEY, CentralizedEnv, parseIndexedRoleSections, splitJointCompletion } from '../src/decpomdp/centralized.js';

const ROW = { task_id: 'Toy/0', prompt: 'def add(a, b):\n    """Return a + b."""\n', test: 'def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 5) == 7\n', entry_point: 'add' };
const AUX = 'def aux(a, b):\n    return a + b';
const MAIN = 'def add(a, b):\n    s = aux(a, b)\n    t = s * 1\n    return t';

describe('CoopHE', () => {
  test('the joint prompt: both agents\' prompts, the tags and the entry point\'s signature from the problem', () => {
    const env = new CoopHEEnv({ numTurns: 1 });
    const joint = new CentralizedEnv(env, coopHECentralizedAdapter);
    const state = joint.initialState(ROW);
    const prompt = joint.observe(state, 0);
    expect(prompt).toContain(env.observe(state, 0));
    expect(prompt).toContain(env.observe(state, 1));
    expect(prompt.indexOf(env.observe(state, 0))).toBeLessThan(prompt.indexOf(env.observe(state, 1)));
    expect(prompt).toMatch(/<auxiliary>\ndef aux\(\.\.\.\):[\s\S]*<\/auxiliary>\n\n<main>\ndef add\(a, b\):[\s\S]*<\/main>$/);
    expect(coopHEMainSignature({ prompt: 'def f(x,  y = 2 ):\n', entry_point: 'f' })).toBe('def f(x,  y = 2)');
    expect(coopHEMainSignature({ prompt: 'no def here', entry_point: 'g' })).toBe('def g(...)');
  });

  test.each([
    ['tags', `<auxiliary>\n${AUX}\n</auxiliary>\n<main>\n${MAIN}\n</main>`],
    ['tags in any case and order, spaces inside the brackets', `< MAIN >${MAIN}</main>\ntext\n<Auxiliary>\n${AUX}\n< / auxiliary >`],
    ['a fenced snippet inside its tags is unwrapped', `<auxiliary>\n\`\`\`python\n${AUX}\n\`\`\`\n</auxiliary>\n<main>${MAIN}</main>`],
    ['headings', `Auxiliary code:\n${AUX}\n\n## Main:\n${MAIN}\n`],
    ['headings, main first', `Main output:\n${MAIN}\nAux:\n${AUX}`],
    ['a JSON object in a json fence', `\`\`\`json\n${JSON.stringify({ aux: AUX, main: MAIN })}\n\`\`\``],
    ['a JSON object inside prose', `Here: ${JSON.stringify({ auxiliary: AUX, main: MAIN })} done`],
    ['two fenced code blocks', `First:\n\`\`\`python\n${AUX}\n\`\`\`\nthen\n\`\`\`\n${MAIN}\n\`\`\`\n`],
    ['the functions themselves, each up to the next top-level def', `${AUX}\n\n${MAIN}`],
  ])('a joint completion split into aux and main: %s', (_case, completion) => {
    expect(coopHECentralizedAdapter.parseCompletion(completion, new CoopHEEnv({ numTurns: 1 }).initialState(ROW), 2)).toEqual([AUX, MAIN]);
  });

  test('bare functions: the entry point by name, else the first other def; a section label ends a function', () => {
    expect(parseCoopHECompletion(`def helper(x):\n    return x\n${AUX}\nmain:\n${MAIN}`, 'add')).toEqual([AUX, MAIN]);
    expect(parseCoopHECompletion(`${AUX}\n\ndef solve(a, b):\n    return aux(a, b)`, 'add')).toEqual([AUX, 'def solve(a, b):\n    return aux(a, b)']);
  });

  test('malformed: one snippet found gives the other role nothing; nothing found does not parse (both roles empty)', () => {
    // Only the main tag, with no def aux anywhere: aux is ''.
    expect(parseCoopHECompletion(`<main>${MAIN}</main>`, 'add')).toEqual(['', MAIN]);
    // An unclosed tag is no tag; the aux function is still read from the text.
    expect(parseCoopHECompletion(`<auxiliary>\n${AUX}\n`, 'add')).toEqual([AUX, '']);
    // The first reader's partial snippet wins over a later reader's (the tag, not the bare function).
    expect(parseCoopHECompletion(`<auxiliary>def aux(): return 1</auxiliary>\n${AUX}`, 'add')).toEqual(['def aux(): return 1', '']);
    expect(parseCoopHECompletion('I cannot solve this.', 'add')).toBeNull();
    expect(parseCoopHECompletion('{"answer": 3}', 'add')).toBeNull();
    expect(splitJointCompletion(coopHECentralizedAdapter, 'no code', new CoopHEEnv({ numTurns: 1 }).initialState(ROW), 2, 'coophe')).toEqual(['', '']);
  });

  test('a joint completion stepped through the environment is scored as its two snippets are (sandbox)', async () => {
    const env = new CoopHEEnv({ numTurns: 1 });
    const joint = new CentralizedEnv(env, coopHECentralizedAdapter);
    const state = joint.initialState(ROW);
    const step = await joint.step(state, [`<auxiliary>${AUX}</auxiliary><main>${MAIN}</main>`]);
    expect(step.info[CENTRALIZED_ROLES_KEY]).toEqual([AUX, MAIN]);
    expect(step.reward).toBe((await env.step(state, [AUX, MAIN])).reward);
    // 4: every level of the CoopHE reward (the tests pass and main calls aux).
    expect(step.reward).toBe(4);
    const bad = await joint.step(state, ['no code at all']);
    expect(bad.info[CENTRALIZED_ROLES_KEY]).toEqual(['', '']);
    expect(bad.reward).toBe(0);
  });
});

describe('HouseBuild', () => {
  test("the joint prompt: both builders' own prompts (their block lists) and CoMLRL's indexed tags", async () => {
    const [task] = await loadHouseBuildTasks(undefined, '[:1]');
    const env = new HouseBuildEnv({ numTurns: 1 });
    const joint = new CentralizedEnv<HouseBuildTask, CoMLRLState<HouseBuildTask>>(env, houseBuildCentralizedAdapter);
    const state = joint.initialState(task);
    const prompt = joint.observe(state, 0);
    expect(prompt).toContain(env.observe(state, 0));
    expect(prompt).toContain(env.observe(state, 1));
    expect(prompt).toMatch(/You are Agent 1[\s\S]*You are Agent 2/);
    expect(prompt).toMatch(/<agent_0>\nAgent 1's commands, one per line\n<\/agent_0>\n<agent_1>\nAgent 2's commands, one per line\n<\/agent_1>$/);
  });

  test.each([
    ['both sections', '<agent_0>\n/fill 0 0 0 1 0 1 white_concrete\n</agent_0>\n<agent_1>\n/kill\n</agent_1>', ['/fill 0 0 0 1 0 1 white_concrete', '/kill']],
    ['any case, spaces in the brackets, text around', 'Plan:\n< AGENT_1 >/kill</ agent_1 >\n<agent_0>/fill 0 0 0 0 0 0 stone_bricks</Agent_0> end', ['/fill 0 0 0 0 0 0 stone_bricks', '/kill']],
    ['a missing section: that builder issues nothing', '<agent_1>/kill</agent_1>', ['', '/kill']],
    ['an unclosed section counts as missing', '<agent_0>/fill 0 0 0 0 0 0 air\n<agent_1>/kill</agent_1>', ['', '/kill']],
    ['the first section of a role is its', '<agent_0>a</agent_0><agent_0>b</agent_0><agent_1>c</agent_1>', ['a', 'c']],
  ])('a joint completion split into the builders\' commands: %s', (_case, completion, roles) => {
    expect(parseIndexedRoleSections(completion, 2)).toEqual(roles);
  });

  test('malformed: no section at all does not parse, and both builders issue nothing', async () => {
    expect(parseIndexedRoleSections('/fill 0 0 0 1 0 1 white_concrete', 2)).toBeNull();
    expect(parseIndexedRoleSections('<agent_2>/kill</agent_2>', 2)).toBeNull();
    const [task] = await loadHouseBuildTasks(undefined, '[:1]');
    const env = new HouseBuildEnv({ numTurns: 1 });
    const joint = new CentralizedEnv<HouseBuildTask, CoMLRLState<HouseBuildTask>>(env, houseBuildCentralizedAdapter);
    const state = joint.initialState(task);
    const step = await joint.step(state, ['/fill 0 0 0 5 0 1 white_concrete']);
    expect(step.info[CENTRALIZED_ROLES_KEY]).toEqual(['', '']);
    expect(step.reward).toBe((await env.step(state, ['', ''])).reward);
  });

  test('a joint completion stepped through the environment is scored as the two command lists are', async () => {
    const [task] = await loadHouseBuildTasks(undefined, '[:1]');
    const env = new HouseBuildEnv({ numTurns: 1 });
    const joint = new CentralizedEnv<HouseBuildTask, CoMLRLState<HouseBuildTask>>(env, houseBuildCentralizedAdapter);
    const state = joint.initialState(task);
    const roles = ['/fill 0 0 1 5 0 1 white_concrete', '/kill'];
    const step = await joint.step(state, [`<agent_0>${roles[0]}</agent_0>\n<agent_1>${roles[1]}</agent_1>`]);
    expect(step.info[CENTRALIZED_ROLES_KEY]).toEqual(roles);
    const direct = await env.step(state, roles);
    expect(step.reward).toBe(direct.reward);
    expect(step.reward).toBeGreaterThan((await env.step(state, ['', ''])).reward);
  });
});
