
      import * as tf from '@tensorflow/tfjs';
      import '@tensorflow/tfjs-backend-wasm';
      await tf.setBackend('wasm');
      const keep = [];
      try { for (let i = 0; i < 64; i++) keep.push(tf.zeros([64 * 1024 * 1024])); console.log('NO CRASH'); }
      catch (err) { console.log('MESSAGE ' + (err instanceof Error ? err.name + ': ' + err.message : String(err))); }