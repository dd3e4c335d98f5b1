import { BadRequestException } from '@nestjs/common';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { toStoredJson } from '../util/codec';
import { adminValidationPipe } from './admin-validation.pipe';
import { CancelRunDto, SendSignalDto } from './dto/run-actions.dto';
import { CreateScheduleDto } from './dto/schedule.dto';

/** A plain object of `n` keys whose property reads are counted. */
function counted(n: number): { value: Record<string, number>; reads: () => number } {
  const target: Record<string, number> = {};
  for (let i = 0; i < n; i++) target[`key${i}`] = i;
  let reads = 0;
  const value = new Proxy(target, {
    get(t, k, r) {
      if (typeof k === 'string' && k.startsWith('key')) reads++;
      return Reflect.get(t, k, r);
    },
  });
  return { value, reads: () => reads };
}

/**
 * Issue 46, part 5: a body's size is checked before it is walked. The admin pipe walked every JSON field
 * whole for its depth (a 500,000-key payload: every value read) before the codec's size cap refused it,
 * and a schedule's `input` went through class-transformer's copy. Now a @RawJson field (signal payload,
 * command result, schedule input) is left to the codec, whose one walk checks depth and size and stops
 * at the cap.
 */
describe('admin validation pipe', () => {
  const pipe = adminValidationPipe();
  const WIDE = 500_000;

  it('does not walk a @RawJson field: a 500,000-key signal payload is refused by the codec after a part of it', async () => {
    const wide = counted(WIDE);
    const dto = (await pipe.transform(
      { name: 'go', payload: wide.value },
      { type: 'body', metatype: SendSignalDto },
    )) as SendSignalDto;
    expect(wide.reads()).toBe(0);
    expect(dto.payload).toBe(wide.value); // as parsed
    expect(() => toStoredJson(dto.payload, 'payload of signal "go"', 1 << 20)).toThrow(PayloadTooLargeError);
    expect(wide.reads()).toBeGreaterThan(0);
    expect(wide.reads()).toBeLessThan(WIDE / 2);
  });

  it("a schedule's input is a @RawJson field: handed over as parsed, not copied or walked", async () => {
    const wide = counted(WIDE);
    const dto = (await pipe.transform(
      { name: 'n', kind: 'k', cron: '0 * * * *', input: wide.value },
      { type: 'body', metatype: CreateScheduleDto },
    )) as CreateScheduleDto;
    expect(wide.reads()).toBe(0);
    expect(dto.input).toBe(wide.value);
    await expect(
      pipe.transform(
        { name: 'n', kind: 'k', cron: '0 * * * *', input: 'text' },
        { type: 'body', metatype: CreateScheduleDto },
      ),
    ).rejects.toThrow(BadRequestException);
  });

  it('still refuses a field that is not @RawJson nested deeper than stored JSON may be', async () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 2000; i++) deep = [deep];
    const err = await pipe
      .transform({ reason: deep }, { type: 'body', metatype: CancelRunDto })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestException);
    expect(JSON.stringify((err as BadRequestException).getResponse())).toContain('nested deeper than 256');
  });
});
