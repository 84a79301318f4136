#!/usr/bin/env python3
"""Interleaved A/B of `paddock run` between binaries (issue #14): each round
runs SPEC once with each binary, each binary in a data directory of its own
under /tmp/ab (warm after the untimed first round), and prints per binary the
medians of the wall time and of the phases between the job's status events,
as crates/paddock/examples/job_bench.rs names them ("own" is the wall time
less launching -> turn completed; it still holds the engine's own shutdown,
which only job_bench's bare runs measure). Needs the engines on PATH.
  scripts/ab_job.py SPEC ROUNDS BINARY...
SPEC's repository and scenario paths must be absolute (it runs from here).
Run it without `chrt`: the sandbox rung drops a real-time policy for the
job (crates/sandbox/src/sched.rs), the process rung keeps it, so under
`chrt` the two rungs, and a bare run, are not comparable (BENCHMARKS.md,
session 42)."""
import json, os, sqlite3, subprocess, sys, time, statistics
from datetime import datetime
if len(sys.argv) < 4 or not sys.argv[2].isdigit():
    sys.exit("usage: scripts/ab_job.py SPEC ROUNDS BINARY...")
spec, runs = sys.argv[1], int(sys.argv[2])
bins = sys.argv[3:]
env = dict(os.environ)
res = {b: [] for b in bins}
def ts(s):
    # 2026-12-03T19:08:09.974365704Z  or with offset
    s = s.replace('Z', '+00:00')
    head, frac = s.split('.', 1)
    digits = ''.join(ch for ch in frac if ch.isdigit())
    rest = frac[len(digits):]
    return datetime.fromisoformat(head + '.' + digits[:6] + rest).timestamp() * 1000
for r in range(runs + 1):
    for b in bins:
        home = f"/tmp/ab/{os.path.basename(b)}"
        env['XDG_DATA_HOME'] = home + '/data'; env['XDG_STATE_HOME'] = home + '/state'
        t0 = time.time() * 1000
        out = subprocess.run([b, 'run', '--json', spec], env=env, capture_output=True, text=True)
        t1 = time.time() * 1000
        if out.returncode != 0:
            sys.exit(f"{b} run {spec} exited {out.returncode}:\n{out.stderr}")
        rec = json.loads(out.stdout)
        if r == 0: continue  # warm-up
        db = sqlite3.connect(home + '/data/paddock/paddock.db')
        ph = {}
        for at, body in db.execute("select at, body from events where job_id=? and kind='status' order by seq", (rec['id'],)):
            p = json.loads(body).get('phase')
            ph.setdefault(p, ts(at))
        db.close()
        d = dict(total=t1-t0, startup=ph['provisioning']-t0, provision=ph['launching']-ph['provisioning'],
                 engine=ph['turn_completed']-ph['launching'], exit=ph['concluding']-ph['turn_completed'],
                 patch=ph['publishing']-ph['concluding'], publish=ph['done']-ph['publishing'], after=t1-ph['done'])
        d['own'] = d['total'] - d['engine']
        res[b].append(d)
keys = ['total','own','startup','provision','exit','patch','publish','after']
print('| binary | ' + ' | '.join(keys) + ' |')
for b in bins:
    print(f'| {os.path.basename(b)} | ' + ' | '.join(f"{statistics.median(x[k] for x in res[b]):.0f}" for k in keys) + ' |')
print('load', open('/proc/loadavg').read().split()[:3])
