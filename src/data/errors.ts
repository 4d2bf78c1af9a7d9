/** Where in a dataset file a problem was found. */
export interface DatasetErrorLocation {
  /** The file (or directory) being read. */
  file: string;
  /** Split name, when the file holds several. */
  split?: string;
  /** Row number within the split, counted from 1 as a reader counts rows (before any slice: `train[2:]` starts at row 3). */
  row?: number;
  /** Dotted path of the offending field inside the row. */
  field?: string;
}

/** A dataset could not be read or a row failed its schema; the message names file, row and field. */
export class DatasetError extends Error {
  readonly location: DatasetErrorLocation;

  constructor(location: DatasetErrorLocation, detail: string) {
    super(`${describeLocation(location)}: ${detail}`);
    this.name = 'DatasetError';
    this.location = location;
  }
}

/** A location in words: `file, split 'x', row N, field 'f'` (the parts known). */
export function describeLocation(loc: DatasetErrorLocation): string {
  const parts = [loc.file];
  if (loc.split !== undefined) parts.push(`split '${loc.split}'`);
  if (loc.row !== undefined) parts.push(`row ${loc.row}`);
  if (loc.field !== undefined) parts.push(`field '${loc.field}'`);
  return parts.join(', ');
}
