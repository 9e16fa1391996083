"""A load client of strider serve's system shared-memory extension (Triton's): each client
registers a POSIX shared-memory region of its own holding its input and room for its
outputs, then posts inference requests that name the region instead of carrying the bytes,
on one keep-alive connection. `hey` cannot do this; run.py uses it with --transport shm.

Clients are threads spread over processes (Python's GIL would cap one process below what a
GPU server answers); each measures its requests' latencies. run() returns what run.py's
`hey` returns: requests/s over the whole run, p50 and p99 in ms, failed and ok counts.
"""
import http.client
import json
import multiprocessing
import os
import threading
import time
import urllib.parse
from multiprocessing import shared_memory

import numpy as np


def _client(host, port, model, name, x, outputs, count, latencies, failures, start, schedule=None):
    shm = shared_memory.SharedMemory(create=True, size=x.nbytes + sum(size for _, size in outputs))
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        shm.buf[:x.nbytes] = x.tobytes()
        register = json.dumps({"key": "/" + shm.name, "offset": 0, "byte_size": shm.size})
        conn.request("POST", "/v2/systemsharedmemory/region/%s/register" % name, register)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            failures.append(count)
            return
        wanted, at = [], x.nbytes
        for output, size in outputs:  # each output after the input, in the client's region
            wanted.append({"name": output, "parameters": {"shared_memory_region": name, "shared_memory_offset": at,
                                                          "shared_memory_byte_size": size}})
            at += size
        body = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                       "parameters": {"shared_memory_region": name, "shared_memory_byte_size": x.nbytes}}],
                           "outputs": wanted})
        path = "/v2/models/%s/infer" % model
        start.wait()
        began = time.perf_counter()
        for k in range(count):
            t0 = time.perf_counter()
            if schedule is not None:
                # Open loop: the request is due at its scheduled time; a late send (this
                # connection still busy) counts its wait in the latency.
                t0 = began + schedule[k]
                wait = t0 - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            try:
                conn.request("POST", path, body)
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=60)
            latencies.append(time.perf_counter() - t0)
            if not ok:
                failures.append(1)
        conn.request("POST", "/v2/systemsharedmemory/region/%s/unregister" % name)
        conn.getresponse().read()
    finally:
        conn.close()
        shm.close()
        shm.unlink()


def _process(url, model, x, outputs, clients, per_client, tag, ready, go, results, schedules=None):
    parsed = urllib.parse.urlparse(url)
    latencies, failures = [], []
    start = threading.Event()
    threads = [threading.Thread(target=_client, args=(parsed.hostname, parsed.port, model, "%s-%d" % (tag, k), x, outputs,
                                                      per_client, latencies, failures, start,
                                                      None if schedules is None else schedules[k])) for k in range(clients)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # the regions registered
    ready.set()
    go.wait()
    start.set()
    for t in threads:
        t.join()
    results.put((latencies, sum(failures)))


def run(url, model, x, outputs, clients, requests, rate=None, seed=5):
    """`requests` requests (at least one per client) from `clients` concurrent clients;
    `outputs`: (name, bytes) of each output of one request. Closed loop (each client sends
    its next request when the last is answered), or with `rate` open loop: Poisson arrivals
    at `rate` requests/s in all, each client a stream of rate / clients, each latency
    measured from when its request was due (so a server that falls behind is charged
    for the requests queued at the client: no coordinated omission)."""
    processes = max(1, min(clients, (os.cpu_count() or 2) // 2, 8))
    per_client = max(1, requests // clients)
    rng = np.random.default_rng(seed)
    schedules = None if rate is None else np.cumsum(rng.exponential(clients / rate, (clients, per_client)), axis=1)
    results, go = multiprocessing.Queue(), multiprocessing.Event()
    workers, readies = [], []
    first = 0
    for p in range(processes):
        share = clients // processes + (1 if p < clients % processes else 0)
        ready = multiprocessing.Event()
        mine = None if schedules is None else schedules[first:first + share].tolist()
        first += share
        w = multiprocessing.Process(target=_process, args=(url, model, x, outputs, share, per_client,
                                                           "load%d-%d" % (os.getpid(), p), ready, go, results, mine))
        w.start()
        workers.append(w)
        readies.append(ready)
    for ready in readies:
        ready.wait(60)
    t0 = time.perf_counter()
    go.set()
    latencies, failed = [], 0
    for _ in workers:
        lat, f = results.get(timeout=600)
        latencies += lat
        failed += f
    wall = time.perf_counter() - t0
    for w in workers:
        w.join()
    ms = np.array(latencies) * 1e3
    ok = len(latencies) - failed
    return {"rate": ok / wall, "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "errors": failed, "ok": ok}
