/**
 * Follow-up prompts of multi-turn CoopHE (reference `external` modes). Each agent sees only its
 * own history (its earlier prompts and responses), then the mode's text:
 *  - `level_feedback`: static and execution diagnostics of the last joint attempt, run on the
 *    sandbox slice of the tests (no double evaluation, empty globals);
 *  - `plain`: a bare request to revise;
 *  - `expert_edits`: edits proposed by a user-supplied expert model.
 */
import { checkAuxFunctionUsage, isWrapperFunction } from './cooperation.js';
import { extractTestCases } from './extract.js';
import { formatEdit, requestExpertEdits, type ExpertModel } from './expert.js';
import { parseCoopHEProblem, type CoopHEProblem } from './problem.js';
import { PY_SPACE, pySplitLines, pyStrip } from '../../src/util/python-text.js';
import { analyzeCoopHEPair, CoopHERewardRunner } from './reward.js';
import type { SandboxReport } from './sandbox/sandbox.js';
import type { TestOutcome } from './sandbox/protocol.js';

/** The follow-up modes. */
export type CoopHEFeedbackMode = 'level_feedback' | 'plain' | 'expert_edits';

/** How many asserts the feedback shows: N > 0 the first N, N < 0 the last |N|, 0/null/'all' every one. */
export type SandboxSlice = number | 'all' | null;

/** Raised for feedback settings that cannot work (e.g. `expert_edits` without an expert). */
export class CoopHEConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CoopHEConfigError';
  }
}

const S = `[${PY_SPACE}]`;
const CHECK_DEF = new RegExp(`^${S}*def${S}+check${S}*\\(candidate\\)${S}*:`, 'u');

/**
 * The test block the feedback runs (reference `_make_sliced_assert_tests`): the import preamble
 * before `def check(candidate):`, that line, then the selected asserts (stripped, re-indented by
 * four spaces). Unchanged when the slice keeps everything or no assert is found.
 */
export function sliceSandboxTests(testCode: string, slice: SandboxSlice = 1): string {
  if (slice === null || slice === 'all' || slice === 0) return testCode;
  if (!Number.isInteger(slice)) throw new CoopHEConfigError(`CoopHE sandbox_slice must be an integer, "all" or null, got ${slice}`);
  if (typeof testCode !== 'string' || pyStrip(testCode) === '') return testCode;
  const lines = pySplitLines(testCode);
  const preamble: string[] = [];
  let checkIndex: number | null = null;
  for (let i = 0; i < lines.length; i++) {
    if (CHECK_DEF.test(lines[i])) {
      checkIndex = i;
      break;
    }
    preamble.push(lines[i]);
  }
  const asserts = lines
    .slice(checkIndex === null ? 0 : checkIndex + 1)
    .map((l) => pyStrip(l))
    .filter((s) => s.startsWith('assert') && s.includes('candidate'));
  if (asserts.length === 0) return testCode;
  const parts: string[] = [];
  const preambleText = pyStrip(preamble.join('\n'));
  if (preambleText) parts.push(preambleText);
  parts.push('def check(candidate):');
  const selected = slice > 0 ? asserts.slice(0, slice) : asserts.slice(slice);
  for (const a of selected) parts.push(`    ${a}`);
  return parts.join('\n') + '\n';
}

/** One agent's history block: its earlier prompts, then its earlier responses. */
function historyLines(prompts: readonly string[], responses: readonly string[], label: string): string[] {
  const lines: string[] = [];
  if (prompts.length > 0) {
    lines.push('History: previous prompts:');
    prompts.forEach((p, t) => lines.push(`- Turn ${t + 1} prompt:\n${p}`));
    lines.push('');
  }
  if (responses.length > 0) {
    lines.push(`History: your previous ${label} responses:`);
    responses.forEach((r, t) => lines.push(`- Turn ${t + 1} response:\n${r}`));
    lines.push('');
  }
  return lines;
}

/** Static and execution diagnostics of one joint attempt (reference `analyze_code`). */
export interface CoopHEDiagnostics {
  auxDefined: boolean;
  auxMessage: string;
  mainDefined: boolean;
  mainMessage: string;
  syntaxOk: boolean;
  syntaxMessage: string;
  /** Set on a syntax error reported by the parser. */
  syntaxError: { line: number | null; offset: number | null; msg: string } | null;
  auxCalled: boolean;
  /** `Line N: reason` for each misused aux call (AST-based; feedback text only). */
  auxProblems: string[];
  isWrapper: boolean;
  testsPassed: number;
  /** 0 when the tests did not run (syntax error, no asserts). */
  testsTotal: number;
  /** Each test that ran and failed, in order. */
  failures: Array<{ test: string; errorType: string; errorMessage: string }>;
  /** The sandbox run (absent only if it was not needed). */
  sandbox?: SandboxReport;
}

/** Runs the feedback analysis of an (aux, main) attempt against `testCode` (the sandbox slice). */
export async function coopHEDiagnostics(
  runner: CoopHERewardRunner,
  aux: string,
  main: string,
  problem: CoopHEProblem,
  testCode: string,
): Promise<CoopHEDiagnostics> {
  const p = parseCoopHEProblem(problem);
  const s = analyzeCoopHEPair(aux, main, p);
  const tests = testCode && p.entry_point ? extractTestCases(testCode, p.entry_point) : [];
  const report = await runner.sandbox.run(
    { code: s.combinedCode, tests, injectMath: false, doubleEval: false, mainFunc: s.mainFunc || null, imports: s.imports },
    'feedback',
  );
  const ran = report.syntax.ok && tests.length > 0;
  const failures: CoopHEDiagnostics['failures'] = [];
  if (ran && report.exec && !report.exec.ok) {
    // The definitions did not load: every test is reported with that error.
    for (const t of tests) failures.push({ test: t, errorType: report.exec.errorType ?? 'Exception', errorMessage: report.exec.errorMessage ?? '' });
  } else if (ran) {
    report.tests.forEach((o: TestOutcome, i) => {
      if (o.status === 'fail' || o.status === 'timeout') {
        failures.push({ test: tests[i], errorType: o.errorType ?? 'Exception', errorMessage: o.errorMessage ?? '' });
      }
    });
  }
  return {
    auxDefined: s.auxCheck.passed,
    auxMessage: s.auxCheck.message,
    mainDefined: s.mainCheck.passed,
    mainMessage: s.mainCheck.message,
    syntaxOk: report.syntax.ok,
    syntaxMessage: report.syntax.message,
    syntaxError: !report.syntax.ok && report.syntax.msg !== null ? { line: report.syntax.line, offset: report.syntax.offset, msg: report.syntax.msg } : null,
    auxCalled: s.mainFunc ? checkAuxFunctionUsage(s.mainFunc, 'aux') : false,
    auxProblems: s.mainFunc ? (report.analysis ?? []) : [],
    isWrapper: s.mainFunc ? isWrapperFunction(s.mainFunc, 'aux') : false,
    testsPassed: ran ? report.passed : 0,
    testsTotal: ran ? tests.length : 0,
    failures,
    sandbox: report,
  };
}

const pyValue = (v: number | null) => (v === null ? 'None' : String(v));

/** The diagnostics lines shared by both agents; `first` is the addressed agent's definition. */
function diagnosticLines(d: CoopHEDiagnostics, agent: 'aux' | 'main'): string[] {
  const aux = `- Aux definition: ${d.auxDefined ? 'FOUND' : 'MISSING'} (${d.auxMessage})`;
  const main = `- Main definition: ${d.mainDefined ? 'FOUND' : 'MISSING'} (${d.mainMessage})`;
  const lines = ['Static and execution diagnostics:', ...(agent === 'aux' ? [aux, main] : [main, aux])];
  lines.push(`- Syntax: ${d.syntaxOk ? 'OK' : 'ERROR'} (${d.syntaxMessage})`);
  if (d.syntaxError) lines.push(`  SyntaxError at line ${pyValue(d.syntaxError.line)}, col ${pyValue(d.syntaxError.offset)}: ${d.syntaxError.msg}`);
  if (d.testsTotal > 0) {
    lines.push(`- Tests: ${d.testsPassed}/${d.testsTotal} passed`);
    for (const f of d.failures) lines.push(`  Failed case: ${f.test} -> ${f.errorType}: ${f.errorMessage}`);
  } else {
    lines.push('- Tests: no test cases found');
  }
  if (agent === 'main' && d.mainDefined) {
    if (!d.auxCalled) lines.push('- Aux usage: main does NOT call aux');
    else if (d.auxProblems.length > 0) lines.push(`- Aux usage: called but misused (${d.auxProblems.slice(0, 2).join(', ')})`);
    else lines.push('- Aux usage: main calls aux and uses its result');
    if (d.isWrapper) lines.push('- Warning: main appears to be a thin wrapper over aux');
  }
  return lines;
}

/** The state a follow-up is built from. */
export interface CoopHEFollowUpInput {
  problem: CoopHEProblem;
  /** Each agent's earlier prompts, oldest first: `[aux prompts, main prompts]`. */
  promptHistory: readonly [readonly string[], readonly string[]];
  /** Each agent's earlier responses, oldest first: `[aux responses, main responses]`. */
  responseHistory: readonly [readonly string[], readonly string[]];
  /** The attempt to give feedback on; default: the last response of each agent. */
  auxCompletion?: string;
  mainCompletion?: string;
}

/** The two follow-up prompts (and, for `level_feedback`, the diagnostics behind them). */
export interface CoopHEFollowUps {
  aux: string;
  main: string;
  diagnostics?: CoopHEDiagnostics;
}

/** Settings of {@link CoopHEFeedback}. */
export interface CoopHEFeedbackOptions {
  /** Default `level_feedback` (the paper's configs). */
  mode?: CoopHEFeedbackMode;
  /** Asserts shown by `level_feedback` (default 1, the configs' `sandbox_slice`). */
  sandboxSlice?: SandboxSlice;
  /** Runs `level_feedback`'s diagnostics; default: a runner created with default options. */
  runner?: CoopHERewardRunner;
  /** Required by `expert_edits`. */
  expert?: ExpertModel;
  /** Expert attempts before giving up with empty edits (default 3). */
  expertRetries?: number;
  /** Reports expert failures. */
  log?: (message: string) => void;
}

const MODES: readonly CoopHEFeedbackMode[] = ['level_feedback', 'plain', 'expert_edits'];

/**
 * Builds CoopHE follow-up prompts. Settings are checked at construction, so `expert_edits`
 * without an expert model fails before training starts, not at the second turn.
 */
export class CoopHEFeedback {
  readonly mode: CoopHEFeedbackMode;
  readonly sandboxSlice: SandboxSlice;
  private readonly runner: CoopHERewardRunner | undefined;
  private readonly expert: ExpertModel | undefined;
  private readonly expertRetries: number;
  private readonly log: ((message: string) => void) | undefined;

  constructor(options: CoopHEFeedbackOptions = {}) {
    this.mode = options.mode ?? 'level_feedback';
    if (!MODES.includes(this.mode)) {
      throw new CoopHEConfigError(`CoopHE feedback "mode" must be one of ${MODES.join(', ')}, got ${JSON.stringify(this.mode)}`);
    }
    if (this.mode === 'expert_edits' && typeof options.expert !== 'function') {
      throw new CoopHEConfigError(
        'CoopHE feedback mode "expert_edits" needs an expert model: pass { expert: async (prompt) => replyText }',
      );
    }
    this.sandboxSlice = options.sandboxSlice === undefined ? 1 : options.sandboxSlice;
    if (this.sandboxSlice !== null && this.sandboxSlice !== 'all' && !Number.isInteger(this.sandboxSlice)) {
      throw new CoopHEConfigError(`CoopHE feedback "sandboxSlice" must be an integer, "all" or null, got ${String(this.sandboxSlice)}`);
    }
    // Created now so that a missing interpreter is reported at construction, not at turn 2.
    this.runner = options.runner ?? (this.mode === 'level_feedback' ? new CoopHERewardRunner({ log: options.log }) : undefined);
    this.expert = options.expert;
    this.expertRetries = options.expertRetries ?? 3;
    this.log = options.log;
  }

  /** The next-turn prompts of the aux and main agents. */
  async followUps(input: CoopHEFollowUpInput): Promise<CoopHEFollowUps> {
    const problem = parseCoopHEProblem(input.problem);
    const [auxPrompts, mainPrompts] = input.promptHistory;
    const [auxResponses, mainResponses] = input.responseHistory;
    const auxCompletion = input.auxCompletion ?? auxResponses[auxResponses.length - 1] ?? '';
    const mainCompletion = input.mainCompletion ?? mainResponses[mainResponses.length - 1] ?? '';
    const entry = problem.entry_point || 'main';
    const auxLines = historyLines(auxPrompts, auxResponses, 'aux(...)');
    const mainLines = historyLines(mainPrompts, mainResponses, 'main');
    const reviseAux = 'Revise your aux(...) accordingly. Output ONLY the function code';
    const reviseMain = `Revise your ${entry}(...) accordingly. Output ONLY the function code`;

    if (this.mode === 'plain') {
      return { aux: [...auxLines, `${reviseAux}.`].join('\n'), main: [...mainLines, `${reviseMain}.`].join('\n') };
    }
    if (this.mode === 'expert_edits') {
      const edits = await requestExpertEdits(this.expert!, problem.prompt, auxCompletion, mainCompletion, this.expertRetries, this.log);
      const block = (edit: string, revise: string) => ['Here is edited snippet from an expert model:', formatEdit(edit), '', `${revise} with no extra text.`];
      return {
        aux: [...auxLines, ...block(edits.aux, reviseAux)].join('\n'),
        main: [...mainLines, ...block(edits.main, reviseMain)].join('\n'),
      };
    }
    const tests = sliceSandboxTests(problem.test, this.sandboxSlice);
    const d = await coopHEDiagnostics(this.runner!, auxCompletion, mainCompletion, problem, tests);
    return {
      aux: [...auxLines, ...diagnosticLines(d, 'aux'), `\n${reviseAux} with no extra text.`].join('\n'),
      main: [...mainLines, ...diagnosticLines(d, 'main'), `\n${reviseMain} with no extra text.`].join('\n'),
      diagnostics: d,
    };
  }
}

/** One-shot form of {@link CoopHEFeedback.followUps}. */
export function coopHEFollowUpPrompts(input: CoopHEFollowUpInput, options: CoopHEFeedbackOptions = {}): Promise<CoopHEFollowUps> {
  return new CoopHEFeedback(options).followUps(input);
}
