/** A version-4 UUID made from 16 bytes of a seed (a recorded value derived inside a step). */
export function uuidFromSeed(seed: Buffer): string {
  const b = Buffer.from(seed.subarray(0, 16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
