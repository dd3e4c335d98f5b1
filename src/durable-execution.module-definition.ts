import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { DurableExecutionModuleOptions } from './options/durable-execution-options.interface';

/** forRoot / forRootAsync (useFactory | useClass | useExisting) and the `isGlobal` extra. */
export const {
  ConfigurableModuleClass: DurableExecutionConfigurableModule,
  MODULE_OPTIONS_TOKEN: RAW_OPTIONS_TOKEN,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<DurableExecutionModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createDurableExecutionOptions')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
