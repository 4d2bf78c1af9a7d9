/**
 * Reading the files of a Hugging Face tokenizer directory, validated with zod so that a broken
 * checkpoint fails with a message naming the file and the field.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/** A special token as tokenizer configs write it: a string, or an AddedToken object with `content`. */
const specialTokenSchema = z.union([z.string(), z.looseObject({ content: z.string() }), z.null()]);

const namedTemplateSchema = z.looseObject({ name: z.string(), template: z.string() });

/** The part of tokenizer_config.json that comlrl reads; other fields are kept as they are. */
export const tokenizerConfigSchema = z.looseObject({
  eos_token: specialTokenSchema.optional(),
  pad_token: specialTokenSchema.optional(),
  bos_token: specialTokenSchema.optional(),
  unk_token: specialTokenSchema.optional(),
  additional_special_tokens: z.array(z.union([z.string(), z.looseObject({ content: z.string() })])).optional(),
  chat_template: z.union([z.string(), z.array(namedTemplateSchema), z.null()]).optional(),
  clean_up_tokenization_spaces: z.boolean().optional(),
});
export type TokenizerConfigJson = z.infer<typeof tokenizerConfigSchema>;

/** special_tokens_map.json: the same special-token fields. */
export const specialTokensMapSchema = z.looseObject({
  eos_token: specialTokenSchema.optional(),
  pad_token: specialTokenSchema.optional(),
  bos_token: specialTokenSchema.optional(),
  unk_token: specialTokenSchema.optional(),
  additional_special_tokens: z.array(z.union([z.string(), z.looseObject({ content: z.string() })])).optional(),
});
export type SpecialTokensMapJson = z.infer<typeof specialTokensMapSchema>;

const addedTokenSchema = z.looseObject({
  id: z.number().int().nonnegative(),
  content: z.string(),
  special: z.boolean().optional(),
});

/** tokenizer.json: the pipeline parts are checked only for shape; the tokenizers library reads them. */
export const tokenizerJsonSchema = z.looseObject({
  added_tokens: z.array(addedTokenSchema).optional(),
  normalizer: z.unknown().optional(),
  pre_tokenizer: z.unknown().optional(),
  post_processor: z.unknown().optional(),
  decoder: z.unknown().optional(),
  model: z.looseObject({
    type: z.string().optional(),
    // Checked for shape only: a real vocabulary has ~150k entries and the library indexes it anyway.
    vocab: z.custom<Record<string, number> | [string, number][]>((v) => typeof v === 'object' && v !== null, {
      message: 'expected the vocabulary (an object of token -> id, or a list of [token, score])',
    }),
    unk_token: z.string().nullable().optional(),
  }),
});
export type TokenizerJson = z.infer<typeof tokenizerJsonSchema>;

/** config.json / generation_config.json: only the token ids. */
export const modelTokenIdsSchema = z.looseObject({
  eos_token_id: z.union([z.number().int(), z.array(z.number().int()), z.null()]).optional(),
  bos_token_id: z.union([z.number().int(), z.array(z.number().int()), z.null()]).optional(),
  pad_token_id: z.union([z.number().int(), z.array(z.number().int()), z.null()]).optional(),
});
export type ModelTokenIdsJson = z.infer<typeof modelTokenIdsSchema>;

/** chat_template.json (processor style): `{ "chat_template": "..." }`. */
export const chatTemplateJsonSchema = z.looseObject({ chat_template: z.string() });

function formatIssue(file: string, issue: z.core.$ZodIssue): string {
  const field = issue.path.length > 0 ? `field "${issue.path.map(String).join('.')}"` : 'top level';
  return `${file}: ${field}: ${issue.message}`;
}

/**
 * The files of a tokenizer directory a saved model carries (those present are copied byte for
 * byte by `Tokenizer.save`): what transformers' `AutoTokenizer` and comlrl's `loadTokenizer` read,
 * slow-tokenizer vocabularies included.
 */
export const TOKENIZER_FILE_NAMES: readonly string[] = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'chat_template.jinja',
  'chat_template.json',
  'vocab.json',
  'merges.txt',
  'vocab.txt',
  'tokenizer.model',
  'spiece.model',
  'sentencepiece.bpe.model',
];

/** The bytes of each {@link TOKENIZER_FILE_NAMES} file in `dir`, by name (absent files left out). */
export async function readTokenizerFileBytes(dir: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (const name of TOKENIZER_FILE_NAMES) {
    const path = join(dir, name);
    try {
      out.set(name, await readFile(path));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new Error(`${path}: cannot read: ${(e as Error).message}`);
    }
  }
  return out;
}

async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`${path}: cannot read: ${(e as Error).message}`);
  }
}

/**
 * Reads and validates `dir/name`. Returns null when the file does not exist; throws an error that
 * names the file (and the field) when it is not valid JSON or does not match `schema`.
 */
export async function readJsonFile<S extends z.ZodType>(dir: string, name: string, schema: S): Promise<z.infer<S> | null> {
  const text = await readText(join(dir, name));
  return text === null ? null : parseJsonFile(dir, name, text, schema);
}

/** Parses and validates the text of `dir/name` (see {@link readJsonFile}). */
export function parseJsonFile<S extends z.ZodType>(dir: string, name: string, text: string, schema: S): z.infer<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`${name} in ${dir} is not valid JSON: ${(e as Error).message}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`${formatIssue(name, parsed.error.issues[0])} (in ${dir})`);
  }
  return parsed.data;
}

/** Reads `dir/name` as text, or null when it does not exist. */
export async function readTextFile(dir: string, name: string): Promise<string | null> {
  return readText(join(dir, name));
}

/** The token text of a special-token field (string or AddedToken object), or null. */
export function specialTokenText(value: z.infer<typeof specialTokenSchema> | undefined): string | null {
  if (value === undefined || value === null) return null;
  return typeof value === 'string' ? value : value.content;
}

/** The first id of a `*_token_id` field of config.json / generation_config.json, or null. */
export function firstTokenId(value: number | number[] | null | undefined): number | null {
  if (value === undefined || value === null) return null;
  if (Array.isArray(value)) return value.length > 0 ? value[0] : null;
  return value;
}
