import { tryLoadOptional } from '../util/optional-dependency';

/**
 * OpenAPI decorators from `@nestjs/swagger` when the app has it installed, no-ops otherwise: the admin
 * API documents itself in the app's Swagger document without making swagger a hard dependency. @internal
 */
type AnyDecorator = (...args: any[]) => any;
const swagger = tryLoadOptional<Record<string, (...args: any[]) => AnyDecorator>>('@nestjs/swagger');
const pick =
  (name: string) =>
  (...args: any[]): AnyDecorator =>
    swagger?.[name] ? swagger[name](...args) : () => undefined;

export const ApiTags = pick('ApiTags');
export const ApiOperation = pick('ApiOperation');
export const ApiOkResponse = pick('ApiOkResponse');
export const ApiBadRequestResponse = pick('ApiBadRequestResponse');
export const ApiNotFoundResponse = pick('ApiNotFoundResponse');
export const ApiConflictResponse = pick('ApiConflictResponse');
export const ApiUnauthorizedResponse = pick('ApiUnauthorizedResponse');
export const ApiForbiddenResponse = pick('ApiForbiddenResponse');
export const ApiParam = pick('ApiParam');
export const ApiProperty = pick('ApiProperty');
export const ApiPropertyOptional = pick('ApiPropertyOptional');
export const ApiSecurity = pick('ApiSecurity');
export const ApiExcludeController = pick('ApiExcludeController');
export const ApiExcludeEndpoint = pick('ApiExcludeEndpoint');
