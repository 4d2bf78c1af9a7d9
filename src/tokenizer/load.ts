/**
 * `loadTokenizer`: a Hugging Face tokenizer directory (tokenizer.json + tokenizer_config.json, with
 * special_tokens_map.json, chat_template.jinja, generation_config.json and config.json as
 * fallbacks) as a {@link Tokenizer}, built on @huggingface/tokenizers and @huggingface/jinja.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Tokenizer as HFTokenizerCore } from '@huggingface/tokenizers';
import type { z } from 'zod';
import {
  chatTemplatesFrom,
  renderChatTemplate,
  selectChatTemplate,
  type ChatTemplates,
  type TemplateSpecialTokens,
} from './chat-template.js';
import {
  chatTemplateJsonSchema,
  firstTokenId,
  modelTokenIdsSchema,
  parseJsonFile,
  readJsonFile,
  readTokenizerFileBytes,
  specialTokensMapSchema,
  specialTokenText,
  tokenizerConfigSchema,
  tokenizerJsonSchema,
  type SpecialTokensMapJson,
  type TokenizerConfigJson,
  type TokenizerJson,
} from './files.js';
import type { ChatMessage, ChatTemplateOptions, Tokenizer } from './types.js';

/** Where a special token was found, for error messages and `save`. */
interface ResolvedToken {
  text: string;
  id: number;
}

/** Everything read from a tokenizer directory. */
interface TokenizerFiles {
  dir: string;
  tokenizerJson: TokenizerJson;
  /** tokenizer_config.json, or {} when the checkpoint has none. */
  config: TokenizerConfigJson;
  specialsMap: SpecialTokensMapJson | null;
  templates: ChatTemplates | null;
  /** The directory's tokenizer files as read (`save` writes them back byte for byte). */
  originals: ReadonlyMap<string, Buffer>;
}

async function readTokenizerFiles(dir: string): Promise<TokenizerFiles> {
  const originals = await readTokenizerFileBytes(dir);
  const text = (name: string): string | null => originals.get(name)?.toString('utf8') ?? null;
  const json = <S extends z.ZodType>(name: string, schema: S): z.infer<S> | null => {
    const t = text(name);
    return t === null ? null : parseJsonFile(dir, name, t, schema);
  };
  const tokenizerJson = json('tokenizer.json', tokenizerJsonSchema);
  if (tokenizerJson === null) {
    throw new Error(`tokenizer.json not found in ${dir}: comlrl needs the fast-tokenizer file (tokenizer.json) of the checkpoint`);
  }
  const configFile = json('tokenizer_config.json', tokenizerConfigSchema);
  const specialsMap = json('special_tokens_map.json', specialTokensMapSchema);
  const config: TokenizerConfigJson = configFile ?? {};

  // transformers saves the template in chat_template.jinja (newer) and reads it in preference.
  let templates: ChatTemplates | null = null;
  const jinja = text('chat_template.jinja');
  if (jinja !== null) {
    templates = chatTemplatesFrom(jinja, 'chat_template.jinja');
  } else if (config.chat_template !== undefined && config.chat_template !== null) {
    templates = chatTemplatesFrom(config.chat_template, 'tokenizer_config.json');
  } else {
    const processor = json('chat_template.json', chatTemplateJsonSchema);
    if (processor !== null) templates = chatTemplatesFrom(processor.chat_template, 'chat_template.json');
  }
  checkUnknownToken(tokenizerJson, dir);
  return { dir, tokenizerJson, config, specialsMap, templates, originals };
}

/**
 * A word-level (or WordPiece / BPE) vocabulary must hold the unknown token its model names: words
 * outside it become that token, and without it they would have no id at all (an error only once
 * generation meets such a word). A word-level model needs one.
 */
function checkUnknownToken(tokenizerJson: TokenizerJson, dir: string): void {
  const { model } = tokenizerJson;
  const vocab = model.vocab;
  if (Array.isArray(vocab)) return; // Unigram: [token, score] pairs with an unk_id, not an unk_token.
  const unk = model.unk_token;
  if (unk === undefined || unk === null) {
    if (model.type === 'WordLevel') {
      throw new Error(`tokenizer.json in ${dir}: field "model.unk_token" is missing: a WordLevel model needs an unknown token for words outside its vocabulary`);
    }
    return;
  }
  if (!Object.hasOwn(vocab, unk)) {
    throw new Error(
      `tokenizer.json in ${dir}: the unknown token ${JSON.stringify(unk)} (field "model.unk_token") is not in the vocabulary ("model.vocab"); add it there, or words outside the vocabulary get no id`,
    );
  }
}

/** The config object @huggingface/tokenizers reads: special tokens as plain strings. */
function coreConfig(files: TokenizerFiles): Record<string, unknown> {
  const { config, specialsMap, tokenizerJson } = files;
  const pick = (field: 'eos_token' | 'pad_token' | 'bos_token' | 'unk_token'): string | undefined =>
    specialTokenText(config[field]) ?? specialTokenText(specialsMap?.[field]) ?? undefined;
  const additional = (config.additional_special_tokens ?? specialsMap?.additional_special_tokens ?? []).map((t) =>
    typeof t === 'string' ? t : t.content,
  );
  const out: Record<string, unknown> = {
    ...config,
    eos_token: pick('eos_token'),
    pad_token: pick('pad_token'),
    bos_token: pick('bos_token'),
    // WordLevel models keep their unknown token in tokenizer.json; the library looks for it in the config.
    unk_token: pick('unk_token') ?? tokenizerJson.model.unk_token ?? undefined,
    additional_special_tokens: additional,
    // transformers no longer cleans up spaces unless the config asks for it.
    clean_up_tokenization_spaces: config.clean_up_tokenization_spaces ?? false,
  };
  delete out.chat_template;
  return out;
}

function buildCore(files: TokenizerFiles, cfg: Record<string, unknown>): HFTokenizerCore {
  const json = { ...files.tokenizerJson, added_tokens: files.tokenizerJson.added_tokens ?? [] };
  try {
    return new HFTokenizerCore(json, cfg);
  } catch (e) {
    throw new Error(`tokenizer.json in ${files.dir} could not be built into a tokenizer: ${(e as Error).message}`);
  }
}

class HFTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly eosTokenId: number;
  readonly eosToken: string;
  readonly padTokenId: number;
  readonly padToken: string;
  readonly bosTokenId: number | null;
  readonly bosToken: string | null;
  readonly specialTokenIds: ReadonlySet<number>;
  private readonly templateVars: TemplateSpecialTokens;

  constructor(
    private readonly files: TokenizerFiles,
    private readonly core: HFTokenizerCore,
    eos: ResolvedToken,
    pad: ResolvedToken,
    bos: ResolvedToken | null,
    unk: ResolvedToken | null,
    additional: ResolvedToken[],
  ) {
    this.eosTokenId = eos.id;
    this.eosToken = eos.text;
    this.padTokenId = pad.id;
    this.padToken = pad.text;
    this.bosTokenId = bos?.id ?? null;
    this.bosToken = bos?.text ?? null;

    let maxId = -1;
    for (const id of core.get_vocab(true).values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;

    const special = new Set<number>();
    for (const t of files.tokenizerJson.added_tokens ?? []) if (t.special === true) special.add(t.id);
    for (const t of [eos, pad, bos, unk, ...additional]) if (t) special.add(t.id);
    this.specialTokenIds = special;

    this.templateVars = {
      eos_token: eos.text,
      pad_token: pad.text,
      ...(bos ? { bos_token: bos.text } : {}),
      ...(unk ? { unk_token: unk.text } : {}),
      additional_special_tokens: additional.map((t) => t.text),
    };
  }

  get hasChatTemplate(): boolean {
    return this.files.templates !== null;
  }

  encode(text: string, options?: { addSpecialTokens?: boolean }): number[] {
    return this.core.encode(text, { add_special_tokens: options?.addSpecialTokens ?? true }).ids;
  }

  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string {
    // Ids outside the vocabulary are dropped, as the Rust tokenizers do: a model's embedding is often
    // larger than its tokenizer (Qwen pads to 151936), so sampling can produce such ids.
    const skip = options?.skipSpecialTokens === true;
    const kept = ids.filter((id) => this.core.id_to_token(id) !== undefined && !(skip && this.specialTokenIds.has(id)));
    // The library refuses an empty list; transformers returns ''.
    if (kept.length === 0) return '';
    return this.core.decode(kept, { skip_special_tokens: false });
  }

  tokenToId(token: string): number | undefined {
    return this.core.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.core.id_to_token(id);
  }

  applyChatTemplate(messages: ChatMessage[], options: ChatTemplateOptions = {}): string {
    const templates = this.files.templates;
    if (templates === null) {
      throw new Error(
        `no chat template in ${this.files.dir}: tokenizer_config.json has no "chat_template" field and there is no chat_template.jinja`,
      );
    }
    const hasTools = options.extra?.tools !== undefined && options.extra.tools !== null;
    const template = selectChatTemplate(templates, options.templateName, hasTools);
    return renderChatTemplate(template, join(this.files.dir, templates.source), messages, options, this.templateVars);
  }

  /**
   * Writes the tokenizer files it was loaded from (see `TOKENIZER_FILE_NAMES`) byte for byte, so the
   * folder loads in transformers as the original did. Only an EOS read from the model's
   * generation_config.json / config.json is written into tokenizer_config.json, so the folder
   * loads on its own.
   */
  async save(dir: string): Promise<void> {
    const { config, specialsMap, originals } = this.files;
    await mkdir(dir, { recursive: true });
    const eosFromModelFiles = specialTokenText(config.eos_token) === null && specialTokenText(specialsMap?.eos_token) === null;
    for (const [name, bytes] of originals) {
      if (name === 'tokenizer_config.json' && eosFromModelFiles) continue;
      await writeFile(join(dir, name), bytes);
    }
    if (eosFromModelFiles) {
      await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...config, eos_token: this.eosToken }, null, 2) + '\n');
    }
  }
}

function resolveToken(core: HFTokenizerCore, text: string, where: string, dir: string): ResolvedToken {
  const id = core.token_to_id(text);
  if (id === undefined) {
    throw new Error(`${where}: ${JSON.stringify(text)} is not in the vocabulary of tokenizer.json (in ${dir})`);
  }
  return { text, id };
}

/** The EOS text: tokenizer_config.json, special_tokens_map.json, then the id in generation_config.json / config.json. */
async function resolveEos(files: TokenizerFiles, core: HFTokenizerCore): Promise<ResolvedToken> {
  const fromConfig = specialTokenText(files.config.eos_token);
  if (fromConfig !== null) return resolveToken(core, fromConfig, 'tokenizer_config.json field "eos_token"', files.dir);
  const fromMap = specialTokenText(files.specialsMap?.eos_token);
  if (fromMap !== null) return resolveToken(core, fromMap, 'special_tokens_map.json field "eos_token"', files.dir);
  for (const name of ['generation_config.json', 'config.json']) {
    const ids = await readJsonFile(files.dir, name, modelTokenIdsSchema);
    const id = firstTokenId(ids?.eos_token_id);
    if (id === null) continue;
    const text = core.id_to_token(id);
    if (text === undefined) {
      throw new Error(`${name} field "eos_token_id": ${id} is not an id of tokenizer.json (in ${files.dir})`);
    }
    return { text, id };
  }
  throw new Error(
    `no EOS token in ${files.dir}: set "eos_token" in tokenizer_config.json (or special_tokens_map.json, or "eos_token_id" in generation_config.json)`,
  );
}

function resolveOptional(
  files: TokenizerFiles,
  core: HFTokenizerCore,
  field: 'pad_token' | 'bos_token' | 'unk_token',
): ResolvedToken | null {
  const fromConfig = specialTokenText(files.config[field]);
  if (fromConfig !== null) return resolveToken(core, fromConfig, `tokenizer_config.json field "${field}"`, files.dir);
  const fromMap = specialTokenText(files.specialsMap?.[field]);
  if (fromMap !== null) return resolveToken(core, fromMap, `special_tokens_map.json field "${field}"`, files.dir);
  return null;
}

/**
 * Loads the tokenizer of a Hugging Face checkpoint directory.
 *
 * Reads `tokenizer.json` (required) and `tokenizer_config.json`; special tokens fall back to
 * `special_tokens_map.json`, the EOS also to `eos_token_id` of `generation_config.json` /
 * `config.json`. The pad token falls back to the EOS (as CoMLRL's `ensure_pad_token` does). The
 * chat template comes from `chat_template.jinja`, else the `chat_template` field (a string or a list
 * of `{name, template}`), else `chat_template.json`. Errors name the file and field at fault.
 */
export async function loadTokenizer(dir: string): Promise<Tokenizer> {
  const files = await readTokenizerFiles(dir);
  const core = buildCore(files, coreConfig(files));
  const eos = await resolveEos(files, core);
  const pad = resolveOptional(files, core, 'pad_token') ?? eos;
  const bos = resolveOptional(files, core, 'bos_token');
  const modelUnk = files.tokenizerJson.model.unk_token;
  const unk =
    resolveOptional(files, core, 'unk_token') ??
    (modelUnk ? resolveToken(core, modelUnk, 'tokenizer.json field "model.unk_token"', dir) : null);
  const additionalField = files.config.additional_special_tokens !== undefined ? 'tokenizer_config.json' : 'special_tokens_map.json';
  const additional = (files.config.additional_special_tokens ?? files.specialsMap?.additional_special_tokens ?? []).map((t, i) =>
    resolveToken(core, typeof t === 'string' ? t : t.content, `${additionalField} field "additional_special_tokens.${i}"`, dir),
  );
  return new HFTokenizer(files, core, eos, pad, bos, unk, additional);
}
