/*
 * Redis Cluster key slots, for naming the node a key lives on (its failure domain): the slot is
 * CRC16 (XMODEM) of the key's hash tag, the text inside its first `{...}` when not empty, mod 16384.
 */

// Built by a call marked pure, not by statements at the top of the file: a bundler then drops the table
// with the rest of RedisStore from an app that does not use it.
const TABLE = /* @__PURE__ */ (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    table[i] = crc
  }
  return table
})()

function crc16(text: string): number {
  const bytes = new TextEncoder().encode(text)
  let crc = 0
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!
  return crc
}

/** The Cluster slot of `key`. */
export function keySlot(key: string): number {
  const open = key.indexOf('{')
  if (open !== -1) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) return crc16(key.slice(open + 1, close)) % 16384
  }
  return crc16(key) % 16384
}

/** The node serving `key` in an ioredis Cluster's slot map (`slots[slot][0]`, "host:port"), or its slot while the map is unknown. */
export function clusterNodeOf(slots: readonly (readonly string[] | undefined)[] | undefined, key: string): string {
  const slot = keySlot(key)
  return slots?.[slot]?.[0] ?? `slot ${slot}`
}
