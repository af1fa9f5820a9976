-- One client: the same static request every time (wrk's fast path), plus the JSON report.
dofile(os.getenv('BENCH_WRK_DIR') .. '/report.lua')
