import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { extname, join, relative, resolve, sep } from 'node:path'
import { type Browser, chromium, type Page } from 'playwright-core'
import { REPO_ROOT } from '../harness/built-packages'
import { describeWith, findBinary } from './external-tools'

// The docs site as a visitor sees it: built with VitePress (as `npm run docs:build` builds it), served over
// HTTP on 127.0.0.1, and every page loaded in headless Chromium (Debian's package, driven by playwright-core).
// A page fails on a console error, an uncaught exception, a failed request, an image that does not load, or
// an internal link whose page or #anchor does not exist. The site's search must find "blockDuration".
// Screenshots of the home page and of one guide go to .tmp/screenshots/ (git-ignored).

const DOCS = join(REPO_ROOT, 'docs')
const SHOTS = join(REPO_ROOT, '.tmp', 'screenshots')
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.png': 'image/png',
}

/** What the test reads of an <img> and an <a> in the page (the DOM types are not in this project's lib). */
interface ImageLike {
  complete: boolean
  naturalWidth: number
  src: string
}
interface LinkLike {
  href: string
  getAttribute(name: string): string | null
}

/** The pages of the site: every Markdown file of docs/ but the generated includes (`_*.md`), as the URL VitePress gives it. */
function sourcePages(dir = DOCS): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return name.startsWith('.') || name === 'public' ? [] : sourcePages(path)
    if (!name.endsWith('.md') || name.startsWith('_')) return []
    const url = `/${relative(DOCS, path).split(sep).join('/')}`
    return [url.endsWith('index.md') ? url.slice(0, -'index.md'.length) : url.replace(/\.md$/, '.html')]
  })
}

/** A static server for the built site: a path is a file of `root`, a folder its index.html; anything else is a 404. */
function serve(root: string): Promise<Server> {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)
    let file = resolve(root, `.${path}`)
    if (file.startsWith(root) && existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html')
    if (!file.startsWith(root) || !existsSync(file)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found')
      return
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file))
  })
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done(server)))
}

describeWith(['chromium'], 'apt-get install chromium; .ci/run does')('the built docs site in headless Chromium', () => {
  let out: string
  let server: Server
  let browser: Browser
  let origin: string

  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), 'tollgate-docs-'))
    // What `npm run docs:build` runs, into a folder of this test's own.
    const generate = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'docs-performance.mjs')], { cwd: REPO_ROOT, encoding: 'utf8' })
    expect(generate.status).toBe(0)
    const vitepress = join(REPO_ROOT, 'node_modules', 'vitepress', 'bin', 'vitepress.js')
    const build = spawnSync(process.execPath, [vitepress, 'build', 'docs', '--outDir', out], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 240_000,
    })
    if (build.status !== 0) throw new Error(`vitepress build failed:\n${build.stdout}\n${build.stderr}`)
    server = await serve(out)
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    browser = await chromium.launch({
      executablePath: findBinary('chromium')!,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    })
  }, 300_000)

  afterAll(async () => {
    await browser?.close()
    server?.close()
    if (out) rmSync(out, { recursive: true, force: true })
  })

  /** Loads `path` and returns what went wrong on it, and the internal links it has. */
  async function visit(page: Page, path: string): Promise<{ problems: string[]; links: string[] }> {
    const problems: string[] = []
    const onConsole = (m: { type(): string; text(): string }) => {
      if (m.type() === 'error') problems.push(`console error: ${m.text()}`)
    }
    const onError = (e: Error) => problems.push(`uncaught: ${e.message}`)
    // ERR_ABORTED is the browser cancelling a prefetch when the test moves on to the next page.
    const onFailed = (r: { url(): string; failure(): { errorText: string } | null }) => {
      if (r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`)
    }
    const onResponse = (r: { url(): string; status(): number }) => {
      if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`)
    }
    page.on('console', onConsole)
    page.on('pageerror', onError)
    page.on('requestfailed', onFailed)
    page.on('response', onResponse)
    try {
      const response = await page.goto(`${origin}${path}`, { waitUntil: 'networkidle' })
      if (response?.status() !== 200) problems.push(`status ${response?.status()}`)
      const broken = await page.$$eval('img', (imgs) =>
        (imgs as unknown as ImageLike[]).filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src),
      )
      for (const src of broken) problems.push(`image does not load: ${src}`)
      const links = await page.$$eval('a[href]', (as) => (as as unknown as LinkLike[]).map((a) => a.href))
      return { problems, links: links.filter((l) => l.startsWith(origin)).map((l) => l.slice(origin.length)) }
    } finally {
      page.off('console', onConsole)
      page.off('pageerror', onError)
      page.off('requestfailed', onFailed)
      page.off('response', onResponse)
    }
  }

  it('loads every page with no console error, and every internal link leads to a page and an anchor that exist', async () => {
    const page = await browser.newPage()
    const problems: string[] = []
    const ids = new Map<string, Set<string>>() // page -> the ids on it
    const anchored: Array<{ from: string; target: string; hash: string }> = []
    const queue = ['/']
    while (queue.length > 0) {
      const path = queue.shift()!
      if (ids.has(path)) continue
      const found = await visit(page, path)
      problems.push(...found.problems.map((p) => `${path}: ${p}`))
      ids.set(path, new Set(await page.$$eval('[id]', (els) => els.map((e) => e.id))))
      for (const link of found.links) {
        const [target = '/', hash] = link.split('#')
        if (target.startsWith('/assets/') || target.startsWith('/bench/')) continue // files, loaded as images or styles
        queue.push(target)
        if (hash) anchored.push({ from: path, target, hash: decodeURIComponent(hash) })
      }
      expect(ids.size).toBeLessThan(500) // a crawl that never ends is a bug of this test
    }
    await page.close()
    for (const { from, target, hash } of anchored)
      if (!ids.get(target)?.has(hash)) problems.push(`${from}: link to ${target}#${hash}: no such anchor`)
    expect(problems).toEqual([])
    // Every page of docs/ is reachable from the home page through the site's links.
    expect(sourcePages().filter((p) => !ids.has(p))).toEqual([])
  }, 300_000)

  it('finds "blockDuration" with the search box, and takes the screenshots', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    await page.goto(`${origin}/`, { waitUntil: 'networkidle' })
    mkdirSync(SHOTS, { recursive: true })
    await page.screenshot({ path: join(SHOTS, 'home.png'), fullPage: true })

    await page.click('#local-search button')
    await page.fill('#localsearch-input', 'blockDuration')
    const results = page.locator('#localsearch-list li a')
    await results.first().waitFor({ timeout: 10_000 })
    const hrefs = await results.evaluateAll((as) => (as as unknown as LinkLike[]).map((a) => a.getAttribute('href')))
    expect(hrefs).toEqual(expect.arrayContaining([expect.stringMatching(/^\/(reference\/options|guides\/lockouts-and-lists)\.html#/)]))

    await page.goto(`${origin}/guides/redis.html`, { waitUntil: 'networkidle' })
    await page.screenshot({ path: join(SHOTS, 'guide-redis.png'), fullPage: false })
    await page.close()
  }, 60_000)
})
