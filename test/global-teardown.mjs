export default async function globalTeardown() {
  const server = globalThis.__EMBEDDED_PG__;
  if (server) await server.stop();
}
