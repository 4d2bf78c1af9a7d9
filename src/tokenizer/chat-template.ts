/**
 * Chat templates: where a checkpoint keeps them, which one to use, and rendering them the way
 * transformers does (Jinja with trim_blocks/lstrip_blocks, special tokens as variables,
 * `raise_exception`, `tojson`), with @huggingface/jinja.
 */
import { Template } from '@huggingface/jinja';
import type { ChatMessage, ChatTemplateOptions } from './types.js';

/** Where a chat template came from, so `save` writes it back to the same place. */
export type ChatTemplateSource = 'chat_template.jinja' | 'chat_template.json' | 'tokenizer_config.json';

/** The templates of a checkpoint: one unnamed template, or several named ones. */
export interface ChatTemplates {
  source: ChatTemplateSource;
  /** Named templates; a single template is stored under `default`. */
  byName: Map<string, string>;
}

/** Builds {@link ChatTemplates} from a `chat_template` value (string or list of `{name, template}`). */
export function chatTemplatesFrom(
  value: string | { name: string; template: string }[],
  source: ChatTemplateSource,
): ChatTemplates {
  const byName = new Map<string, string>();
  if (typeof value === 'string') byName.set('default', value);
  else for (const { name, template } of value) byName.set(name, template);
  return { source, byName };
}

/**
 * Picks the template to render: the named one when asked for, else `tool_use` when tools are
 * given and the checkpoint has it (as transformers does), else `default`.
 */
export function selectChatTemplate(templates: ChatTemplates, name: string | undefined, hasTools: boolean): string {
  const names = [...templates.byName.keys()];
  if (name !== undefined) {
    const t = templates.byName.get(name);
    if (t === undefined) {
      throw new Error(`chat template "${name}" not found in ${templates.source}; it has: ${names.join(', ')}`);
    }
    return t;
  }
  if (hasTools && templates.byName.has('tool_use')) return templates.byName.get('tool_use') as string;
  const t = templates.byName.get('default');
  if (t === undefined) {
    throw new Error(
      `${templates.source} has several chat templates (${names.join(', ')}) and none is named "default": pass options.templateName`,
    );
  }
  return t;
}

/** Special-token strings a template may use as variables (`bos_token`, `eos_token`, ...). */
export interface TemplateSpecialTokens {
  bos_token?: string;
  eos_token?: string;
  pad_token?: string;
  unk_token?: string;
  additional_special_tokens?: string[];
}

const compiled = new Map<string, Template>();

function compile(source: string, origin: string): Template {
  let t = compiled.get(source);
  if (t === undefined) {
    try {
      t = new Template(source);
    } catch (e) {
      throw new Error(`${origin}: chat_template does not parse as Jinja: ${(e as Error).message}`);
    }
    compiled.set(source, t);
  }
  return t;
}

/**
 * Renders `template` for `messages`. Variables: `messages`, `add_generation_prompt` (default true),
 * `enable_thinking` only when set, the special tokens, then `options.extra` (e.g. `tools`).
 */
export function renderChatTemplate(
  template: string,
  origin: string,
  messages: ChatMessage[],
  options: ChatTemplateOptions,
  specials: TemplateSpecialTokens,
): string {
  const t = compile(template, origin);
  // Drop undefined fields so `is defined` tests in templates see them as absent.
  const plainMessages = messages.map((m) =>
    Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)),
  );
  const vars: Record<string, unknown> = { ...specials };
  vars.messages = plainMessages;
  vars.add_generation_prompt = options.addGenerationPrompt ?? true;
  if (options.enableThinking !== undefined) vars.enable_thinking = options.enableThinking;
  for (const [k, v] of Object.entries(options.extra ?? {})) if (v !== undefined) vars[k] = v;
  try {
    return t.render(vars);
  } catch (e) {
    throw new Error(`chat template of ${origin} failed to render: ${(e as Error).message}`);
  }
}
