/** One problem of a config file: the dotted key path and the message. */
export interface ConfigFileIssue {
  readonly key: string;
  readonly message: string;
}
