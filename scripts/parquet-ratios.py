#!/usr/bin/env python3
"""Issue 16's figures, measured in one run (medians of alternating rounds):

- `backfill --parquet DIR` against what a user would do instead:
  `backfill -o FILE` to NDJSON, then DuckDB's
  `COPY (SELECT ... FROM read_ndjson(FILE)) TO DIR (FORMAT parquet, PARTITION_BY (format, date))`;
- the dataset's size against the NDJSON's (and DuckDB's dataset's);
- a scan query in DuckDB over the Parquet dataset against the same query
  over the NDJSON.

    scripts/parquet-ratios.py MEM_INGEST [ARCHIVE] [ROUNDS]

ARCHIVE defaults to the 300 MB generated archive (seed 1) under /tmp, made
when missing. Needs DuckDB's Python package (pip install duckdb).
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb

BIN = os.path.abspath(sys.argv[1])
ARCH = sys.argv[2] if len(sys.argv) > 2 else "/tmp/mem-ingest-same-300"
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
if not os.path.isdir(ARCH):
    subprocess.run(
        ["cargo", "run", "-q", "--release", "--bin", "gen-corpus", "--",
         "--archive", ARCH, "--total-mb", "300"],
        check=True, stdout=subprocess.DEVNULL)

work = tempfile.mkdtemp(prefix="mem-ingest-parquet-bench-")
ours, theirs = os.path.join(work, "ours"), os.path.join(work, "duckdb")
nd = os.path.join(work, "out.ndjson")

COPY = f"""COPY (
  SELECT *, split_part(source, ':', 1) AS format,
         CAST(make_timestamp(timestamp * 1000) AS DATE) AS date
  FROM read_ndjson('{nd}')
) TO '{theirs}' (FORMAT parquet, PARTITION_BY (format, date), COMPRESSION zstd)"""


def cpu():
    """CPU seconds (user + system) of this process and its children so far."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    s = resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime


def run_ours():
    shutil.rmtree(ours, ignore_errors=True)
    c, t = cpu(), time.perf_counter()
    subprocess.run([BIN, "backfill", "-q", "--parquet", ours, ARCH], check=True)
    cpu_a.append(cpu() - c)
    return time.perf_counter() - t


def run_theirs():
    shutil.rmtree(theirs, ignore_errors=True)
    c, t = cpu(), time.perf_counter()
    subprocess.run([BIN, "backfill", "-q", "-o", nd, ARCH], check=True)
    t_nd = time.perf_counter() - t
    duckdb.connect().execute(COPY)
    cpu_b.append(cpu() - c)
    return time.perf_counter() - t, t_nd


def size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f))
               for d, _, fs in os.walk(path) for f in fs)


def files(path):
    return sum(len(fs) for _, _, fs in os.walk(path))


a, b, b_nd, cpu_a, cpu_b = [], [], [], [], []
for i in range(ROUNDS):
    if i % 2 == 0:
        a.append(run_ours())
        t, n = run_theirs()
    else:
        t, n = run_theirs()
        a.append(run_ours())
    b.append(t)
    b_nd.append(n)

med = statistics.median
print(f"archive: {ARCH} ({size(ARCH) / 1e6:.1f} MB), {ROUNDS} rounds, medians, alternating")
print(f"backfill --parquet:                       {med(a):7.2f} s   (runs: {', '.join(f'{x:.2f}' for x in a)})")
print(f"backfill -o + DuckDB COPY PARTITION_BY:   {med(b):7.2f} s   (of which backfill -o {med(b_nd):.2f} s; runs: {', '.join(f'{x:.2f}' for x in b)})")
print(f"ratio (the two-step way / --parquet):     {med(b) / med(a):7.2f}x")
print(f"CPU seconds (user + sys): --parquet {med(cpu_a):.2f}, the two-step way {med(cpu_b):.2f} "
      f"({med(cpu_b) / med(cpu_a):.2f}x); machine load average at the start: {os.getloadavg()[0]:.2f}")

rows = duckdb.sql(
    f"SELECT count(*) FROM read_parquet('{ours}/records/**/*.parquet', hive_partitioning = true)").fetchall()[0][0]
nd_rows = sum(1 for _ in open(nd, "rb"))
assert rows == nd_rows, (rows, nd_rows)
print(f"rows: {rows} in both")
print(f"NDJSON:                  {size(nd) / 1e6:8.1f} MB")
print(f"--parquet dataset:       {size(ours) / 1e6:8.1f} MB in {files(ours)} parts "
      f"({size(ours) / size(nd):.3f} of the NDJSON)")
print(f"DuckDB's COPY dataset:   {size(theirs) / 1e6:8.1f} MB in {files(theirs)} files "
      f"({size(theirs) / size(nd):.3f} of the NDJSON)")

SCAN = ("SELECT model, count(*), sum({out}) FROM {src} "
        "WHERE role = 'assistant' GROUP BY model ORDER BY model")
q_pq = SCAN.format(out="usage_output",
                   src=f"read_parquet('{ours}/records/**/*.parquet', hive_partitioning = true)")
q_nd = SCAN.format(out="usage.output", src=f"read_ndjson('{nd}')")


def timed(q):
    con = duckdb.connect()
    t = time.perf_counter()
    r = con.execute(q).fetchall()
    return time.perf_counter() - t, r


sp, sn = [], []
for i in range(ROUNDS):
    order = [(q_pq, sp), (q_nd, sn)] if i % 2 == 0 else [(q_nd, sn), (q_pq, sp)]
    res = []
    for q, acc in order:
        t, r = timed(q)
        acc.append(t)
        res.append(r)
    assert res[0] == res[1], res
print(f"scan query: {SCAN.format(out='usage_output', src='<dataset>')}")
print(f"  over the Parquet dataset: {med(sp) * 1000:8.1f} ms")
print(f"  over the NDJSON:          {med(sn) * 1000:8.1f} ms")
print(f"  ratio (NDJSON / Parquet): {med(sn) / med(sp):8.1f}x")
shutil.rmtree(work)
