export * from './types.js';
export { loadTokenizer } from './load.js';
export { checkTokenizerFitsModel, tokenizerDifference } from './check.js';
export { TOKENIZER_FILE_NAMES } from './files.js';
export * from './tiny.js';
export { QWEN3_STYLE_CHAT_TEMPLATE } from './qwen3-style-template.js';
