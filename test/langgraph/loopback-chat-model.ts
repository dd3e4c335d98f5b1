/**
 * A LangChain chat model on an OpenAI-compatible endpoint, built the way `@langchain/openai`'s
 * `ChatOpenAI` is (that package is not a dependency of this repository): the `openai` client with its
 * own retries off (`maxRetries: 0`), every request sent through the model's `AsyncCaller`
 * (`this.caller.call`), which retries it up to the model's `maxRetries` (LangChain's default: 6). The
 * tests point it at the loopback server of test/helpers/scripted-openai.ts.
 */
import OpenAI from 'openai';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import type {
  BaseChatModelCallOptions,
  BaseChatModelParams,
  BindToolsInput,
} from '@langchain/core/language_models/chat_models';
import { AIMessage, BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { convertToOpenAITool } from '@langchain/core/utils/function_calling';

interface LoopbackCallOptions extends BaseChatModelCallOptions {
  tools?: unknown[];
}

export interface LoopbackChatOpenAIFields extends BaseChatModelParams {
  /** The OpenAI-compatible base URL (`${server.url}/v1`). */
  baseURL: string;
  model?: string;
}

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/** LangChain messages as the chat-completions API takes them. */
function wire(messages: BaseMessage[]): ChatMessage[] {
  return messages.map((m): ChatMessage => {
    const content = typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
    const type = m.getType();
    if (type === 'system') return { role: 'system', content };
    if (type === 'tool')
      return { role: 'tool', content, tool_call_id: (m as unknown as { tool_call_id: string }).tool_call_id };
    if (type === 'ai') {
      const calls = (m as AIMessage).tool_calls ?? [];
      return {
        role: 'assistant',
        content,
        ...(calls.length
          ? {
              tool_calls: calls.map((c) => ({
                id: c.id ?? '',
                type: 'function' as const,
                function: { name: c.name, arguments: JSON.stringify(c.args) },
              })),
            }
          : {}),
      };
    }
    return { role: 'user', content };
  });
}

export class LoopbackChatOpenAI extends BaseChatModel<LoopbackCallOptions> {
  private readonly client: OpenAI;
  private readonly model: string;

  constructor(fields: LoopbackChatOpenAIFields) {
    super(fields);
    this.model = fields.model ?? 'scripted-1';
    this.client = new OpenAI({ apiKey: 'test', baseURL: fields.baseURL, maxRetries: 0 });
  }

  _llmType(): string {
    return 'loopback-openai';
  }

  override bindTools(tools: BindToolsInput[], kwargs?: Partial<LoopbackCallOptions>) {
    return this.withConfig({ tools: tools.map((t) => convertToOpenAITool(t)), ...kwargs });
  }

  async _generate(messages: BaseMessage[], options: this['ParsedCallOptions']): Promise<ChatResult> {
    const res = await this.caller.call(() =>
      this.client.chat.completions.create(
        {
          model: this.model,
          messages: wire(messages),
          ...(options.tools?.length ? { tools: options.tools as OpenAI.Chat.ChatCompletionTool[] } : {}),
        },
        { signal: options.signal },
      ),
    );
    const choice = res.choices[0];
    const message = new AIMessage({
      id: res.id,
      content: choice.message.content ?? '',
      tool_calls: (choice.message.tool_calls ?? []).flatMap((c) =>
        c.type === 'function'
          ? [
              {
                id: c.id,
                name: c.function.name,
                args: JSON.parse(c.function.arguments),
                type: 'tool_call' as const,
              },
            ]
          : [],
      ),
      usage_metadata: res.usage
        ? {
            input_tokens: res.usage.prompt_tokens,
            output_tokens: res.usage.completion_tokens,
            total_tokens: res.usage.total_tokens,
          }
        : undefined,
      response_metadata: { model_name: res.model, finish_reason: choice.finish_reason },
    });
    return {
      generations: [{ text: typeof message.content === 'string' ? message.content : '', message }],
      llmOutput: res.usage
        ? {
            tokenUsage: {
              promptTokens: res.usage.prompt_tokens,
              completionTokens: res.usage.completion_tokens,
              totalTokens: res.usage.total_tokens,
            },
          }
        : undefined,
    };
  }
}
