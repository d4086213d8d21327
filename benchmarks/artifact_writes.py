"""Seconds spent writing one round's artifacts, to a local folder and to S3 (moto's server).

A round writes plan.json, code.py, output.txt, verdict.json and run.json. This measures the
storage layer the flow uses (dsstar.storage.Store), without Prefect's task overhead.

    .venv/bin/python benchmarks/artifact_writes.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from dsstar.storage import Store


def round_objects(number: int) -> dict[str, object]:
    code = "import pandas as pd\n" + "print(pd.__version__)\n" * 120  # ~3 KB script
    output = "region  revenue\n" + "NE      207.0\n" * 1500  # ~20 KB of output
    return {
        f"rounds/{number:02d}/plan.json": [f"step {i}" for i in range(number + 1)],
        f"rounds/{number:02d}/code.py": code,
        f"rounds/{number:02d}/output.txt": output,
        f"rounds/{number:02d}/verdict.json": {"sufficient": False, "reply": "No"},
        "run.json": {"status": "running", "round_table": [{"round": i} for i in range(number)]},
    }


def time_rounds(store: Store, rounds: int) -> list[float]:
    seconds = []
    for number in range(rounds):
        started = time.perf_counter()
        for key, value in round_objects(number).items():
            full = f"runs/bench/{key}"
            store.write_text(full, value) if isinstance(value, str) else store.write_json(
                full, value
            )
        seconds.append(time.perf_counter() - started)
    return seconds


def start_moto() -> tuple[subprocess.Popen, int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except OSError:
            time.sleep(0.2)
    return proc, port


def report(name: str, seconds: list[float]) -> float:
    mean = statistics.mean(seconds)
    print(
        f"{name:6s} rounds={len(seconds):3d}  mean={mean * 1000:7.1f} ms/round  "
        f"p50={statistics.median(seconds) * 1000:7.1f} ms  max={max(seconds) * 1000:7.1f} ms"
    )
    return mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        local = report("local", time_rounds(Store(folder), args.rounds))

    proc, port = start_moto()
    try:
        os.environ.update(
            AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
        )
        import boto3

        boto3.client("s3").create_bucket(Bucket="dsstar-bench")
        s3 = report("s3", time_rounds(Store("s3://dsstar-bench/prefix"), args.rounds))
    finally:
        proc.terminate()
    print(f"s3/local ratio: {s3 / local:.1f}x (moto on loopback; a real bucket adds latency)")


if __name__ == "__main__":
    main()
