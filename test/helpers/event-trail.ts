import { DEFAULT_NAMES } from '../../src/store/durable-names';
import { EVENT_TRAIL } from '../../src/store/run-history';

/**
 * Every run's event trail as `RunRepository.events()` reads it, as a relation for a test's SQL (`from
 * ${TRAIL} e`): the event rows and the `run.checkpoint_saved` events a step commit writes in its
 * checkpoint row (no event row of its own), a rewind's set-aside ones too.
 */
export const TRAIL = EVENT_TRAIL(DEFAULT_NAMES);
