import { EventEmitter } from 'node:events'
import { Limiter } from '@tollgate/core'

// A limiter's listener methods are its own (core imports no node:events), with EventEmitter's
// semantics: each sequence below is run on both and must leave the same trace.

type Emitterish = Pick<EventEmitter, 'on' | 'once' | 'off' | 'emit' | 'listenerCount' | 'removeAllListeners'>

function trace(emitter: Emitterish): string[] {
  const seen: string[] = []
  const a = (v: unknown) => void seen.push(`a:${v}`)
  const b = (v: unknown) => void seen.push(`b:${v}`)
  emitter.on('x', a)
  emitter.once('x', b)
  emitter.on('x', a) // twice: runs twice, `off` removes the one added last
  emitter.emit('x', 1)
  emitter.emit('x', 2)
  emitter.off('x', a)
  emitter.emit('x', 3)
  seen.push(`count:${emitter.listenerCount('x')}`)
  // A listener that removes another during an emit: the emit in progress still calls it.
  emitter.on('y', () => {
    emitter.removeAllListeners('y')
    seen.push('first')
  })
  emitter.on('y', () => void seen.push('second'))
  emitter.emit('y')
  emitter.emit('y')
  seen.push(`emitted:${emitter.emit('nothing')}`)
  return seen
}

describe("a limiter's events", () => {
  it('behave as EventEmitter’s: order, duplicates, once, off and removal during an emit', () => {
    expect(trace(new Limiter({ max: 1 }) as unknown as Emitterish)).toEqual(trace(new EventEmitter()))
  })

  it('let a throwing listener’s error reach the caller of emit', () => {
    const limiter = new Limiter({ max: 1 })
    limiter.on('decision', () => {
      throw new Error('listener failed')
    })
    expect(() => limiter.consume('k')).toThrow('listener failed')
  })

  it('start reporting decisions when the first decision listener comes, and stop when the last goes', () => {
    const limiter = new Limiter({ max: 5 })
    const seen: number[] = []
    const listener = (d: { remaining: number }) => void seen.push(d.remaining)
    limiter.consume('k')
    limiter.on('decision', listener)
    limiter.consume('k')
    limiter.off('decision', listener)
    limiter.consume('k')
    limiter.once('decision', listener)
    limiter.consume('k')
    limiter.consume('k')
    expect(seen).toEqual([3, 1])
  })
})
