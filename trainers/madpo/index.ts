/** MADPO: multi-agent DPO from the joint reward's preferences (config, pair selection and loss, trainer). */
export * from './config.js';
export * from './preference.js';
export * from './trainer.js';
export * from './spec.js';
