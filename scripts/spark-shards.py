#!/usr/bin/env python3
"""mem-ingest's shards on Apache Spark, local mode: a Spark job launches N
shards of `backfill --shard K/N --parquet DIR` (one task each), then reads
the dataset back with `spark.read.parquet` and checks it against `stats`:
rows, rows by role, records without a timestamp read as a null `date`, and
every row once (distinct keys with their file and line).

    pip install pyspark   # and a JRE (apt-get install default-jre-headless)
    scripts/spark-shards.py MEM_INGEST N DIR PATH...

Not run by CI (PySpark and a JRE are large); its output is in
BENCHMARKS.md. Exits 1 when a check fails.
"""
import json
import os
import shutil
import subprocess
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

BIN, N, DIR, PATHS = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
shutil.rmtree(DIR, ignore_errors=True)

spark = (SparkSession.builder.master(f"local[{N}]").appName("mem-ingest-shards")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


def shard(k):
    t = time.time()
    r = subprocess.run([BIN, "backfill", "-q", "--shard", f"{k}/{N}", "--parquet", DIR, *PATHS],
                       capture_output=True, text=True)
    return (k, r.returncode, r.stderr.strip(), time.time() - t)


t0 = time.time()
runs = spark.sparkContext.parallelize(range(N), N).map(shard).collect()
took = time.time() - t0
ok = True
for k, rc, err, secs in sorted(runs):
    print(f"shard {k}/{N}: exit {rc}, {secs:.2f} s {err}")
    ok &= rc == 0
print(f"{N} shards from one Spark job: {took:.2f} s")

stats = json.loads(subprocess.run([BIN, "stats", "--json", "-q", *PATHS],
                                  capture_output=True, text=True).stdout)
df = spark.read.parquet(os.path.join(DIR, "records"))
print("schema:", ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields))
rows = df.count()
print(f"rows: {rows} (stats: {stats['records']})")
ok &= rows == stats["records"]
by_role = {r["role"]: r["count"] for r in df.groupBy("role").count().collect()}
want = {r: n for r, n in stats["roles"].items() if n}
print(f"by role: {dict(sorted(by_role.items()))}")
ok &= by_role == want
nulls = df.filter(F.col("date").isNull()).count()
untimed = df.filter(F.col("timestamp").isNull()).count()
print(f"null date (partition __HIVE_DEFAULT_PARTITION__): {nulls}; null timestamp: {untimed}")
ok &= nulls == untimed
once = df.select("key", "file", "line").distinct().count()
print(f"distinct (key, file, line): {once}")
ok &= once == rows
by_format = {r["format"]: r["count"] for r in df.groupBy("format").count().collect()}
print(f"by format: {dict(sorted(by_format.items()))}")
print("all checks passed" if ok else "CHECKS FAILED")
spark.stop()
sys.exit(0 if ok else 1)
