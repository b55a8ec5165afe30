// The trainer's configuration, exported from one place: the schema of verl's keys with their defaults
// (config/schema.ts), the Hydra/OmegaConf-style loader (config/loader.ts), verl and Search-R1 keys accepted
// beside the schema (config/verl-compat.ts) and the cross-key checks and batch sizes (config/checks.ts).
export type { PpoConfig } from './config/schema.ts';
export { WRITTEN_LOGGERS, SERVICE_LOGGERS } from './config/schema.ts';
export { ConfigError } from './config/errors.ts';
export {
  loadConfig,
  composeConfig,
  configToYaml,
  formatHelp,
  type ConfigLayer,
  type ComposedConfig,
  type LoadConfigOptions,
} from './config/loader.ts';
export {
  batchSizes,
  usesCritic,
  usesPfPpo,
  usesRolloutServers,
  actorLoraSettings,
  criticLoraSettings,
  type BatchSizes,
} from './config/checks.ts';
export {
  weightDtype,
  frozenStorage,
  trainedModelDtypeNotes,
  actorUsesLora,
  actorBaseStorage,
  rolloutDtype,
  computeDtype,
  type FrozenModel,
} from './config/model-dtype.ts';
