/** One chat message for {@link Tokenizer.applyChatTemplate}. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** Assistant reasoning for templates that render it (Qwen3 `<think>` history). */
  reasoning_content?: string;
}

export interface ChatTemplateOptions {
  /** Append the assistant header so the model continues as the assistant. Default true. */
  addGenerationPrompt?: boolean;
  /** Qwen3's `enable_thinking` switch; passed to the template as is. */
  enableThinking?: boolean;
  /** Extra template variables (e.g. `tools`). */
  extra?: Record<string, unknown>;
  /**
   * Which template to use when the checkpoint has several named ones (a list of `{name, template}`);
   * default: `tool_use` when `extra.tools` is given and present, else `default`.
   */
  templateName?: string;
}

/** A Hugging Face tokenizer loaded from tokenizer.json + tokenizer_config.json. */
export interface Tokenizer {
  /** Size of the id space (base vocab plus added tokens). */
  readonly vocabSize: number;
  readonly eosTokenId: number;
  readonly eosToken: string;
  /** Pad id; falls back to the EOS id when the tokenizer has none (as CoMLRL does). */
  readonly padTokenId: number;
  readonly bosTokenId: number | null;
  /** Text of the pad token (the EOS text when the tokenizer has no pad). */
  readonly padToken: string;
  /** Text of the BOS token, or null. */
  readonly bosToken: string | null;
  /** Whether a chat template is available. */
  readonly hasChatTemplate: boolean;
  /**
   * Ids of all special tokens: added tokens marked special, the named ones (eos, pad, bos, unk)
   * and `additional_special_tokens`. `decode(..., { skipSpecialTokens: true })` drops these.
   */
  readonly specialTokenIds: ReadonlySet<number>;

  /**
   * Token ids of `text`. Special-token texts inside it become their ids. `addSpecialTokens`
   * (default true, as in transformers) runs the tokenizer's post-processor, e.g. Llama's BOS.
   */
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  /** Text of `ids` (an empty list gives ''); `skipSpecialTokens` defaults to false. */
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** Id of a token's text (added tokens included), or undefined when it is not in the vocabulary. */
  tokenToId(token: string): number | undefined;
  /** Text of a token id, or undefined when the id is not in the vocabulary. */
  idToToken(id: number): string | undefined;
  /** Renders the chat template to text (tokenize with {@link Tokenizer.encode}). */
  applyChatTemplate(messages: ChatMessage[], options?: ChatTemplateOptions): string;
  /**
   * Writes the tokenizer files of the folder it was loaded from (tokenizer.json, tokenizer_config.json,
   * special_tokens_map.json, vocab/merges files, chat template files: those it had) to dir, byte
   * for byte, so `loadTokenizer(dir)` and transformers' `AutoTokenizer.from_pretrained(dir)` load
   * it alone (an EOS taken from the model's config files is added to tokenizer_config.json).
   */
  save(dir: string): Promise<void>;
}
