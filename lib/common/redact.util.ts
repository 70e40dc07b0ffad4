/**
 * A URL (or anything a user put where a URL goes) fit for an error message: the user:password part
 * and the query (ioredis reads `?password=` too) are masked. Everything up to the last `@` goes:
 * a password may itself contain `@`, `/` or `:` when it is not percent-encoded.
 */
export function redactUrl(value: string): string {
  let out = value;
  const at = out.lastIndexOf('@');
  if (at >= 0) {
    const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/*/.exec(out)?.[0] ?? '';
    out = `${scheme.length <= at ? scheme : ''}***@${out.slice(at + 1)}`;
  }
  const query = out.search(/[?#]/);
  if (query >= 0) out = `${out.slice(0, query)}?***`;
  return out;
}

/** Free text (a client's error message) with any `scheme://user:password@` in it masked. */
export function scrubCredentials(text: string): string {
  return text.replace(/([A-Za-z][A-Za-z0-9+.-]*:\/\/)\S*@/g, '$1***@');
}

/** A client's error, as text fit for a message. */
export const errorText = (error: unknown): string => scrubCredentials((error as Error)?.message ?? String(error));

/** A user-supplied value for an error message, never echoing a credential it may carry. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(redactUrl(value));
  if (Array.isArray(value)) return `[${value.map(describeValue).join(', ')}]`;
  if (value === null) return 'null';
  // Objects are not printed at all: they are where passwords live (ioredis / etcd3 options).
  return typeof value === 'object' ? 'an object' : typeof value === 'function' ? 'a function' : String(value);
}
