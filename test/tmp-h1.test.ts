import * as fs from 'node:fs';
import { it } from 'vitest';
import { initBackend } from '../src/backend/index.js';
import { loadCausalLM, TfCausalLM } from '../src/model/index.js';
it('x', async () => {
  await initBackend('wasm');
  for (const name of fs.readdirSync('test/fixtures/model')) {
    const dir = `test/fixtures/model/${name}`;
    const cases = JSON.parse(fs.readFileSync(`${dir}/cases.json`, 'utf8'));
    const exp: number[][] = JSON.parse(fs.readFileSync(`${dir}/expected.json`, 'utf8'));
    const m = await loadCausalLM(dir);
    const got = await m.tokenLogProbs(cases.map((c: any) => c.prompt), cases.map((c: any) => c.completion));
    let maxd = 0;
    got.forEach((r, i) => r.forEach((v, j) => (maxd = Math.max(maxd, Math.abs(v - exp[i][j])))));
    let m2d = 0;
    if (m.decoderConfig.ropeScaling) {
      const m2 = new TfCausalLM({ ...m.decoderConfig, ropeScaling: null }, m.config, new Map(m.weightNames().map((n, i) => [n, { shape: m.trainableVariables()[i].shape, data: m.trainableVariables()[i].dataSync() as Float32Array }])));
      const g2 = await m2.tokenLogProbs(cases.map((c: any) => c.prompt), cases.map((c: any) => c.completion));
      g2.forEach((r, i) => r.forEach((v, j) => (m2d = Math.max(m2d, Math.abs(v - exp[i][j])))));
    }
    console.log(name, 'maxdiff', maxd.toExponential(2), 'noscale', m2d);
    m.dispose();
  }
});
