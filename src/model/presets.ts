/**
 * config.json of published checkpoints, as shipped on the Hugging Face Hub, for
 * `createTinyModel({ like })`: real shapes and hyper-parameters with random weights.
 *
 * Sources (values copied field by field, nothing derived):
 * - Qwen/Qwen3-0.6B: https://huggingface.co/Qwen/Qwen3-0.6B/raw/main/config.json, as quoted in
 *   public code found through the project's search index (a repository's constants file quoting
 *   that URL, and the Qwen3 0.6B model-card excerpt "## model config"); the shapes agree with
 *   torchtune's `qwen3_0_6b` builder (28 layers, 16 query / 8 KV heads of 128, hidden 1024,
 *   intermediate 3072, rope base 1e6, tied embeddings, q/k norm).
 * - Qwen/Qwen3-1.7B, Qwen/Qwen2.5-3B, meta-llama/Llama-3.2-1B: the files under
 *   test/fixtures/model/real-configs/ (their config.json as published).
 */

/** Published checkpoints whose config.json `createTinyModel` can copy. */
export type TinyModelPreset = 'qwen3-0.6b' | 'qwen3-1.7b' | 'qwen2.5-3b' | 'llama-3.2-1b';

/** The preset names, in the order the CLI lists them. */
export const TINY_MODEL_PRESETS: readonly TinyModelPreset[] = ['qwen3-0.6b', 'qwen3-1.7b', 'qwen2.5-3b', 'llama-3.2-1b'];

/** The checkpoint each preset copies. */
export const PRESET_SOURCE: Readonly<Record<TinyModelPreset, string>> = {
  'qwen3-0.6b': 'Qwen/Qwen3-0.6B',
  'qwen3-1.7b': 'Qwen/Qwen3-1.7B',
  'qwen2.5-3b': 'Qwen/Qwen2.5-3B',
  'llama-3.2-1b': 'meta-llama/Llama-3.2-1B',
};

/** The published config.json of each preset (a fresh copy per call). */
export function presetConfig(preset: TinyModelPreset): Record<string, unknown> {
  return structuredClone(PRESET_CONFIGS[preset]);
}

const PRESET_CONFIGS: Record<TinyModelPreset, Record<string, unknown>> = {
  'qwen3-0.6b': {
    architectures: ['Qwen3ForCausalLM'],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: 151643,
    eos_token_id: 151645,
    head_dim: 128,
    hidden_act: 'silu',
    hidden_size: 1024,
    initializer_range: 0.02,
    intermediate_size: 3072,
    max_position_embeddings: 40960,
    max_window_layers: 28,
    model_type: 'qwen3',
    num_attention_heads: 16,
    num_hidden_layers: 28,
    num_key_value_heads: 8,
    rms_norm_eps: 1e-6,
    rope_scaling: null,
    rope_theta: 1000000,
    sliding_window: null,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    transformers_version: '4.51.0',
    use_cache: true,
    use_sliding_window: false,
    vocab_size: 151936,
  },
  'qwen3-1.7b': {
    architectures: ['Qwen3ForCausalLM'],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: 151643,
    eos_token_id: 151645,
    head_dim: 128,
    hidden_act: 'silu',
    hidden_size: 2048,
    initializer_range: 0.02,
    intermediate_size: 6144,
    max_position_embeddings: 40960,
    max_window_layers: 28,
    model_type: 'qwen3',
    num_attention_heads: 16,
    num_hidden_layers: 28,
    num_key_value_heads: 8,
    rms_norm_eps: 1e-6,
    rope_scaling: null,
    rope_theta: 1000000,
    sliding_window: null,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    transformers_version: '4.51.0',
    use_cache: true,
    use_sliding_window: false,
    vocab_size: 151936,
  },
  'qwen2.5-3b': {
    architectures: ['Qwen2ForCausalLM'],
    attention_dropout: 0.0,
    bos_token_id: 151643,
    eos_token_id: 151645,
    hidden_act: 'silu',
    hidden_size: 2048,
    initializer_range: 0.02,
    intermediate_size: 11008,
    max_position_embeddings: 32768,
    max_window_layers: 70,
    model_type: 'qwen2',
    num_attention_heads: 16,
    num_hidden_layers: 36,
    num_key_value_heads: 2,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000.0,
    sliding_window: 32768,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    transformers_version: '4.43.1',
    use_cache: true,
    use_sliding_window: false,
    vocab_size: 151936,
  },
  'llama-3.2-1b': {
    architectures: ['LlamaForCausalLM'],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: 128000,
    eos_token_id: [128001, 128008, 128009],
    head_dim: 64,
    hidden_act: 'silu',
    hidden_size: 2048,
    initializer_range: 0.02,
    intermediate_size: 8192,
    max_position_embeddings: 131072,
    mlp_bias: false,
    model_type: 'llama',
    num_attention_heads: 32,
    num_hidden_layers: 16,
    num_key_value_heads: 8,
    pretraining_tp: 1,
    rms_norm_eps: 1e-5,
    rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' },
    rope_theta: 500000.0,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    transformers_version: '4.45.0.dev0',
    use_cache: true,
    vocab_size: 128256,
  },
};
