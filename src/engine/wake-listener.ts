/**
 * The LISTEN connection lives in the store now (src/store/wake-listener.ts); this path stays until the
 * worker imports it from there. @internal
 */
export { WakeListener } from '../store/wake-listener';
