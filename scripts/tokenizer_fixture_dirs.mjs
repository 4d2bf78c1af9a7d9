// Writes the tiny tokenizer directories that test/tokenizer*.test.ts and
// scripts/tokenizer_fixtures.py read. Run after `npm run build` (it imports the built package):
//   node scripts/tokenizer_fixture_dirs.mjs && /usr/bin/python3 scripts/tokenizer_fixtures.py
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { readFile } from 'node:fs/promises';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const build = process.env.COMLRL_TOKENIZER_BUILD ?? join(root, 'dist/src/tokenizer/index.js');
const { writeTinyTokenizer } = await import(build);
const out = join(root, 'test/fixtures/tokenizer');

// The word list of the word-level fixture (the test passes the same list).
const words = JSON.parse(await readFile(join(out, 'words.json'), 'utf8'));

console.log('bpe', await writeTinyTokenizer(join(out, 'tiny-bpe'), { kind: 'bpe' }));
console.log('word', await writeTinyTokenizer(join(out, 'tiny-word'), { kind: 'word', words }));
