#!/usr/bin/env python3
"""Measures the Python SDK: claims per second and the p50 latency of one
claim + complete (a fresh key each time) at N concurrent callers, for a
duration, against a running cluster. Prints one line:

    python3 sdk/python/bench.py --addrs http://127.0.0.1:8101,http://127.0.0.1:8102 --callers 16 --duration 10
    intentd-python sync callers=16 duration=10.0s claims=5321 claims/s=532.1 p50=28.9ms p99=61.0ms errors=0

--async runs the callers as asyncio tasks of one AsyncClient instead of
threads sharing one Client. --addrs and --api-key default to INTENTD_ADDRS
and INTENTD_API_KEY. Standard library only; the SDK is imported from
sdk/python/src when it is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from typing import List

try:
    import intentd
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))
    import intentd


def percentile(xs: List[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def run_sync(a: argparse.Namespace, prefix: str) -> "tuple[List[float], int]":
    cl = intentd.Client(a.addrs, api_key=a.api_key)
    cl.cluster()  # discover the leader before the clock starts
    lat: List[float] = []
    errors = [0]
    lock = threading.Lock()
    end = time.monotonic() + a.duration

    def caller(c: int) -> None:
        mine: List[float] = []
        i = 0
        while time.monotonic() < end:
            key = "%s:%d:%d" % (prefix, c, i)
            i += 1
            t0 = time.perf_counter()
            try:
                g = cl.claim(key, a.tool, {"caller": c, "i": i})
                cl.complete(key, g.owner, g.fencing_token, "executed", {"ok": True})
            except intentd.IntentdError as e:
                with lock:
                    errors[0] += 1
                if errors[0] <= 3:
                    print("bench: %s" % e, file=sys.stderr)
                continue
            mine.append(time.perf_counter() - t0)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=caller, args=(c,)) for c in range(a.callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cl.close()
    return lat, errors[0]


async def run_async(a: argparse.Namespace, prefix: str) -> "tuple[List[float], int]":
    cl = intentd.AsyncClient(a.addrs, api_key=a.api_key)
    await cl.cluster()
    lat: List[float] = []
    errors = 0
    end = time.monotonic() + a.duration

    async def caller(c: int) -> None:
        nonlocal errors
        i = 0
        while time.monotonic() < end:
            key = "%s:%d:%d" % (prefix, c, i)
            i += 1
            t0 = time.perf_counter()
            try:
                g = await cl.claim(key, a.tool, {"caller": c, "i": i})
                await cl.complete(key, g.owner, g.fencing_token, "executed", {"ok": True})
            except intentd.IntentdError as e:
                errors += 1
                if errors <= 3:
                    print("bench: %s" % e, file=sys.stderr)
                continue
            lat.append(time.perf_counter() - t0)

    await asyncio.gather(*[caller(c) for c in range(a.callers)])
    await cl.aclose()
    return lat, errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addrs", default=os.environ.get("INTENTD_ADDRS", "http://127.0.0.1:8101"),
                    help="comma-separated node URLs (env INTENTD_ADDRS)")
    ap.add_argument("--api-key", default=os.environ.get("INTENTD_API_KEY"), help="agent API key (env INTENTD_API_KEY)")
    ap.add_argument("--callers", type=int, default=1, help="concurrent callers")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds to run")
    ap.add_argument("--tool", default="bench.python")
    ap.add_argument("--prefix", default="", help="key prefix (default: bench-py-<time>)")
    ap.add_argument("--async", dest="use_async", action="store_true", help="use AsyncClient and asyncio tasks")
    a = ap.parse_args()
    prefix = a.prefix or "bench-py-%d" % int(time.time() * 1000)
    t0 = time.monotonic()
    if a.use_async:
        lat, errors = asyncio.run(run_async(a, prefix))
    else:
        lat, errors = run_sync(a, prefix)
    took = time.monotonic() - t0
    print("intentd-python %s callers=%d duration=%.1fs claims=%d claims/s=%.1f p50=%.1fms p99=%.1fms errors=%d" % (
        "async" if a.use_async else "sync", a.callers, took, len(lat), len(lat) / took if took else 0.0,
        percentile(lat, 0.5) * 1000, percentile(lat, 0.99) * 1000, errors))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
