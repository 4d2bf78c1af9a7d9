/**
 * HouseBuild (LLM_Collab_Minecraft `house_build`): command validation, the world and match score,
 * the spider state, the reward, the first-turn prompts and the six follow-up feedback modes.
 */
export * from './commands.js';
export * from './feedback/index.js';
export * from './layers.js';
export * from './prompts.js';
export * from './python-random.js';
export * from './reward.js';
export * from './rpg.js';
export * from './task.js';
export * from './world.js';
