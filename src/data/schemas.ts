import { z } from 'zod';

/**
 * Row schemas of the three task datasets. They live in src (not rewards) so loaders, envs and
 * reward modules share one definition; unknown columns are dropped.
 */

/** A `trl-lib/tldr` row: the Reddit post in `prompt`; `completion` (the reference TL;DR) is unused. */
export const tldrRowSchema = z.object({
  prompt: z.string(),
  completion: z.string().optional(),
});
export type TLDRRow = z.infer<typeof tldrRowSchema>;

/** A CoopHumanEval problem (HumanEval-style prompt, `def check(candidate):` tests). */
export const coopHERowSchema = z.object({
  task_id: z.string().min(1),
  prompt: z.string(),
  test: z.string(),
  entry_point: z.string().min(1),
});
export type CoopHERow = z.infer<typeof coopHERowSchema>;

const int3 = z.tuple([z.number().int(), z.number().int(), z.number().int()]);

/**
 * A HouseBuild task (LLM_Collab_Minecraft `house_build/dataset/data.json`): a y-layered target of
 * `size = [x-width, y-height, z-depth]`, each layer `depth` rows of `width` inventory characters.
 * `bbox` is optional (null/absent: inferred from the layers); `count` is informative only.
 */
export const houseBuildTaskSchema = z
  .object({
    task_id: z.string().min(1),
    inventory: z.record(z.string().length(1, 'inventory keys are single characters'), z.string().min(1)),
    count: z.record(z.string(), z.number().int().nonnegative()).optional(),
    target_spec: z.object({
      type: z.literal('y_layers'),
      size: z.tuple([z.number().int().positive(), z.number().int().positive(), z.number().int().positive()]),
      layers: z
        .array(z.object({ y: z.number().int(), rows: z.array(z.string()) }))
        .min(1, 'at least one layer'),
    }),
    // null in the shipped file for every task but the first.
    bbox: z.object({ from: int3, to: int3 }).nullish(),
    variant: z.string().nullish(),
  })
  .superRefine((task, ctx) => {
    // The reward indexes layers[y].rows[z][x] through the inventory; catch shape errors at load time.
    const [width, , depth] = task.target_spec.size;
    task.target_spec.layers.forEach((layer, li) => {
      if (layer.rows.length !== depth) {
        ctx.addIssue({
          code: 'custom',
          path: ['target_spec', 'layers', li, 'rows'],
          message: `expected ${depth} rows (size[2]), got ${layer.rows.length}`,
        });
      }
      layer.rows.forEach((row, zi) => {
        if (row.length !== width) {
          ctx.addIssue({
            code: 'custom',
            path: ['target_spec', 'layers', li, 'rows', zi],
            message: `expected ${width} characters (size[0]), got ${row.length}`,
          });
        }
        for (const ch of row) {
          if (!(ch in task.inventory)) {
            ctx.addIssue({
              code: 'custom',
              path: ['target_spec', 'layers', li, 'rows', zi],
              message: `character '${ch}' is not in the inventory`,
            });
            break;
          }
        }
      });
    });
  });
export type HouseBuildTask = z.infer<typeof houseBuildTaskSchema>;
