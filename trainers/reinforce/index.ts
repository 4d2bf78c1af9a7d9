/** The REINFORCE family: MAREINFORCE, MAReMax and MARLOO (MAGRPO with other advantage baselines). */
export * from './config.js';
export * from './trainer.js';
export * from './spec.js';
