import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const root = join(__dirname, '..', '..')

/** The first ```ts block of a recipe under docs/recipes/. */
export function recipeCode(name: string): string {
  const markdown = readFileSync(join(root, 'docs', 'recipes', `${name}.md`), 'utf8')
  const block = /```ts\n([\s\S]*?)```/.exec(markdown)
  if (block === null) throw new Error(`docs/recipes/${name}.md has no ts block`)
  return block[1]!
}

/** A recipe's code as the tests run it: test/recipes/<name>.ts, which must be the document's block as it is. */
export function recipeFile(name: string): string {
  return readFileSync(join(root, 'test', 'recipes', `${name}.ts`), 'utf8')
}
