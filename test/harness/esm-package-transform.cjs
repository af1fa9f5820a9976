// Jest runs the suite as CommonJS (ts-jest), and NestJS 12 ships ES modules only (Node loads them for a
// CommonJS app through require(esm), which Jest's own module registry does not do). This transform turns
// those packages' files into CommonJS for the tests: `import.meta.url` (their one use of import.meta) becomes
// the file's URL, then TypeScript's transpiler rewrites the import and export statements.
const { pathToFileURL } = require('node:url')
const ts = require('typescript')

module.exports = {
  process(source, filename) {
    const text = source.replace(/\bimport\.meta\.url\b/g, JSON.stringify(pathToFileURL(filename).href))
    const out = ts.transpileModule(text, {
      fileName: filename,
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        allowJs: true,
        esModuleInterop: true,
        sourceMap: false,
      },
    })
    return { code: out.outputText }
  },
}
