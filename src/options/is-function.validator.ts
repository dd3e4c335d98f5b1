import { ValidateBy, ValidationOptions } from 'class-validator';

/** class-validator has no function check; options such as `redact` need one. */
export function IsFunctionValue(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isFunctionValue',
      validator: {
        validate: (value: unknown) => typeof value === 'function',
        defaultMessage: (args) => `${args?.property} must be a function`,
      },
    },
    options,
  );
}
