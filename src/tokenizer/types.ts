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
  /** Whether a chat template is available. */
  readonly hasChatTemplate: boolean;
  /** Ids of all special (added, special=true) tokens. */
  readonly specialTokenIds: ReadonlySet<number>;

  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** Renders the chat template to text (tokenize with {@link Tokenizer.encode}). */
  applyChatTemplate(messages: ChatMessage[], options?: ChatTemplateOptions): string;
  /** Writes tokenizer.json, tokenizer_config.json (and special_tokens_map.json) to dir. */
  save(dir: string): Promise<void>;
}
