#!/usr/bin/python3
"""Load test of `strider serve` on loopback with Debian's `hey`: throughput and p50/p99 latency
at 1, 8 and 64 concurrent clients, dynamic batching off and on, per model; then optionally a
soak (fixed duration under load) sampling the server's resident memory.

With --devices "A;B" (two device lists, e.g. "cuda:0;cuda:0,1"), the two servers are both
batched and differ in their devices instead, and the table compares them (issue 17: one GPU
against two); --instances-per-device sets K for both.

Each request is one image (batch 1) sent with the binary tensor data extension, so the
client's JSON work does not dominate; or with --transport shm, by shm_load.py's clients
through Triton's system shared-memory extension (each client's image and outputs in a
region of its own: the request carries no tensor bytes); with --client, by the native client
(load_client.cc: a thread per connection, either transport, and an open loop without the
Python client's added latency). Every configuration runs a fixed number of requests;
any non-200 answer or transport error is counted and printed. Client and server share the
machine: on a 2-core CPU the client takes part of it.

  bench/serve-load/run.py --strider build/strider [--client build/bench/serve_load_client]
      [--models c2f,mobilenetv2] [--device cpu]
      [--clients 1,8,64] [--requests 400] [--max-batch 8] [--delay-us 0] [--soak-s 180]
      [--devices "cuda:0;cuda:0,1"] [--instances-per-device K] [--transport binary|shm]
      [--model-dir DIR]   (exported by export.py when missing)
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"c2f": (1, 16, 40, 40), "mobilenetv2": (1, 3, 224, 224)}


def start(args, model_dir, models, batching, work, device=None):
    tag = ("batched" if batching else "unbatched") + "-" + re.sub(r"[^\w]", "_", device or args.device)
    port_file = os.path.join(work, "port-" + tag)
    if os.path.exists(port_file):  # left by an earlier server of this run
        os.remove(port_file)
    cmd = [args.strider, "serve", "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "-1", "--port-file", port_file,
           "--device", device or args.device, "--dtype", args.dtype, "--max-queue", "1024",
           "--instances-per-device", str(args.instances_per_device)]
    for m in models:
        cmd += ["--model", "%s=%s" % (m, os.path.join(model_dir, m, "1", "model.onnx"))]
    if batching:
        cmd += ["--max-batch", str(args.max_batch), "--max-queue-delay-us", str(args.delay_us)]
    log = open(os.path.join(work, "server-%s.log" % tag), "w")
    server = subprocess.Popen(cmd + args.server_args.split(), stderr=log)
    deadline = time.time() + 600
    while not os.path.exists(port_file):
        if server.poll() is not None or time.time() > deadline:
            sys.exit("the server did not start: see %s" % log.name)
        time.sleep(0.2)
    ports = dict(line.split() for line in open(port_file).read().splitlines())
    return server, "http://127.0.0.1:%s" % ports["http"]


def stop(server):
    server.send_signal(signal.SIGTERM)
    code = server.wait(timeout=60)
    if code != 0:
        print("warning: the server exited with %d" % code)


def request_body(model, work):
    x = np.random.default_rng(3).standard_normal(SHAPES[model]).astype(np.float32)
    head = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()
    path = os.path.join(work, model + ".body")
    with open(path, "wb") as f:
        f.write(head + x.tobytes())
    return path, len(head)


def hey(url, model, body, head_length, clients, requests=None, seconds=None):
    cmd = ["hey", "-c", str(clients), "-m", "POST", "-T", "application/octet-stream",
           "-H", "Inference-Header-Content-Length: %d" % head_length, "-D", body, "-t", "60"]
    cmd += ["-z", "%ds" % seconds] if seconds else ["-n", str(requests)]
    out = subprocess.run(cmd + ["%s/v2/models/%s/infer" % (url, model)], capture_output=True, text=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    pct = {int(p): float(s) * 1e3 for p, s in re.findall(r"(\d+)%+ in ([\d.]+) secs", out)}
    codes = {int(c): int(n) for c, n in re.findall(r"\[(\d+)\]\s+(\d+) responses", out)}
    errors = sum(n for c, n in codes.items() if c != 200)
    transport = re.search(r"Error distribution:(.*)", out, re.S)
    if transport:
        errors += sum(int(n) for n in re.findall(r"\[(\d+)\]", transport.group(1)))
    return {"rate": rate, "p50": pct.get(50, float("nan")), "p99": pct.get(99, float("nan")), "errors": errors,
            "ok": codes.get(200, 0)}


def native_client(args, url, model, clients, requests, rate=None):
    """The figures of bench/serve-load/load_client.cc (--client): a thread per connection,
    closed loop or open loop at `rate`, either transport."""
    cmd = [args.client, "--url", url.split("//", 1)[1], "--model", model, "--shape", "x".join(map(str, SHAPES[model])),
           "--transport", args.transport, "--connections", str(clients), "--requests", str(requests)]
    if rate:
        cmd += ["--rate", str(rate)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0 and not out.stdout.strip():
        sys.exit("the load client failed: " + out.stderr[-400:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def load(args, url, model, body, head_length, clients, requests=None, seconds=None, rate=None):
    """One configuration's figures, by the native client (--client), by `hey` with the binary
    extension or by shm_load.py (closed loop, or open loop at `rate` requests/s)."""
    if args.client and not (seconds and args.transport == "binary"):  # a binary soak stays on `hey -z`
        if seconds:  # a shared-memory soak: rounds of requests, as shm_load.py's
            requests = max(requests or 0, clients * 200)
        return native_client(args, url, model, clients, requests, rate)
    if args.transport == "binary":
        return hey(url, model, body, head_length, clients, requests, seconds)
    import urllib.request
    import shm_load
    meta = json.loads(urllib.request.urlopen("%s/v2/models/%s" % (url, model), timeout=10).read())
    widths = {"FP32": 4, "FP16": 2, "BF16": 2, "INT64": 8, "INT32": 4, "BOOL": 1}
    outputs = [(o["name"], widths[o["datatype"]] * int(np.prod([1 if d < 0 else d for d in o["shape"]])))
               for o in meta["outputs"]]
    x = np.random.default_rng(3).standard_normal(SHAPES[model]).astype(np.float32)
    if seconds:  # a soak: about what the binary transport moved in that time, in rounds
        requests = max(requests or 0, clients * 200)
    return shm_load.run(url, model, x, outputs, clients, requests, rate=rate)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def soak(args, model_dir, model, work):
    server, url = start(args, model_dir, [model], True, work)
    body, head = request_body(model, work)
    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            samples.append((time.time(), rss_kib(server.pid)))
            done.wait(5)
    t = threading.Thread(target=sample)
    t.start()
    r = load(args, url, model, body, head, 16, seconds=args.soak_s)
    if r["errors"]:
        print("soak: %d requests failed" % r["errors"])
    done.set()
    t.join()
    stop(server)
    start_t = samples[0][0]
    third = samples[len(samples) // 3][1]
    late = max(s[1] for s in samples[len(samples) // 3:])
    print("\nsoak: %s, batching on, 16 clients, %d s: %d requests ok, %d failed, %.1f req/s" %
          (model, args.soak_s, r["ok"], r["errors"], r["rate"]))
    print("resident memory (MiB) every 5 s: " + " ".join("%.0f" % (s[1] / 1024) for s in samples))
    print("after the first third: %.1f MiB, most after it: %.1f MiB (%+.1f%%): %s" %
          (third / 1024, late / 1024, 100.0 * (late - third) / third, "flat" if late <= third * 1.05 else "GROWING"))
    return samples, start_t


def batch_figures(url, model):
    """The batched server's running totals for `model` from /metrics: batches, rows, batches
    of one row, and microseconds spent in its runs."""
    import urllib.request
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    label = 'model="%s"' % model
    figures = {"batches": 0, "rows": 0, "single": 0, "compute_us": 0}
    for line in text.splitlines():
        if label not in line or line.startswith("#"):
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("strider_batch_size_count"):
            figures["batches"] = value
        elif line.startswith("strider_batch_size_sum"):
            figures["rows"] = value
        elif line.startswith("strider_batch_size_bucket") and 'le="1"' in line:
            figures["single"] = value
        elif line.startswith("nv_inference_compute_infer_duration_us"):
            figures["compute_us"] = value
    return figures


def latency_bound(args, servers, configs, rows, model, body, head):
    """Open-loop rates (--rates): for each offered rate, both servers' achieved rate and
    p50/p99; then the most each sustains with its p99 within --bound times the single-request
    latency (the unbatched server's p50 at one closed-loop client; and, as a second reading,
    its p50 for one request at a time on an idle server). A closed loop of 64
    clients cannot show this: there the latency is 64 / throughput by Little's law."""
    clients = args.rate_clients
    single = next((r["p50"] for r in rows if r["model"] == model and r["clients"] == 1 and not r["batching"]), None)
    if single is None:
        single = load(args, servers[configs[0][0]][1], model, body, head, 1, requests=args.requests)["p50"]
    limit = args.bound * single
    # The other reading of "single-request latency": one request reaching an idle server
    # (an open loop of one connection at --idle-rate), which costs more than one of a
    # back-to-back stream (caches, idle cores, sleeping threads: docs/SERVING.md).
    idle = load(args, servers[configs[0][0]][1], model, body, head, 1, requests=args.idle_requests,
                rate=args.idle_rate)["p50"]
    idle_limit = args.bound * idle
    print("\n%s open loop, %d connections, single-request latency %.2f ms, p99 bound %.2f ms" % (model, clients, single, limit))
    print("(one request on an idle server, %.0f requests/s over one connection: p50 %.2f ms, bound %.2f ms)" %
          (args.idle_rate, idle, idle_limit))
    print("| offered req/s | %s req/s | p50 / p99 ms | %s req/s | p50 / p99 ms | failed |" % (configs[0][0], configs[1][0]))
    print("|---:|---:|---:|---:|---:|---:|")
    best = {label: 0.0 for label, _, _ in configs}
    best_idle = {label: 0.0 for label, _, _ in configs}
    for rate in [float(r) for r in args.rates.split(",")]:
        got = {}
        for label, (server, url) in servers.items():
            got[label] = load(args, url, model, body, head, clients, requests=max(args.requests, int(rate * args.rate_s)),
                              rate=rate)
            r = got[label]
            # Latencies count from when each request was due, so a server falling behind
            # shows in the p99; the achieved rate undercounts by the schedule's ragged end.
            if r["errors"] == 0 and r["p99"] <= limit:
                best[label] = max(best[label], rate)
            if r["errors"] == 0 and r["p99"] <= idle_limit:
                best_idle[label] = max(best_idle[label], rate)
        a, b = (got[label] for label, _, _ in configs)
        print("| %.0f | %.1f | %.2f / %.2f | %.1f | %.2f / %.2f | %d |" % (rate, a["rate"], a["p50"], a["p99"], b["rate"],
                                                                        b["p50"], b["p99"], a["errors"] + b["errors"]),
              flush=True)
    for reading, table, bound in (("back to back", best, limit), ("idle", best_idle, idle_limit)):
        first, second = (table[label] for label, _, _ in configs)
        print("%s: most offered with p99 <= %.2f ms (%s): %s %.0f req/s, %s %.0f req/s (%s)" %
              (model, bound, reading, configs[0][0], first, configs[1][0], second,
               "%.2fx" % (second / first) if first else "the first met the bound at no rate offered"), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strider", required=True)
    p.add_argument("--models", default="c2f,mobilenetv2")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="f32")
    p.add_argument("--clients", default="1,8,64")
    p.add_argument("--requests", type=int, default=400, help="per configuration (at least 4x the clients)")
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--delay-us", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per configuration (medians)")
    p.add_argument("--soak-s", type=int, default=0)
    p.add_argument("--model-dir", default=os.path.join(HERE, "models"))
    p.add_argument("--server-args", default="", help="more options for strider serve, as one string")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--devices", help='two device lists "A;B": both servers batched, A against B')
    p.add_argument("--instances-per-device", type=int, default=1)
    p.add_argument("--client", help="build/bench/serve_load_client: the native load client for every configuration "
                                    "(either transport; open loop without the Python client's added latency)")
    p.add_argument("--rates", help="with --transport shm or --client: open-loop offered rates (req/s), e.g. 1000,2000,4000")
    p.add_argument("--rate-s", type=float, default=2.0, help="seconds of requests per offered rate")
    p.add_argument("--rate-clients", type=int, default=64, help="connections of the open loop")
    p.add_argument("--bound", type=float, default=4.0, help="the p99 bound, in single-request latencies")
    p.add_argument("--idle-rate", type=float, default=50.0,
                   help="the open loop's second reading: one connection at this rate gives the latency of a "
                        "request on an idle server")
    p.add_argument("--idle-requests", type=int, default=200)
    p.add_argument("--transport", choices=["binary", "shm"], default="binary",
                   help="binary: hey with the binary tensor extension; shm: shm_load.py's shared-memory clients")
    args = p.parse_args()
    if args.rates and args.transport != "shm" and not args.client:
        p.error("--rates needs --client or --transport shm (hey has no open loop)")
    models = args.models.split(",")
    if not all(os.path.exists(os.path.join(args.model_dir, m, "1", "model.onnx")) for m in models):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export.py"), args.model_dir], check=True)
    work = tempfile.mkdtemp(prefix="strider-load-")
    # Both servers run at once, idle while the other is measured; their runs alternate, round
    # after round, so a drift of the machine's speed hits both alike; medians over rounds.
    # A configuration: (label, device list, batching); the table's second over its first.
    if args.devices:
        first, second = args.devices.split(";")
        configs = [(first, first, True), (second, second, True)]
    else:
        configs = [("unbatched", args.device, False), ("batched", args.device, True)]
    servers = {label: start(args, args.model_dir, models, batching, work, device) for label, device, batching in configs}
    batched_label = configs[1][0]
    rows = []
    for m in models:
        body, head = request_body(m, work)
        for label, (server, url) in servers.items():
            load(args, url, m, body, head, 4, requests=40)  # warm the connections and plans
        for c in [int(c) for c in args.clients.split(",")]:
            runs = {label: [] for label, _, _ in configs}
            before = batch_figures(servers[batched_label][1], m)
            for _ in range(args.rounds):
                for label, (server, url) in servers.items():
                    runs[label].append(load(args, url, m, body, head, c, requests=max(args.requests, 4 * c)))
            for label, device, batching in configs:
                r = {k: float(np.median([x[k] for x in runs[label]])) for k in ("rate", "p50", "p99")}
                r["errors"] = sum(x["errors"] for x in runs[label])
                rows.append(dict(model=m, config=label, device=device, batching=batching, clients=c, **r))
                print("%-12s %-14s %3d clients: %8.1f req/s  p50 %7.2f ms  p99 %7.2f ms  %d failed" %
                      (m, label, c, r["rate"], r["p50"], r["p99"], r["errors"]), flush=True)
            after = batch_figures(servers[batched_label][1], m)
            d = {k: after[k] - before[k] for k in after}
            if d["batches"] > 0:
                # compute_us counts each request of a batch with the batch's run time
                print("%-12s batching on  %3d clients: %d batches, %.1f rows each, %.0f%% of one row, "
                      "%.3f ms of run a row" % (m, c, d["batches"], d["rows"] / d["batches"],
                                                100.0 * d["single"] / d["batches"],
                                                d["compute_us"] / 1000.0 / max(d["rows"], 1) / max(d["rows"] / d["batches"], 1)),
                      flush=True)
    if args.rates:
        for m in models:
            body, head = request_body(m, work)
            latency_bound(args, servers, configs, rows, m, body, head)
    for server, url in servers.values():
        stop(server)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n| model | clients | %s req/s | p50 / p99 ms | %s req/s | p50 / p99 ms | speed-up | failed |" %
          (configs[0][0], configs[1][0]))
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for m in models:
        for c in [int(c) for c in args.clients.split(",")]:
            off = next(r for r in rows if r["model"] == m and r["clients"] == c and r["config"] == configs[0][0])
            on = next(r for r in rows if r["model"] == m and r["clients"] == c and r["config"] == configs[1][0])
            print("| %s | %d | %.1f | %.2f / %.2f | %.1f | %.2f / %.2f | %.2fx | %d |" %
                  (m, c, off["rate"], off["p50"], off["p99"], on["rate"], on["p50"], on["p99"],
                   on["rate"] / off["rate"], off["errors"] + on["errors"]))
    if args.soak_s:
        soak(args, args.model_dir, models[-1], work)


main()
