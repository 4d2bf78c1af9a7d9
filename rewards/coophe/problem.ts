/** CoopHumanEval problem rows and their validation at the reward's boundary. */
import { z } from 'zod';

/** A CoopHumanEval row: `{task_id, prompt, test, entry_point}` (the HF dataset's columns). */
export const coopHEProblemSchema = z.object({
  task_id: z.string({ error: 'CoopHE problem: "task_id" must be a string' }).min(1, 'CoopHE problem: "task_id" is empty'),
  prompt: z.string({ error: 'CoopHE problem: "prompt" must be a string (the HumanEval-style problem text)' }),
  test: z.string({ error: 'CoopHE problem: "test" must be a string holding `def check(candidate):`' }),
  entry_point: z
    .string({ error: 'CoopHE problem: "entry_point" must be a string (the main function name)' })
    .min(1, 'CoopHE problem: "entry_point" is empty'),
});

/** A validated CoopHumanEval row. */
export type CoopHEProblemRow = z.infer<typeof coopHEProblemSchema>;

/** What the reward and the prompts need from a problem (`task_id` is optional there). */
export type CoopHEProblem = Omit<CoopHEProblemRow, 'task_id'> & { task_id?: string };

const rewardProblemSchema = coopHEProblemSchema.extend({ task_id: coopHEProblemSchema.shape.task_id.optional() });

/** Validates a problem passed to a reward or prompt function; the error names the bad field. */
export function parseCoopHEProblem(problem: unknown): CoopHEProblem {
  const result = rewardProblemSchema.safeParse(problem);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue.path.length > 0 ? issue.path.join('.') : '(problem)';
    throw new TypeError(`Invalid CoopHE problem at "${field}": ${issue.message}`);
  }
  return result.data;
}
