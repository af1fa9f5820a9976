-- One client, paced: each connection waits BENCH_PACE_MS (default 10) after an answer before it sends
-- its next request, so the server is not saturated and the latency is the request's own, not a queue's.
-- wrk times a request from its write, after the pause. Plus the JSON report.
dofile(os.getenv('BENCH_WRK_DIR') .. '/report.lua')

local pause = tonumber(os.getenv('BENCH_PACE_MS') or '10')

function delay()
  return pause
end
