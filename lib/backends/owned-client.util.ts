/**
 * The client a backend runs on: the application's own when its options carry one (never closed
 * by us), else one `open()`s now — which the backend then owns and closes in `close()`.
 */
export async function ownedClient<C>(given: C | undefined, open: () => Promise<C>): Promise<{ client: C; ownsClient: boolean }> {
  return given === undefined ? { client: await open(), ownsClient: true } : { client: given, ownsClient: false };
}
