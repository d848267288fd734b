/** An error the user caused (bad path, bad file): the CLI prints its message on one line and exits 2. */
export class UsageError extends Error {
  override name = "UsageError";
}
