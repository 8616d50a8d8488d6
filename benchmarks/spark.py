"""Spark engine benchmark, side by side in one run (local mode): the stable histogram on Spark vs a
plain Spark ``groupBy().count()`` that writes the same result, and the same release on DuckDB.

    PYTHONPATH=src python benchmarks/spark.py [--rows 10000000] [--keys 100000] [--master local[2]] [--units N]

Synthetic Parquet: ``rows`` records with a Zipf-like key over ``keys`` distinct integers (the
file is written once, with DuckDB, into a temporary directory). Each timing is the best of
``--repeat`` runs after one warm-up. Target: Spark stable histogram ≤ 1.3× the plain job. With
``--units N`` also user level: a unit column ``u`` (N units, skewed rows per unit) and privagg's
bounded stable histogram (ℓ0 = ℓ∞ = 1) against the plain ``groupBy(k).agg(countDistinct(u))``,
both written as Parquet. Target ≤ 2×.

``--only mean`` (or both, by default): ``private_mean`` at d = 10 (``--mean-rows`` Gaussian rows,
Parquet) on Spark against plain Spark jobs: (a) one job computing the count and the d sums, as
privagg's release needs them (``agg(count, sum(c0) … sum(c9))`` on the Parquet file), and (b) as
many d-sum jobs as private_mean makes passes over the rows (on the persisted columns); also the
same release through DuckDB (file read into numpy). Target: ≤ 1.5× (a). One run each (no warm-up
repeat: a private release is not repeated in practice), after one warm-up of each job. Also printed:
the Spark jobs and stages of the private run, and one native pass over the persisted columns;
then a profile of each timed private run: seconds, Spark jobs and stages per step (the count job,
each ``SparkPoints`` method call, the rest on the driver), from job groups and Spark's status
tracker. To profile other code (e.g. an older commit), run this file with its ``src`` first on
``sys.path`` (the script puts ``../src`` first).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import duckdb  # noqa: E402


def write_data(path: Path, rows: int, keys: int, units: int = 0) -> None:
    """``k``: Zipf-like keys; with ``units`` also ``u``: unit ids with skewed rows per unit (unit
    ``floor(U²·units)``: low ids own many rows, high ids few)."""
    con = duckdb.connect()
    unit = f", CAST(floor(pow(random(), 2) * {units}) AS BIGINT) AS u" if units else ""
    con.sql(
        f"COPY (SELECT CAST(floor(pow(random(), 3) * {keys}) AS BIGINT) AS k{unit} FROM range({rows})) "
        f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)"
    )
    con.close()


def best(fn, repeat: int) -> float:
    fn()  # warm-up (JIT, caches)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("histogram", "mean", "aggregate"), default=None)
    ap.add_argument("--agg-query", choices=("bounded", "unbounded", "quantile", "both", "all"), default="both",
                    help="aggregate: the bounded query, the issue-13 query with an unbounded mean, both, a query "
                         "with quantiles, or all three")
    ap.add_argument("--agg-rows", type=int, default=10_000_000)
    ap.add_argument("--mean-rows", type=int, default=2_000_000)
    ap.add_argument("--units", type=int, default=0,
                    help="also user level: a unit column with this many units; privagg's bounded stable "
                         "histogram (ℓ0 = ℓ∞ = 1) vs the plain COUNT(DISTINCT u) GROUP BY k (target ≤ 2×)")
    args = ap.parse_args()
    if args.only == "mean":
        return bench_mean(args)
    if args.only == "aggregate":
        return bench_aggregate(args)

    from privagg.engines import duckdb as duckdb_engine
    from privagg.engines import spark as se
    from privagg.mechanisms import histogram as H

    tmp = Path(tempfile.mkdtemp(prefix="privagg-spark-bench-"))
    try:
        data = tmp / "data.parquet"
        t = time.perf_counter()
        write_data(data, args.rows, args.keys, args.units)
        units = f", ≤ {args.units:,} units" if args.units else ""
        print(f"data: {args.rows:,} rows, ≤ {args.keys:,} keys{units}, {data.stat().st_size / 2**20:.0f} MiB Parquet "
              f"(written in {time.perf_counter() - t:.1f} s)")
        spark = se.spark_session(args.master, {"spark.sql.shuffle.partitions": str(args.partitions),
                                               "spark.driver.memory": "2g"})
        df = spark.read.parquet(str(data))
        out = tmp / "out"
        counter = [0]

        def plain() -> None:  # the non-private job: groupBy().count(), result written as Parquet
            counter[0] += 1
            df.groupBy("k").count().write.mode("overwrite").parquet(str(out / f"plain{counter[0]}"))

        def private_spark() -> None:  # the stable histogram, released keys written the same way
            counter[0] += 1
            r = H.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6)
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"k": r.keys, "count": r.counts}), out / f"private{counter[0]}.parquet")

        def private_duckdb() -> None:
            kc = duckdb_engine.count_file(data, "k")
            H.stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6)

        t_plain = best(plain, args.repeat)
        t_spark = best(private_spark, args.repeat)
        t_duck = best(private_duckdb, args.repeat)
        print(f"{'job':44s} {'seconds':>8s} {'× plain':>8s}")
        print(f"{'Spark groupBy().count() → Parquet (plain)':44s} {t_plain:8.2f} {1.0:8.2f}")
        print(f"{'Spark stable_histogram → Parquet':44s} {t_spark:8.2f} {t_spark / t_plain:8.2f}")
        print(f"{'DuckDB stable_histogram (same release)':44s} {t_duck:8.2f} {t_duck / t_plain:8.2f}")
        verdict = "met" if t_spark <= 1.3 * t_plain else "MISSED"
        print(f"target Spark stable ≤ 1.3× plain: {verdict} ({t_spark / t_plain:.2f}×); master {args.master}, "
              f"{args.partitions} shuffle partitions, best of {args.repeat}")
        if args.units:
            from pyspark.sql import functions as F

            def plain_distinct() -> None:  # the non-private user-level job, written as Parquet
                counter[0] += 1
                df.groupBy("k").agg(F.countDistinct("u").alias("count")).write.mode("overwrite").parquet(
                    str(out / f"distinct{counter[0]}"))

            def private_units() -> None:  # bounded (ℓ0 = ℓ∞ = 1) stable histogram, written the same way
                counter[0] += 1
                r = H.stable_histogram(df, column="k", units="u", epsilon=1.0, delta=1e-6)
                import pyarrow as pa
                import pyarrow.parquet as pq

                pq.write_table(pa.table({"k": r.keys, "count": r.counts}), out / f"units{counter[0]}.parquet")

            t_distinct = best(plain_distinct, args.repeat)
            t_units = best(private_units, args.repeat)
            print(f"{'Spark COUNT(DISTINCT u) GROUP BY k (plain)':44s} {t_distinct:8.2f} {1.0:8.2f}")
            print(f"{'Spark stable_histogram(units=u) → Parquet':44s} {t_units:8.2f} {t_units / t_distinct:8.2f}")
            verdict = "met" if t_units <= 2.0 * t_distinct else "MISSED"
            print(f"target Spark user-level ≤ 2× plain COUNT(DISTINCT): {verdict} ({t_units / t_distinct:.2f}×)")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.only is None:
        bench_mean(args)


def bench_aggregate(args: argparse.Namespace) -> None:
    """``privagg.aggregate`` on Spark (count, bounded sum and bounded mean of ``y`` per key, private
    key selection) against the plain Spark ``groupBy(k).agg(count, sum, avg)`` of the same clamped
    column, collected to the driver; the same release with the values fetched to the driver (the
    engine before 2026-12-06: ``prepare(sums=None)``) and through DuckDB. ``--agg-rows`` rows, 1000
    Zipf-like keys, ``y`` lognormal(3, 1), bounds (0, 500); best of ``--repeat`` after a warm-up."""
    from pyspark.sql import functions as F

    import privagg
    from privagg.engines import spark as se
    from privagg.engines.spark_grouped import SparkGroupedTable

    tmp = Path(tempfile.mkdtemp(prefix="privagg-spark-agg-"))
    try:
        data = tmp / "agg.parquet"
        con = duckdb.connect()
        t = time.perf_counter()
        con.sql(f"COPY (SELECT CAST(floor(pow(random(), 3) * 1000) AS BIGINT) AS k, exp(3 + sqrt(-2 * ln(random())) "
                f"* cos(2 * pi() * random())) AS y FROM range({args.agg_rows})) TO '{data}' "
                f"(FORMAT parquet, ROW_GROUP_SIZE 1000000)")
        con.close()
        print(f"data: {args.agg_rows:,} rows, ≤ 1,000 keys, {data.stat().st_size / 2**20:.0f} MiB Parquet "
              f"(written in {time.perf_counter() - t:.1f} s)")
        spark = se.spark_session(args.master, {"spark.sql.shuffle.partitions": str(args.partitions),
                                               "spark.driver.memory": "2g"})
        df = spark.read.parquet(str(data))
        yc = F.least(F.greatest(F.col("y"), F.lit(0.0)), F.lit(500.0))  # y clamped to the bounds

        def plain(*aggs):  # the plain Spark job: count and ``aggs`` per key, collected
            return lambda: df.groupBy("k").agg(F.count(F.lit(1)), *aggs).toArrow()

        # name -> (title, metrics, plain job's label, plain job, what the private job keeps in Spark)
        queries = {
            "bounded": ("count, sum(y, 0..500), mean(y, 0..500)",
                        [privagg.count(), privagg.sum("y", bounds=(0.0, 500.0)),
                         privagg.mean("y", bounds=(0.0, 500.0))],
                        "Spark groupBy(k).agg(count, sum, avg) (plain)", plain(F.sum(yc), F.avg(yc)),
                        "sums in Spark"),
            # the issue-13 perf query: count, bounded sum and unbounded mean
            "unbounded": ("count, sum(y, 0..500), mean(y) without bounds",
                          [privagg.count(), privagg.sum("y", bounds=(0.0, 500.0)), privagg.mean("y")],
                          "Spark groupBy(k).agg(count, sum, avg) (plain)", plain(F.sum(yc), F.avg("y")),
                          "rows kept in Spark"),
            "quantile": ("count, quantile(y, 0.5) without bounds, quantile(y, 0.9, 0..500)",
                         [privagg.count(), privagg.quantile("y", 0.5),
                          privagg.quantile("y", 0.9, bounds=(0.0, 500.0))],
                         "Spark groupBy(k).agg(count, percentile, percentile) (plain)",
                         plain(F.percentile(F.col("y"), F.lit(0.5)), F.percentile(yc, F.lit(0.9))),
                         "rows kept in Spark"),  # plain: Spark's exact percentile aggregate
        }

        def private(table, metrics) -> None:
            privagg.aggregate(table, by="k", metrics=metrics, epsilon=1.0, delta=1e-6).to_pandas()

        real_prepare = SparkGroupedTable.prepare

        def fetched(metrics) -> None:  # the values fetched to the driver, as before
            SparkGroupedTable.prepare = lambda self, **kw: real_prepare(self, **{**kw, "sums": None,
                                                                                  "kept_rows": None})
            try:
                private(df, metrics)
            finally:
                SparkGroupedTable.prepare = real_prepare

        def timed(fn):  # seconds, or the error (the values fetch can exceed the driver's limits)
            try:
                return best(fn, args.repeat)
            except privagg.ParameterError as exc:
                return f"failed: {str(exc)[:90]}"

        chosen = {"both": ("bounded", "unbounded"), "all": tuple(queries)}.get(args.agg_query,
                                                                                (args.agg_query,))
        tables = []
        for name in chosen:
            title, metrics, plain_label, plain_job, kept = queries[name]
            tables.append((title, [
                (plain_label, timed(plain_job)),
                (f"Spark privagg.aggregate, {kept}", timed(lambda m=metrics: private(df, m))),
                ("Spark privagg.aggregate, values fetched", timed(lambda m=metrics: fetched(m))),
                ("DuckDB privagg.aggregate (same query)", timed(lambda m=metrics: private(str(data), m)))]))
        for title, rows in tables:
            base = rows[0][1]
            print(f"\nquery: {title}")
            print(f"{'job':48s} {'seconds':>8s} {'× plain':>8s}")
            for name, sec in rows:
                if isinstance(sec, str):
                    print(f"{name:48s} {sec}")
                else:
                    print(f"{name:48s} {sec:8.2f} {sec / base:8.2f}")
        print(f"master {args.master}, {args.partitions} shuffle partitions, best of {args.repeat} after a warm-up")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: the SparkPoints methods timed (and counted as passes when they run a Spark job)
PASS_METHODS = ("poisson_sample", "clipped_integer_sum", "distance_bins", "scale_counts",
                "below_counts", "outside_count")


def bench_mean(args: argparse.Namespace, d: int = 10) -> None:
    """private_mean at d = 10 on Spark vs plain Spark sums (module docstring)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from privagg.engines import spark as se
    from privagg.engines import spark_points as sp
    from privagg.engines.duckdb_numeric import read_numeric_columns
    from privagg.mechanisms.mean import private_mean

    tmp = Path(tempfile.mkdtemp(prefix="privagg-spark-mean-bench-"))
    try:
        data = tmp / "points.parquet"
        cols = [f"c{j}" for j in range(d)]
        con = duckdb.connect()
        select = ", ".join(f"{10 * j} + 3 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS c{j}"
                           for j in range(d))
        con.sql(f"COPY (SELECT {select} FROM range({args.mean_rows})) TO '{data}' "
                "(FORMAT parquet, ROW_GROUP_SIZE 500000)")
        con.close()
        print(f"\nmean data: {args.mean_rows:,} rows × d = {d}, {data.stat().st_size / 2**20:.0f} MiB Parquet")
        spark = se.spark_session(args.master, {"spark.sql.shuffle.partitions": str(args.partitions),
                                               "spark.driver.memory": "2g"})
        df = spark.read.parquet(str(data))
        passes = [0]
        sc = spark.sparkContext
        steps: list[tuple[str, float, str]] = []  # (method, seconds, job group) of the profiled run
        profile, runs = [False], [0]  # group names unique per run (the status tracker keeps old jobs)
        for name in PASS_METHODS:
            real = getattr(sp.SparkPoints, name, None)
            if real is None:
                continue

            def counted(self, *a, _real=real, _name=name, **k):
                group = f"privagg-bench-{runs[0]}-pass-{len(steps)}"
                if profile[0]:
                    sc.setJobGroup(group, _name)
                t = time.perf_counter()
                try:
                    return _real(self, *a, **k)
                finally:
                    if profile[0]:
                        steps.append((_name, time.perf_counter() - t, group))
                        sc.setJobGroup(f"privagg-bench-mean-{runs[0]}", "private_mean")
                    if sc.statusTracker().getJobIdsForGroup(group) or not profile[0]:
                        passes[0] += 1

            setattr(sp.SparkPoints, name, counted)

        real_points_of = sp.points_of

        @contextlib.contextmanager
        def timed_points_of(*a, **k):  # job 1: persist and count the rows
            group = f"privagg-bench-{runs[0]}-count"
            if profile[0]:
                sc.setJobGroup(group, "count")
            t = time.perf_counter()
            with real_points_of(*a, **k) as value:
                if profile[0]:
                    steps.append(("count (persist)", time.perf_counter() - t, group))
                    sc.setJobGroup(f"privagg-bench-mean-{runs[0]}", "private_mean")
                yield value

        sp.points_of = timed_points_of

        def timed(fn) -> float:
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t

        def plain_one() -> None:  # (a) count and d sums in one job, from Parquet
            df.agg(F.count(F.lit(1)), *[F.sum(c) for c in cols]).collect()

        rows, profiles = [], []
        for label, radius in (("radius given (no scale step)", 30.0), ("radius chosen privately", None)):
            passes[0] = 0
            private_mean(df, epsilon=1.0, delta=1e-6, radius=radius, rng=1)  # warm-up
            passes[0] = 0
            steps.clear()
            profile[0], runs[0] = True, runs[0] + 1
            main_group = f"privagg-bench-mean-{runs[0]}"
            sc.setJobGroup(main_group, "private_mean")
            t_priv = timed(lambda: private_mean(df, epsilon=1.0, delta=1e-6, radius=radius))
            profile[0] = False
            groups = [main_group] + [g for _, _, g in steps]
            n_jobs, n_stages = 0, 0
            per_group = {}
            for g in groups:
                jobs = sc.statusTracker().getJobIdsForGroup(g)
                stages = sum(len(info.stageIds) for info in map(sc.statusTracker().getJobInfo, jobs) if info)
                per_group[g] = (len(jobs), stages)
                n_jobs, n_stages = n_jobs + len(jobs), n_stages + stages
            profiles.append((label, t_priv, steps[:], per_group, main_group))
            sc.setJobGroup("privagg-bench-plain", "plain")
            k = passes[0]
            cached = df.select(*cols).persist(StorageLevel.MEMORY_AND_DISK)
            cached.count()

            def plain_k() -> None:  # (b) a count and k d-sum passes, as many passes as private_mean made
                cached.count()
                for _ in range(k):
                    cached.agg(*[F.sum(c) for c in cols]).collect()

            plain_one()
            t_one = timed(plain_one)
            plain_k()
            t_k = timed(plain_k)
            t_scan = timed(lambda: cached.agg(*[F.sum(c) for c in cols]).collect())  # one pass, persisted
            cached.unpersist()
            t_duck = timed(lambda: private_mean(read_numeric_columns(data, cols), epsilon=1.0, delta=1e-6,
                                                radius=radius))
            rows.append((label, t_priv, k, t_one, t_k, t_duck, n_jobs, n_stages, t_scan))
        print(f"{'private_mean, d = 10':32s} {'Spark':>7s} {'passes':>6s} {'(a) 1 job':>9s} {'× (a)':>6s} "
              f"{'(b) k jobs':>10s} {'× (b)':>6s} {'DuckDB':>7s} {'jobs':>5s} {'stages':>6s} {'1 scan':>6s}")
        for label, t_priv, k, t_one, t_k, t_duck, n_jobs, n_stages, t_scan in rows:
            print(f"{label:32s} {t_priv:7.2f} {k:6d} {t_one:9.2f} {t_priv / t_one:6.2f} {t_k:10.2f} "
                  f"{t_priv / t_k:6.2f} {t_duck:7.2f} {n_jobs:5d} {n_stages:6d} {t_scan:6.2f}")
        print("jobs/stages: the Spark jobs and stages of the timed private_mean (AQE runs each shuffle as a job of "
              "its own); 1 scan: one native d-sum pass over the persisted columns, the least a dependent pass costs")
        print("\nprofile of the timed private_mean runs (job groups per SparkPoints method; 'driver': "
              "the rest, the local code on the driver)")
        print(f"{'run':30s} {'step':24s} {'seconds':>8s} {'jobs':>5s} {'stages':>6s}")
        for label, t_priv, steps_of, per_group, main_group in profiles:
            other_jobs, other_stages = per_group[main_group]
            rest = t_priv - sum(t for _, t, _ in steps_of)
            print(f"{label:30s} {'driver':24s} {rest:8.2f} {other_jobs:5d} {other_stages:6d}")
            for name, t, g in steps_of:
                jobs, stages = per_group[g]
                print(f"{'':30s} {name:24s} {t:8.2f} {jobs:5d} {stages:6d}")
        ratio = rows[0][1] / rows[0][3]
        verdict = "met" if ratio <= 1.5 else "MISSED"
        print(f"target Spark private_mean ≤ 1.5× plain sums (a): {verdict} ({ratio:.2f}× with a given radius); "
              f"master {args.master}")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
