/** Step and command bodies reach the world (world.ts) over HTTP: DIFF_WORLD_URL, in any process. */
const world = () => process.env.DIFF_WORLD_URL!;

export async function post<T>(path: string, body: unknown): Promise<T> {
  const res = await fetch(`${world()}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`world ${path}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

export async function getJson<T>(path: string): Promise<T> {
  return (await (await fetch(`${world()}${path}`)).json()) as T;
}
