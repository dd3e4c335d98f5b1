/**
 * The support-triage agent: the AI SDK's own `generateText` with tools and a `stopWhen` loop, as a
 * durable run. The only durable parts are the two wrappers:
 *
 * - `durableModel`: each model turn a recorded `model` step, never requested again once committed;
 * - `durableTools`: `lookup_order` and `lookup_customer` recorded `tool` steps (read-only); the
 *   refund and the email commands keyed by the model's toolCallId, applied once. A refund whose outcome
 *   a crash hid is settled by asking the payment vendor by key (`inDoubt: 'lookup'`); an email by
 *   sending it again with the same key (`'retry-with-key'`: the mail vendor deduplicates keys).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs } from 'ai';
import { Inject } from '@nestjs/common';
import { DurableWorkflow, RunContext } from '../../src'; // in an app: 'nestjs-durable-execution'
import { durableModel, durableTools } from '../../src/ai-sdk'; // in an app: 'nestjs-durable-execution/ai-sdk'
import { TRIAGE_SETTINGS, TriageTools, type TriageSettings } from './triage.tools';

/** A support ticket, as `POST /tickets` takes it. */
export interface Ticket {
  ticketId: string;
  from: string;
  text: string;
}

export interface TriageResult {
  ticketId: string;
  answer: string;
  /** The tool calls of every turn, in order. */
  toolCalls: Array<{ turn: number; id: string; tool: string }>;
  /** Model turns the loop took. */
  turns: number;
  totalTokens: number | undefined;
}

@DurableWorkflow('support-triage', { maxAttempts: 10 })
export class SupportTriageWorkflow {
  constructor(
    @Inject(TRIAGE_SETTINGS) private readonly settings: TriageSettings,
    private readonly triage: TriageTools,
  ) {}

  async run(ticket: Ticket, ctx: RunContext): Promise<TriageResult> {
    const model = createOpenAICompatible({
      name: 'loopback',
      baseURL: this.settings.modelBaseURL,
      apiKey: process.env.TRIAGE_MODEL_API_KEY ?? 'sk-loopback',
      includeUsage: true,
    })('triage-1');

    const result = await generateText({
      model: durableModel(ctx, model, { retry: { maxAttempts: 3, initialDelayMs: 100 } }),
      tools: durableTools(ctx, this.triage.tools(), {
        commands: {
          refund_payment: { inDoubt: 'lookup', lookup: (key) => this.triage.lookupRefund(key) },
          email_customer: { inDoubt: 'retry-with-key' },
        },
      }),
      stopWhen: stepCountIs(8),
      maxRetries: 0, // one retry owner: the model step's policy
      system:
        'You are a support agent. Look the order up, refund it if it arrived damaged, tell the customer.',
      messages: [{ role: 'user', content: `From: ${ticket.from}\n\n${ticket.text}` }],
    });

    return {
      ticketId: ticket.ticketId,
      answer: result.text,
      toolCalls: result.steps.flatMap((s, i) =>
        s.toolCalls.map((c) => ({ turn: i + 1, id: c.toolCallId, tool: c.toolName })),
      ),
      turns: result.steps.length,
      totalTokens: result.totalUsage.totalTokens,
    };
  }
}
