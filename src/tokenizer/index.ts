export * from './types.js';
export { loadTokenizer } from './load.js';
export * from './tiny.js';
export { QWEN3_STYLE_CHAT_TEMPLATE } from './qwen3-style-template.js';
