import { askTarget, followRedirects, prepareRetry, redirectOf, TRYAGAIN_PAUSE_MS } from '../../packages/core/src/stores/redis/redirects'

// The classification and the one retry of stores/redis/redirects.ts, without a server: which failures mean
// "the command did not run, the slot map is stale", and that a retry never goes out past the deadline.

// Deadlines here are generous (1 s) except where the deadline is the point: timers on a loaded
// machine run late, and these tests are about what is retried, not about speed.
const replyError = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' })
const execAbort = (...previous: Error[]) =>
  Object.assign(new Error('EXECABORT Transaction discarded because of previous errors.'), { previousErrors: previous })

describe('redirectOf', () => {
  it.each([
    ['MOVED', replyError('MOVED 3999 127.0.0.1:6381'), 'moved'],
    ['ASK', replyError('ASK 3999 127.0.0.1:6381'), 'moved'],
    ['CLUSTERDOWN', replyError('CLUSTERDOWN The cluster is down'), 'moved'],
    ['TRYAGAIN', replyError('TRYAGAIN Multiple keys request during rehashing of slot'), 'tryagain'],
    ['ioredis giving up on a MOVED', new Error('Too many Cluster redirections. Last error: ReplyError: MOVED 12 127.0.0.1:7000'), 'moved'],
    [
      'ioredis giving up on a TRYAGAIN',
      new Error('Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys'),
      'tryagain',
    ],
    ['EXECABORT caused by MOVED', execAbort(replyError('MOVED 1 127.0.0.1:7001'), replyError('MOVED 1 127.0.0.1:7001')), 'moved'],
    ['EXECABORT caused by ASK and TRYAGAIN', execAbort(replyError('ASK 1 127.0.0.1:7001'), replyError('TRYAGAIN x')), 'tryagain'],
  ])('%s is a redirect (%s)', (_name, error, expected) => {
    expect(redirectOf(error)).toBe(expected)
  })

  it.each([
    ['a timeout', new Error('Redis did not answer within 50 ms')],
    ['a closed connection', new Error('Connection is closed.')],
    ['NOPERM', replyError("NOPERM User limited has no permissions to run the 'pexpire' command")],
    ['OOM', replyError("OOM command not allowed when used memory > 'maxmemory'.")],
    ['EXECABORT caused by NOPERM', execAbort(replyError('NOPERM no permissions'))],
    ['EXECABORT caused by a MOVED and an OOM', execAbort(replyError('MOVED 1 127.0.0.1:7001'), replyError('OOM full'))],
    ['EXECABORT without its causes', new Error('EXECABORT Transaction discarded because of previous errors.')],
    ['a message that only mentions MOVED', new Error('something MOVED 1 x')],
    ['not an error', 'MOVED 1 127.0.0.1:7001'],
  ])('%s is not retried', (_name, error) => {
    expect(redirectOf(error)).toBeUndefined()
  })
})

describe('askTarget', () => {
  it.each([
    ['an ASK', replyError('ASK 3999 127.0.0.1:6381'), '127.0.0.1:6381'],
    [
      'ioredis giving up on an ASK',
      new Error('Too many Cluster redirections. Last error: ReplyError: ASK 12 10.0.0.2:7000'),
      '10.0.0.2:7000',
    ],
    [
      'EXECABORT caused by ASKs to one node',
      execAbort(replyError('ASK 1 127.0.0.1:7001'), replyError('ASK 1 127.0.0.1:7001')),
      '127.0.0.1:7001',
    ],
  ])('names the node of %s', (_name, error, expected) => {
    expect(askTarget(error)).toBe(expected)
  })

  it.each([
    ['a MOVED', replyError('MOVED 3999 127.0.0.1:6381')],
    ['EXECABORT caused by an ASK and a MOVED', execAbort(replyError('ASK 1 127.0.0.1:7001'), replyError('MOVED 1 127.0.0.1:7001'))],
    ['EXECABORT caused by ASKs to two nodes', execAbort(replyError('ASK 1 127.0.0.1:7001'), replyError('ASK 1 127.0.0.1:7002'))],
    ['EXECABORT caused by an ASK and a TRYAGAIN', execAbort(replyError('ASK 1 127.0.0.1:7001'), replyError('TRYAGAIN x'))],
    ['EXECABORT without its causes', new Error('EXECABORT Transaction discarded because of previous errors.')],
    ['not an error', 'ASK 1 127.0.0.1:7001'],
  ])('names no node for %s', (_name, error) => {
    expect(askTarget(error)).toBeUndefined()
  })
})

describe('followRedirects', () => {
  it('refreshes the slot map and sends once more after a MOVED', async () => {
    const refreshed: string[] = []
    const owner = {
      refreshSlotsCache: (cb?: () => void) =>
        setTimeout(() => {
          refreshed.push('refreshed')
          cb?.()
        }, 1),
    }
    const send = jest
      .fn()
      .mockRejectedValueOnce(execAbort(replyError('MOVED 1 127.0.0.1:7001')))
      .mockResolvedValueOnce('ok')
    await expect(followRedirects(send, owner, Date.now() + 1000)).resolves.toBe('ok')
    expect(send).toHaveBeenCalledTimes(2)
    expect(refreshed).toEqual(['refreshed'])
  })

  it('sends only once more, whatever the second answer', async () => {
    const moved = replyError('MOVED 1 127.0.0.1:7001')
    const send = jest.fn().mockRejectedValue(moved)
    await expect(followRedirects(send, {}, Date.now() + 1000)).rejects.toBe(moved)
    expect(send).toHaveBeenCalledTimes(2)
  })

  it('pauses before trying a TRYAGAIN again', async () => {
    const times: number[] = []
    const send = jest.fn(async () => {
      times.push(performance.now())
      if (times.length === 1) throw replyError('TRYAGAIN Multiple keys request during rehashing of slot')
      return 'ok'
    })
    await expect(followRedirects(send, {}, Date.now() + 1000)).resolves.toBe('ok')
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(TRYAGAIN_PAUSE_MS - 1)
  })

  it('never sends after the deadline: a refresh that outlasts it ends the call', async () => {
    const owner = { refreshSlotsCache: (_cb?: () => void) => {} } // never calls back
    const moved = replyError('MOVED 1 127.0.0.1:7001')
    const send = jest.fn().mockRejectedValue(moved)
    const started = Date.now()
    await expect(followRedirects(send, owner, started + 20)).rejects.toBe(moved)
    expect(send).toHaveBeenCalledTimes(1)
    // It gave up at the deadline (less the margin a send needs), not when the refresh ended (never).
    expect(Date.now() - started).toBeLessThan(500)
  })

  it('does not retry when too little of the deadline is left for a TRYAGAIN pause', async () => {
    expect(await prepareRetry('tryagain', {}, Date.now() + TRYAGAIN_PAUSE_MS)).toBe(false)
    expect(await prepareRetry('moved', {}, Date.now() - 1)).toBe(false)
  })

  it('does not retry what may have run', async () => {
    const send = jest.fn().mockRejectedValue(new Error('Connection is closed.'))
    await expect(followRedirects(send, {}, Date.now() + 50)).rejects.toThrow('Connection is closed.')
    expect(send).toHaveBeenCalledTimes(1)
  })
})
