// A request the server refuses, with the HTTP status and the fields of OpenAI's error object
// ({"error": {"message", "type", "param", "code"}}, which vLLM's ErrorResponse and SGLang's OpenAI routes send;
// SGLang's native routes send {"error": {"message"}}, a subset of it).

export class ApiError extends Error {
  override name = 'ApiError';

  constructor(
    readonly status: number,
    message: string,
    /** The request field at fault, as OpenAI names it ("messages", "sampling_params.top_p"); null for none. */
    readonly param: string | null = null,
    readonly type = status === 404 ? 'NotFoundError' : status >= 500 ? 'InternalServerError' : 'BadRequestError',
  ) {
    super(message);
  }

  /** OpenAI's error body; code is the HTTP status, as vLLM sends it. */
  body(): { error: { message: string; type: string; param: string | null; code: number } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status } };
  }
}

/** A 400 naming the field and what it must be. */
export function badRequest(param: string, expected: string, got: unknown): ApiError {
  const shown = got === undefined ? 'nothing' : (JSON.stringify(got)?.slice(0, 80) ?? String(got));
  return new ApiError(400, `${param}: expected ${expected}, got ${shown}`, param);
}
