import type { CausalLM } from '../model/types.js';
import type { Tokenizer } from '../tokenizer/types.js';

/** How an agent turns an observation (prompt text) into model input. */
export interface ChatFormat {
  /** Optional system message placed before the observation. */
  system?: string;
  /** Qwen3's `enable_thinking` template switch. */
  enableThinking?: boolean;
}

/**
 * One agent of the LLM Dec-POMDP: a causal LM with its own tokenizer. Agents may differ in
 * architecture, size and vocabulary; homogeneous agents are separate copies.
 */
export interface Agent {
  readonly name: string;
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  /** Render observations through the tokenizer's chat template (false: raw text). */
  readonly chat: ChatFormat | false;
  /**
   * The frozen reference policy of the reference KL (`reference_kl_enabled`) and of MADPO; the
   * caller owns it. It must share the agent's tokenizer (it scores the agent's token ids): a
   * reference with fewer ids than the agent's tokenizer is refused when a trainer is built, and
   * with {@link Agent.referenceTokenizer} given the two tokenizers are compared id by id. Absent:
   * a LoRA agent's base with the adapter off, else a frozen copy the trainer makes of the agent's
   * weights when it is built.
   */
  readonly reference?: CausalLM;
  /**
   * The tokenizer of `reference`'s folder: given, a trainer refuses a reference whose tokenizer
   * differs from the agent's (see `tokenizerDifference`).
   */
  readonly referenceTokenizer?: Tokenizer;
}
