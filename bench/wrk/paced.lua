-- One client, paced: each connection waits BENCH_PACE_MS (default 10) after an answer before it sends
-- its next request, so the server is not saturated and the latency is the request's own, not a queue's.
-- wrk times a request from its write, after the pause. Plus the JSON report.
dofile(os.getenv('BENCH_WRK_DIR') .. '/report.lua')

local pause = tonumber(os.getenv('BENCH_PACE_MS') or '10')

function delay()
  return pause
end

-- Plus the latency's quantile function, at every 0.1% (µs), so the runner can pool the slices of a
-- case and read percentiles over all of them: one slice's p99 on a VM moves by milliseconds from run
-- to run. (This wrk's stats object gives percentiles, not its raw histogram.)
local report = done
function done(summary, latency, requests)
  report(summary, latency, requests)
  local parts = {}
  for i = 1, 999 do
    parts[i] = latency:percentile(i / 10)
  end
  io.write('WRK_QUANTILES ' .. table.concat(parts, ',') .. '\n')
end
