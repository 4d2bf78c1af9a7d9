/** CentralizedMAGRPO: one joint policy for every role, split by the task's centralized adapter. */
export * from './config.js';
export * from './trainer.js';
export * from './spec.js';
