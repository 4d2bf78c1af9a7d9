/**
 * CoopHumanEval (CoopHE): the aux + main code-collaboration reward with its Python sandbox, the
 * agents' prompts and the multi-turn follow-ups.
 */
export { coopHEProblemSchema, parseCoopHEProblem } from './problem.js';
export type { CoopHEProblem, CoopHEProblemRow } from './problem.js';
export {
  cleanupCode,
  extractSpecificFunction,
  checkFunctionDefinition,
  extractImportsFromPrompt,
  concatenateFunctions,
  extractTestCases,
} from './extract.js';
export type { FunctionDefinitionCheck } from './extract.js';
export { checkAuxFunctionUsage, isWrapperFunction, checkAuxCallWithoutAssignment } from './cooperation.js';
export type { IgnoredAuxCalls } from './cooperation.js';
export { CoopHERewardRunner, coopHEReward, coopHERewardBreakdown, analyzeCoopHEPair } from './reward.js';
export type {
  CoopHEVariant,
  CoopHERewardBreakdown,
  CoopHERewardOptions,
  CoopHERewardCallOptions,
  CoopHEPair,
  CoopHEStaticAnalysis,
} from './reward.js';
export { coopHEAuxPrompt, coopHEMainPrompt, extractFunctionParams, COOPHE_PROMPT_ERROR } from './prompts.js';
export {
  CoopHEFeedback,
  CoopHEConfigError,
  coopHEFollowUpPrompts,
  coopHEDiagnostics,
  sliceSandboxTests,
} from './feedback.js';
export type {
  CoopHEFeedbackMode,
  CoopHEFeedbackOptions,
  CoopHEFollowUpInput,
  CoopHEFollowUps,
  CoopHEDiagnostics,
  SandboxSlice,
} from './feedback.js';
export { coopHEExpertPrompt, requestExpertEdits, lastJsonObject } from './expert.js';
export type { ExpertModel, ExpertEdits } from './expert.js';
export { PythonSandbox, CoopHESandboxError } from './sandbox/sandbox.js';
export type { SandboxProgram, SandboxReport } from './sandbox/sandbox.js';
export { PythonNotFoundError } from './sandbox/launch.js';
export type { CoopHESandboxIsolation } from './sandbox/launch.js';
export { coopHESandboxOptionsSchema } from './sandbox/options.js';
export type { CoopHESandboxOptions } from './sandbox/options.js';
export type { SyntaxReport, TestOutcome, ExecReport } from './sandbox/protocol.js';
