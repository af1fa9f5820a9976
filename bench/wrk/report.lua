-- Shared by the wrk scripts: print one machine-readable line at the end of a run.
-- Latencies are in microseconds; "non2xx" counts responses whose status is not 2xx/3xx.
function done(summary, latency, requests)
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"non2xx":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,' ..
    '"lat_mean_us":%.1f,"lat_max_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, summary.errors.status,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    latency.mean, latency.max, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9)))
end
