import { ValidateBy, ValidationOptions } from 'class-validator';
import { schemaNameProblem } from './schema-name';

/** class-validator check of `database.schema` (see `schemaNameProblem`). */
export function IsSchemaName(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isSchemaName',
      validator: {
        validate: (value: unknown) => schemaNameProblem(value) === undefined,
        defaultMessage: (args) => schemaNameProblem(args?.value) ?? '',
      },
    },
    options,
  );
}
