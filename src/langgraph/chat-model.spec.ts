import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { durableChatModel } from './chat-model';

/**
 * A model that sends every request through its AsyncCaller, as LangChain's integrations do. `sent`
 * counts its requests (a getter on a shared box: the wrapper calls `_generate` on an object of its own).
 */
class CountingModel extends BaseChatModel {
  private readonly box = { sent: 0 };
  get sent() {
    return this.box.sent;
  }
  constructor(
    private readonly answer: (n: number) => Promise<string>,
    fields: { maxRetries?: number } = {},
  ) {
    super(fields);
  }
  _llmType() {
    return 'counting';
  }
  async _generate(): Promise<ChatResult> {
    const text = await this.caller.call(() => this.answer(++this.box.sent));
    return { generations: [{ text, message: new AIMessage(text) }] };
  }
}

const failing = (status: number) => () =>
  Promise.reject(Object.assign(new Error(`status ${status}`), { status }));
const quick = { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2 };

describe('durableChatModel: one retry policy for a LangChain chat model', () => {
  it('a persistent 500 is sent maxAttempts times in all (the model retries none), its error final', async () => {
    const model = new CountingModel(failing(500), { maxRetries: 6 });
    const durable = durableChatModel(model, { retry: quick });
    const err = await durable.invoke([new HumanMessage('hi')]).catch((e: unknown) => e);
    expect(err).toMatchObject({ message: 'status 500', retryable: false });
    expect(model.sent).toBe(3);
    expect((durable as unknown as { caller: { maxRetries: number } }).caller.maxRetries).toBe(0);
    // The model itself is not changed: used without the wrapper, LangChain's retries are its own.
    expect((model as unknown as { caller: { maxRetries: number } }).caller.maxRetries).toBe(6);
  });

  it("an error the model's rules refuse to retry (a 400) is sent once", async () => {
    const model = new CountingModel(failing(400));
    const err = await durableChatModel(model, { retry: quick })
      .invoke('hi')
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ message: 'status 400', retryable: false });
    expect(model.sent).toBe(1);
  });

  it('a call that answers after a failure returns the answer; a per-call maxRetries is ignored', async () => {
    const model = new CountingModel((n) => (n < 2 ? failing(503)() : Promise.resolve('fine')));
    const out = await durableChatModel(model, { retry: quick }).invoke('hi', { maxRetries: 5 });
    expect(out.content).toBe('fine');
    expect(model.sent).toBe(2);
  });

  it('an attempt past timeoutMs is aborted and retried, then fails naming the model', async () => {
    const model = new CountingModel(() => new Promise<string>(() => undefined));
    const err = await durableChatModel(model, { retry: { ...quick, maxAttempts: 2 }, timeoutMs: 20 })
      .invoke('hi')
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ message: 'model:CountingModel: no answer within 20 ms', retryable: false });
    expect(model.sent).toBe(2);
  });

  it('refuses what is not a chat model', () => {
    expect(() => durableChatModel({} as never)).toThrow(TypeError);
  });
});
