import { cs463 } from './cs463.js';
import type { ReaderFormat } from './format.js';

/** Reader formats by their subject token; a new format is a new adapter module plus one line here. */
export const READER_FORMATS: ReadonlyMap<string, ReaderFormat> = new Map([cs463].map((format) => [format.name, format]));
