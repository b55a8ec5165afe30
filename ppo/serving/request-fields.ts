// Reading a JSON request body field by field: each reader names the field (with its path, as OpenAI's `param`
// does) and what it must be, and throws a 400 otherwise. Absent and null fields take the default.
import { ApiError, badRequest } from './api-error.ts';

export type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export class RequestFields {
  constructor(
    private readonly body: JsonObject,
    /** Prefix of every field's name in errors ("sampling_params."). */
    private readonly path = '',
  ) {}

  static of(body: unknown, what = 'the request body'): RequestFields {
    if (!isObject(body)) throw new ApiError(400, `${what}: expected a JSON object`);
    return new RequestFields(body);
  }

  name(key: string): string {
    return this.path + key;
  }

  has(key: string): boolean {
    return this.body[key] !== undefined && this.body[key] !== null;
  }

  raw(key: string): unknown {
    return this.body[key];
  }

  /** The nested object under `key`, its fields named `key.field` (empty when absent). */
  object(key: string): RequestFields {
    const value = this.body[key];
    if (value === undefined || value === null) return new RequestFields({}, `${this.name(key)}.`);
    if (!isObject(value)) throw badRequest(this.name(key), 'an object', value);
    return new RequestFields(value, `${this.name(key)}.`);
  }

  number(
    key: string,
    fallback: number,
    range: { min?: number; max?: number; integer?: boolean; above?: number } = {},
  ): number {
    if (!this.has(key)) return fallback;
    const value = this.body[key];
    const { min, max, integer, above } = range;
    const expected = [
      integer ? 'an integer' : 'a number',
      min !== undefined ? `≥ ${min}` : '',
      above !== undefined ? `> ${above}` : '',
      max !== undefined ? `≤ ${max}` : '',
    ]
      .filter(Boolean)
      .join(' ');
    if (
      typeof value !== 'number' ||
      !Number.isFinite(value) ||
      (integer && !Number.isInteger(value)) ||
      (min !== undefined && value < min) ||
      (max !== undefined && value > max) ||
      (above !== undefined && value <= above)
    ) {
      throw badRequest(this.name(key), expected, value);
    }
    return value;
  }

  optionalInteger(key: string): number | null {
    return this.has(key) ? this.number(key, 0, { integer: true }) : null;
  }

  boolean(key: string, fallback: boolean): boolean {
    if (!this.has(key)) return fallback;
    const value = this.body[key];
    if (typeof value !== 'boolean') throw badRequest(this.name(key), 'true or false', value);
    return value;
  }

  string(key: string, fallback: string): string {
    if (!this.has(key)) return fallback;
    const value = this.body[key];
    if (typeof value !== 'string') throw badRequest(this.name(key), 'a string', value);
    return value;
  }

  /** A string or a list of strings (OpenAI's `stop`), as a list. */
  strings(key: string): string[] {
    if (!this.has(key)) return [];
    const value = this.body[key];
    if (typeof value === 'string') return [value];
    if (Array.isArray(value) && value.every((s) => typeof s === 'string')) return value as string[];
    throw badRequest(this.name(key), 'a string or a list of strings', value);
  }

  integers(key: string): number[] {
    if (!this.has(key)) return [];
    const value = this.body[key];
    if (Array.isArray(value) && value.every((id) => Number.isInteger(id))) return value as number[];
    throw badRequest(this.name(key), 'a list of integers', value);
  }

  /** A field this server does not implement: refused unless absent or at the value that means "off". */
  unsupported(key: string, off: unknown, why: string): void {
    if (this.has(key) && this.body[key] !== off)
      throw new ApiError(400, `${this.name(key)}: ${why} (got ${JSON.stringify(this.body[key])})`, this.name(key));
  }
}
