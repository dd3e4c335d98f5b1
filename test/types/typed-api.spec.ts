import * as path from 'node:path';
import * as ts from 'typescript';

/**
 * Compiles test/types/*.types.ts with their `@ts-expect-error <fragment>` markers removed: each marked
 * line must fail with a message containing its fragment (so a wrong call fails for the reason it names,
 * not for a typo in the test), and nothing else may fail (the `Equal` assertions and the right calls).
 */
const ROOT = path.resolve(__dirname, '../..');
const FILE = path.join(__dirname, 'typed-api.types.ts');
const MARK = /^\s*\/\/ @ts-expect-error (.+)$/;

function compile(file: string, text: string): readonly ts.Diagnostic[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    path.join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  )!;
  const host = ts.createCompilerHost(config.options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) =>
    path.resolve(name) === file ? ts.createSourceFile(name, text, lang) : read(name, lang, ...rest);
  const program = ts.createProgram([file], { ...config.options, noEmit: true }, host);
  return ts.getPreEmitDiagnostics(program);
}

describe('the public API types (tsc on test/types/typed-api.types.ts)', () => {
  const source = ts.sys.readFile(FILE)!;
  const lines = source.split('\n');
  const expected = new Map<number, string>(); // 0-based line of the call -> fragment
  const stripped = lines.map((line, i) => {
    const m = MARK.exec(line);
    if (!m) return line;
    expected.set(i + 1, m[1].trim());
    return '';
  });
  const diagnostics = compile(FILE, stripped.join('\n'));
  const byLine = new Map<number, string[]>();
  for (const d of diagnostics) {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1;
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    const file = d.file ? path.relative(ROOT, d.file.fileName) : '?';
    const key = d.file && path.resolve(d.file.fileName) === FILE ? where : -1;
    byLine.set(key, [...(byLine.get(key) ?? []), `${file}:${where + 1}: ${text}`]);
  }

  it('has wrong calls to check', () => {
    expect(expected.size).toBeGreaterThanOrEqual(12);
  });

  it('compiles every right call and type assertion', () => {
    const unexpected = [...byLine].filter(([line]) => !expected.has(line)).flatMap(([, m]) => m);
    expect(unexpected).toEqual([]);
  });

  it.each([...expected].map(([line, fragment]) => [line + 1, fragment, lines[line].trim()]))(
    'line %i fails with "%s": %s',
    (line, fragment) => {
      const messages = byLine.get((line as number) - 1) ?? [];
      expect(messages.join('\n')).toContain(fragment);
    },
  );
});
