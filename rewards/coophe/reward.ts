/**
 * The CoopHE reward (reference `execution_reward_aux`): cumulative levels with early stops.
 *
 * 1. structure: aux defined in the aux completion with a `return` (+0.4, optional), main (the
 *    entry point) defined in the main completion with a `return` (+0.6, else stop);
 * 2. syntax: `ast.parse` of imports + aux + main succeeds (+0.5, else stop);
 * 3. tests: + passed/total (no tests: stop);
 * 4. cooperation (only if a test passed and aux exists): main calls aux (+0.5), then not a thin
 *    wrapper (+1.0) and −0.5 for the narrow "ignored aux call" pattern.
 * Range [0, 4]. Sums are formed in the reference's order so floats agree exactly.
 */
import { checkAuxCallWithoutAssignment, checkAuxFunctionUsage, isWrapperFunction } from './cooperation.js';
import { checkFunctionDefinition, concatenateFunctions, extractImportsFromPrompt, extractSpecificFunction, extractTestCases } from './extract.js';
import { parseCoopHEProblem, type CoopHEProblem } from './problem.js';
import type { CoopHESandboxIsolation } from './sandbox/launch.js';
import type { CoopHESandboxOptions } from './sandbox/options.js';
import { PythonSandbox, type SandboxReport } from './sandbox/sandbox.js';

/**
 * Which reference variant to reproduce: `upstream` (newest OpenMLRL code: `math` is pre-injected
 * into the globals the candidate code runs in) or `fork` (the junho328 / shady-cs15 forks:
 * empty globals, so `math.…` without an import that survives cleanup fails).
 */
export type CoopHEVariant = 'upstream' | 'fork';

/**
 * Per-level record of one reward computation. Keys are the reference's variable names, so they
 * compare directly with `vectors/coophe.json`; a key is absent when its level was not reached.
 */
export interface CoopHERewardBreakdown {
  reward: number;
  aux_check_passed: boolean;
  aux_message: string;
  main_check_passed: boolean;
  main_message: string;
  level1_passed: boolean;
  aux_func: string;
  main_func: string;
  imports: string;
  combined_code?: string;
  syntax_passed?: boolean;
  syntax_message?: string;
  test_cases_list?: string[];
  passed_tests?: number;
  total_tests?: number;
  timeout_count?: number;
  /** Absent when executing the definitions raised (no test ran). */
  test_reward?: number;
  main_uses_aux?: boolean;
  bonus_reward?: number;
  is_wrapper?: boolean;
  anti_wrapper_bonus?: number;
  has_ignored_calls?: boolean;
  ignored_calls?: string[];
  /** The sandbox run behind levels 2–3 (absent when level 1 stopped the computation). */
  sandbox?: SandboxReport;
}

/** Options of {@link CoopHERewardRunner}: the sandbox's plus the reference variant. */
export interface CoopHERewardOptions extends CoopHESandboxOptions {
  /** Default `upstream` (the vectors' `expected_reward`); `fork` gives `expected_reward_fork`. */
  variant?: CoopHEVariant;
}

/** One (aux, main) pair to score. */
export interface CoopHEPair {
  aux: string;
  main: string;
  problem: CoopHEProblem;
}

/** Level-1 and text-only parts of the reward, shared with the feedback analysis. */
export interface CoopHEStaticAnalysis {
  auxFunc: string;
  mainFunc: string;
  auxCheck: { passed: boolean; message: string };
  mainCheck: { passed: boolean; message: string };
  imports: string;
  combinedCode: string;
}

/** The text-only analysis of a pair (no Python needed). */
export function analyzeCoopHEPair(aux: string, main: string, problem: CoopHEProblem): CoopHEStaticAnalysis {
  const auxFunc = extractSpecificFunction(aux, 'aux');
  const mainFunc = extractSpecificFunction(main, problem.entry_point);
  const imports = extractImportsFromPrompt(problem.prompt);
  return {
    auxFunc,
    mainFunc,
    auxCheck: checkFunctionDefinition(aux, 'aux', 'Aux function'),
    mainCheck: checkFunctionDefinition(main, problem.entry_point, `Main function (${problem.entry_point})`),
    imports,
    // The reference cleans the already-extracted functions once more here.
    combinedCode: concatenateFunctions(auxFunc, mainFunc, imports),
  };
}

/**
 * Scores (aux, main) pairs on CoopHumanEval problems with a real Python 3 sandbox. Construct once
 * and reuse: construction checks the interpreter (clear error if missing) and probes isolation;
 * calls run concurrently up to the configured pool size.
 */
export class CoopHERewardRunner {
  /** The sandbox (its isolation, interpreter and pool). */
  readonly sandbox: PythonSandbox;
  /** The reference variant reproduced. */
  readonly variant: CoopHEVariant;

  constructor(options: CoopHERewardOptions = {}) {
    const { variant, ...sandboxOptions } = options;
    if (variant !== undefined && variant !== 'upstream' && variant !== 'fork') {
      throw new TypeError(`CoopHE reward option "variant" must be "upstream" or "fork", got ${JSON.stringify(variant)}`);
    }
    this.variant = variant ?? 'upstream';
    this.sandbox = new PythonSandbox(sandboxOptions);
  }

  /** Protections each sandbox run gets on this machine. */
  get isolation(): CoopHESandboxIsolation {
    return this.sandbox.isolation;
  }

  /** The reward of one pair. */
  async reward(aux: string, main: string, problem: CoopHEProblem): Promise<number> {
    return (await this.breakdown(aux, main, problem)).reward;
  }

  /** Rewards of many pairs, run concurrently (bounded by the pool), in input order. */
  rewardBatch(pairs: readonly CoopHEPair[]): Promise<number[]> {
    return Promise.all(pairs.map((p) => this.reward(p.aux, p.main, p.problem)));
  }

  /** Breakdowns of many pairs, in input order. */
  breakdownBatch(pairs: readonly CoopHEPair[]): Promise<CoopHERewardBreakdown[]> {
    return Promise.all(pairs.map((p) => this.breakdown(p.aux, p.main, p.problem)));
  }

  /** The reward of one pair with every level's details. */
  async breakdown(aux: string, main: string, problem: CoopHEProblem): Promise<CoopHERewardBreakdown> {
    const p = parseCoopHEProblem(problem);
    if (typeof aux !== 'string' || typeof main !== 'string') {
      throw new TypeError('CoopHE reward: "aux" and "main" completions must be strings');
    }
    const s = analyzeCoopHEPair(aux, main, p);
    let reward = 0.0;
    if (s.auxCheck.passed) reward += 0.4;
    if (s.mainCheck.passed) reward += 0.6;
    const b: CoopHERewardBreakdown = {
      reward,
      aux_check_passed: s.auxCheck.passed,
      aux_message: s.auxCheck.message,
      main_check_passed: s.mainCheck.passed,
      main_message: s.mainCheck.message,
      level1_passed: s.mainCheck.passed,
      aux_func: s.auxFunc,
      main_func: s.mainFunc,
      imports: s.imports,
    };
    if (!s.mainCheck.passed) return b;

    b.combined_code = s.combinedCode;
    const tests = extractTestCases(p.test, p.entry_point);
    const report = await this.sandbox.run(
      { code: s.combinedCode, tests, injectMath: this.variant === 'upstream', doubleEval: true, imports: s.imports },
      'reward',
    );
    b.sandbox = report;
    b.syntax_passed = report.syntax.ok;
    b.syntax_message = report.syntax.message;
    if (!report.syntax.ok) return b;
    reward += 0.5;
    b.test_cases_list = tests;
    if (tests.length === 0) {
      b.reward = reward;
      return b;
    }
    b.passed_tests = report.passed;
    b.total_tests = tests.length;
    b.timeout_count = report.timeouts;
    if (report.exec?.ok) {
      b.test_reward = (report.passed / tests.length) * 1.0;
      reward += b.test_reward;
    }
    if (report.passed > 0 && s.auxFunc) {
      b.main_uses_aux = checkAuxFunctionUsage(s.mainFunc, 'aux');
      if (b.main_uses_aux) {
        b.bonus_reward = 0.5;
        reward += b.bonus_reward;
        b.is_wrapper = isWrapperFunction(s.mainFunc, 'aux');
        if (!b.is_wrapper) {
          b.anti_wrapper_bonus = 1.0;
          reward += b.anti_wrapper_bonus;
        }
        const ignored = checkAuxCallWithoutAssignment(s.mainFunc, 'aux');
        b.has_ignored_calls = ignored.found;
        b.ignored_calls = ignored.calls;
        if (ignored.found) reward -= 0.5;
      }
    }
    b.reward = reward;
    return b;
  }
}

const sharedRunners = new Map<string, CoopHERewardRunner>();

/** Options of {@link coopHEReward}: a runner to use, or options for a shared one. */
export interface CoopHERewardCallOptions extends CoopHERewardOptions {
  /** Use this runner (its own options apply); otherwise a runner shared per option set. */
  runner?: CoopHERewardRunner;
}

function sharedRunner(options: CoopHERewardOptions): CoopHERewardRunner {
  const { log, ...rest } = options;
  const key = JSON.stringify(rest, Object.keys(rest).sort());
  let runner = sharedRunners.get(key);
  if (!runner) {
    runner = new CoopHERewardRunner({ ...rest, ...(log ? { log } : {}) });
    sharedRunners.set(key, runner);
  }
  return runner;
}

/**
 * The CoopHE reward of an (aux, main) pair on `problem`, in [0, 4]. Without `options.runner`, a
 * {@link CoopHERewardRunner} is created on first use and shared by calls with the same options.
 */
export function coopHEReward(aux: string, main: string, problem: CoopHEProblem, options: CoopHERewardCallOptions = {}): Promise<number> {
  const { runner, ...rest } = options;
  return (runner ?? sharedRunner(rest)).reward(aux, main, problem);
}

/** {@link coopHEReward} with every level's details. */
export function coopHERewardBreakdown(
  aux: string,
  main: string,
  problem: CoopHEProblem,
  options: CoopHERewardCallOptions = {},
): Promise<CoopHERewardBreakdown> {
  const { runner, ...rest } = options;
  return (runner ?? sharedRunner(rest)).breakdown(aux, main, problem);
}
