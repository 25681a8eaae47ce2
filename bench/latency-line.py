"""One result line of bench/serve-latency.sh and bench/serve-fuse-latency.sh.

Usage: latency-line.py FIO_JSON SERVER IODEPTH "VOL INVOL" "VOL INVOL" TICKS0 TICKS1
                       [HVIO_VMS_JSON [THREADS0 THREADS1]]
(context switches and CPU clock ticks of the server before and after the
run; for hvio its control API's /vms and per thread kind "name:voluntary" lists).
"""

import json
import os
import sys

out, s, qd, c0, c1, t0, t1 = sys.argv[1:8]
srv = sys.argv[8] if len(sys.argv) > 8 else ""
th0, th1 = (sys.argv[9], sys.argv[10]) if len(sys.argv) > 10 else ("", "")
t = open(out).read()
j = json.loads(t[t.index("{") :])["jobs"][0]
d = j["read"] if j["read"]["total_ios"] > 0 else j["write"]
n = max(1, d["total_ios"])
v0, n0 = map(int, c0.split())
v1, n1 = map(int, c1.split())
cpu = (int(t1) - int(t0)) * 1e6 / os.sysconf("SC_CLK_TCK") / n
p = d["clat_ns"]["percentile"]
line = (
    f"  {s:8} qd{qd:>2}  {d['iops']:7.0f} IOPS  clat mean {d['clat_ns']['mean'] / 1e3:6.1f} µs"
    f" p50 {p['50.000000'] / 1e3:6.1f} p99 {p['99.000000'] / 1e3:7.1f}"
    f" | server/req: {(v1 - v0) / n:.2f} vol + {(n1 - n0) / n:.3f} invol ctx sw, {cpu:4.1f} µs CPU"
    f" | fio ctx sw/req {j['ctx'] / n:.2f}"
)
if srv:
    vm = json.loads(srv)[0]
    k = "read" if d is j["read"] else "write"
    line += f" | in hvio p50 {vm[k + '_p50_us']} p99 {vm[k + '_p99_us']} µs"
if th1:
    a = dict(x.split(":") for x in th0.split())
    b = dict(x.split(":") for x in th1.split())
    line += "\n        hvio vol ctx sw/req by thread: " + ", ".join(
        f"{k} {(int(v) - int(a.get(k, 0))) / n:.2f}"
        for k, v in sorted(b.items())
        if int(v) > int(a.get(k, 0))
    )
print(line)
