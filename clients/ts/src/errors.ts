/** Every error the client raises on purpose: the message says what was expected and what came. */
export class ShuffleDPClientError extends Error {
  override name = "ShuffleDPClientError";
}

/** A task document is malformed, of an unknown kind, or not the pinned one. */
export class TaskError extends ShuffleDPClientError {
  override name = "TaskError";
}

/** A message, key or ciphertext does not follow the wire format. */
export class WireError extends ShuffleDPClientError {
  override name = "WireError";
}

/** A value, token or option the caller gave is not acceptable. */
export class InputError extends ShuffleDPClientError {
  override name = "InputError";
}

/**
 * The randomizer drew more messages than the task's max_messages_per_submission (an honest
 * client does so with probability at most 1e-30): this user does not submit, a dropout whose
 * probability does not depend on the value.
 */
export class MessageBoundError extends ShuffleDPClientError {
  override name = "MessageBoundError";
}

/** The page is not a secure context (HTTPS, or http://localhost): WebCrypto is unavailable. */
export class SecureContextError extends ShuffleDPClientError {
  override name = "SecureContextError";
}

/** The shuffler refused a submission (a final 4xx answer). */
export class SubmissionRejectedError extends ShuffleDPClientError {
  override name = "SubmissionRejectedError";
  constructor(
    readonly status: number,
    readonly reason: string,
    detail: string,
  ) {
    super(`shuffler refused the submission (HTTP ${status}, ${reason}): ${detail}`);
  }
}

/** The shuffler could not be reached (or kept failing) until the retry deadline. */
export class ShufflerUnavailableError extends ShuffleDPClientError {
  override name = "ShufflerUnavailableError";
}
