-- Many clients: each request carries X-Forwarded-For from a pool of distinct client IPs
-- (BENCH_CLIENTS, default 10000), round-robin. The requests are formatted once in init(),
-- so the per-request cost in wrk is a table lookup.
dofile(os.getenv('BENCH_WRK_DIR') .. '/report.lua')

local reqs = {}
local n = 0
local i = 0

function init(args)
  n = tonumber(os.getenv('BENCH_CLIENTS') or '10000')
  for k = 0, n - 1 do
    local ip = string.format('10.%d.%d.%d', math.floor(k / 65536) % 256, math.floor(k / 256) % 256, k % 256)
    reqs[k] = wrk.format('GET', '/', { ['X-Forwarded-For'] = ip })
  end
  -- Threads start at different offsets so that two threads do not walk the pool in lockstep.
  i = math.random(0, n - 1)
end

function request()
  i = (i + 1) % n
  return reqs[i]
end
