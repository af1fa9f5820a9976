import { defineConfig } from 'vitepress'

// The docs site: `npm run docs:dev` serves it, `npm run docs:build` writes docs/.vitepress/dist.
// Every ```ts block of these pages is type-checked by `npm run check:snippets`, and the site is loaded
// page by page in headless Chromium by test/docs/browser.test.ts.
export default defineConfig({
  title: 'Tollgate',
  description: 'Rate limiting for Express, Fastify, Koa and NestJS: exact under concurrency, calm when Redis fails.',
  cleanUrls: false,
  lastUpdated: false,
  // Generated includes (the performance tables, scripts/docs-performance.mjs) are parts of a page, not pages.
  srcExclude: ['**/_*.md'],
  head: [['link', { rel: 'icon', type: 'image/svg+xml', href: '/favicon.svg' }]],
  themeConfig: {
    logo: '/favicon.svg',
    search: { provider: 'local' },
    socialLinks: [{ icon: 'github', link: 'https://github.com/tollgate/tollgate' }],
    editLink: { pattern: 'https://github.com/tollgate/tollgate/edit/main/docs/:path', text: 'Edit this page' },
    outline: [2, 3],
    nav: [
      { text: 'Getting started', link: '/getting-started/' },
      { text: 'Guides', link: '/guides/redis' },
      { text: 'Recipes', link: '/recipes/login-brute-force' },
      { text: 'Reference', link: '/reference/options' },
      { text: 'Performance', link: '/performance/' },
    ],
    sidebar: [
      {
        text: 'Getting started',
        items: [
          { text: 'Install and try it', link: '/getting-started/' },
          { text: 'Express', link: '/getting-started/express' },
          { text: 'Fastify', link: '/getting-started/fastify' },
          { text: 'Koa', link: '/getting-started/koa' },
          { text: 'NestJS', link: '/getting-started/nestjs' },
          { text: 'Hono', link: '/getting-started/hono' },
          { text: 'Next.js', link: '/getting-started/nextjs' },
          { text: 'Cloudflare Workers', link: '/getting-started/workers' },
          { text: 'Bun', link: '/getting-started/bun' },
          { text: 'Deno', link: '/getting-started/deno' },
          { text: 'Outside HTTP', link: '/getting-started/outside-http' },
        ],
      },
      {
        text: 'Guides',
        items: [
          { text: 'Redis and Redis Cluster', link: '/guides/redis' },
          { text: 'When Redis fails', link: '/guides/failures' },
          { text: 'Quota leasing', link: '/guides/leasing' },
          { text: 'Protecting the service', link: '/guides/adaptive-concurrency' },
          { text: 'Proxies and client IPs', link: '/guides/proxies' },
          { text: 'Algorithms: how to choose', link: '/guides/algorithms' },
          { text: 'Lockouts and lists', link: '/guides/lockouts-and-lists' },
          { text: 'Monitoring', link: '/guides/monitoring' },
          { text: 'Class-based controllers', link: '/guides/decorators' },
          { text: 'Migrating from another limiter', link: '/guides/migrating' },
          { text: 'Writing a store', link: '/guides/writing-a-store' },
        ],
      },
      {
        text: 'Recipes',
        items: [
          { text: 'Login brute force', link: '/recipes/login-brute-force' },
          { text: 'API plan tiers', link: '/recipes/api-plan-tiers' },
          { text: 'A global and a per-route limit', link: '/recipes/global-and-route' },
          { text: 'An LLM token budget', link: '/recipes/llm-token-budget' },
          { text: 'GraphQL query cost', link: '/recipes/graphql-cost' },
          { text: 'A concurrency cap', link: '/recipes/concurrency-cap' },
          { text: 'A user within a tenant', link: '/recipes/user-within-tenant' },
          { text: 'A job queue', link: '/recipes/job-queue' },
        ],
      },
      {
        text: 'Reference',
        items: [
          { text: 'Options', link: '/reference/options' },
          { text: 'Limiter methods and events', link: '/reference/limiter' },
          { text: 'Stores', link: '/reference/stores' },
          { text: 'Headers', link: '/reference/headers' },
          { text: 'Error codes', link: '/reference/errors' },
        ],
      },
      {
        text: 'Performance',
        items: [
          { text: 'Results', link: '/performance/' },
          { text: 'Notes from the runs', link: '/performance/details' },
        ],
      },
      { text: 'Development', link: '/development' },
    ],
  },
})
