/**
 * Types for what the one codec does to a value (src/util/codec.ts), so that the compiler sees what a
 * reader gets back: a `Date` is stored (and handed back, the first execution included) as its ISO
 * string, `toJSON()` is applied, functions, symbols and `undefined` fields are dropped.
 */

/** `true` when `T` is `any`. */
type IsAny<T> = 0 extends 1 & T ? true : false;

/** Keys of `T` whose values survive JSON (not functions, symbols or bigints). */
type JsonKeys<T> = {
  [K in keyof T]-?: K extends symbol
    ? never
    : [Exclude<T[K], undefined>] extends [((...args: any[]) => any) | symbol | bigint]
      ? never
      : K;
}[keyof T];

/**
 * What a value of type `T` becomes once stored as JSON and read back: `Date` (anything with a
 * `toJSON()`) becomes what `toJSON()` returns, function and symbol fields disappear, an optional field
 * stays optional. `Jsonify<{ at: Date; n: number }>` is `{ at: string; n: number }`.
 */
export type Jsonify<T> =
  IsAny<T> extends true
    ? any
    : unknown extends T
      ? unknown
      : T extends { toJSON(...args: any[]): infer R }
        ? Jsonify<R>
        : T extends string | number | boolean | null
          ? T
          : T extends undefined | symbol | bigint | ((...args: any[]) => any)
            ? never
            : T extends readonly unknown[]
              ? { [K in keyof T]: Jsonify<T[K]> }
              : T extends object
                ? { [K in keyof T as K extends JsonKeys<T> ? K : never]: Jsonify<T[K]> }
                : never;

/** `true` when a `T` reads back as a `T` (plain JSON data), `false` when storing changes it. */
export type IsStoredUnchanged<T> =
  IsAny<T> extends true ? true : [T] extends [Jsonify<T>] ? ([Jsonify<T>] extends [T] ? true : false) : false;

/** What a reader of a stored `T` gets: `T` itself when it is plain JSON, else `Jsonify<T>`. */
export type Stored<T> = IsStoredUnchanged<T> extends true ? T : Jsonify<T>;

/**
 * A parameter that must be stored unchanged: `T` when it is plain JSON; otherwise a type no value has,
 * whose one required property tells why (`start` of a workflow whose input type holds a `Date`: the
 * workflow would get a string where its type says `Date`; declare the field as `string`).
 */
export type StorableAs<T> =
  IsStoredUnchanged<T> extends true
    ? T
    : Jsonify<T> & {
        'this type does not survive storage as JSON (a Date becomes a string, functions are dropped): declare it as the JSON it is stored as': never;
      };

/**
 * A workflow's signals, name to payload type: `{ approve: { by: string }; reject: { reason: string } }`.
 * Declared once, as the type argument of the workflow's context: `run(input, ctx: RunContext<Signals>)`.
 */
export type SignalMap = object;

/**
 * The signals of an untyped context (`RunContext` without a type argument): any name, payload unknown.
 * `any`, so that a typed context passes where a plain `RunContext` is asked for (a helper of yours), and
 * `currentRun()`'s context where a typed one is.
 */
export type AnySignals = any;

/** The signal names of a map: every string for `AnySignals`, else its keys. */
export type SignalName<S extends SignalMap> = string extends keyof S ? string : Extract<keyof S, string>;

/** The names `waitForSignal<T>(name)` with an explicit payload type takes: any on an untyped context, none on a typed one. */
export type UntypedSignalName<S extends SignalMap> = string extends keyof S ? string : never;

/** The payload type of signal `K` (unknown for `AnySignals`). */
export type SignalPayload<S extends SignalMap, K extends string> = string extends keyof S
  ? unknown
  : K extends keyof S
    ? S[K]
    : never;
