"""What CUPTI's Activity API (cupti-python) gives inside a PyTorch process, and what it costs.

Run on the GPU machine (``GPU_CHECK_STEPS=cupti-probe bash scripts/gpu_check.sh``). Each configuration
runs in a process of its own (CUPTI's state cannot be fully undone in one), alternated over rounds:

- cost: host time per iteration of a small loop (one 64 KiB pinned non_blocking copy and three small
  kernels) with nothing, with MEMCPY + CONCURRENT_KERNEL records, with latency timestamps, with
  RUNTIME / DRIVER records, with RUNTIME records of a few callback ids only, and with an external
  correlation id pushed and popped per iteration;
- records: what a memcpy and a kernel record hold (srcKind, stream, queued/submitted), whether
  kernel launch times (``queued``) fall inside the host window of the launch, from the main thread
  and from autograd's backward thread, and how CUPTI's clock relates to ``time.perf_counter_ns``;
- copies of 64 KiB, 1 MiB and 38 MiB in each copy kind, timed by CUPTI here and by torch.profiler in
  a process of its own;
- coexistence: torch.profiler started while pinprof's records are on, and the other way round;
- boundaries without latency timestamps (``mk_cudaevent``, ``records_cudaevent``): CUDA_EVENT records
  on, latency timestamps off, one CUDA event recorded a step. Its record's correlation id is the
  order of that moment among every launch of the process, so a step's kernels would be those whose
  ids fall between two boundaries: what pinprof now reads from each kernel's ``queued`` time, which
  needs latency timestamps (their cost per launch is ``mk_latency`` less ``mk``). The check counts
  the kernels between consecutive boundaries of a loop whose backward runs on autograd's thread.

``--only CFG ...`` runs just those configurations (the cost ones over ``--rounds``, the others once).

Prints one JSON line per configuration and a summary; writes the raw records of the ``records``
configuration to ``$OUT/cupti_records.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

KiB, MiB = 1 << 10, 1 << 20


def _now() -> int:
    return time.perf_counter_ns()


class Sink:
    """Buffer callbacks that keep every record as a small dict."""

    def __init__(self) -> None:
        self.recs: list[dict[str, Any]] = []
        self.callbacks = 0
        self.cb_ns = 0
        self.threads: set[int] = set()

    def requested(self) -> tuple[int, int]:
        return 4 * MiB, 0

    def completed(self, acts: list[Any]) -> None:
        t0 = _now()
        self.threads.add(threading.get_ident())
        self.callbacks += 1
        for a in acts:
            self.recs.append(extract(a))
        self.cb_ns += _now() - t0


def extract(a: Any) -> dict[str, Any]:
    from cupti import cupti

    k = cupti.ActivityKind(a.kind)
    d: dict[str, Any] = {"kind": k.name}
    if k == cupti.ActivityKind.MEMCPY:
        for f in (
            "start",
            "end",
            "bytes",
            "copy_kind",
            "src_kind",
            "dst_kind",
            "stream_id",
            "correlation_id",
            "device_id",
            "context_id",
            "runtime_correlation_id",
        ):
            d[f] = int(getattr(a, f))
    elif k in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.KERNEL):
        for f in ("start", "end", "queued", "submitted", "stream_id", "correlation_id", "device_id"):
            d[f] = int(getattr(a, f))
        d["name"] = str(a.name)[:60]
    elif k in (cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
        for f in ("start", "end", "cbid", "thread_id", "correlation_id"):
            d[f] = int(getattr(a, f))
    elif k == cupti.ActivityKind.EXTERNAL_CORRELATION:
        for f in ("correlation_id", "external_id", "external_kind"):
            d[f] = int(getattr(a, f))
    elif k.name == "CUDA_EVENT":
        for f in ("correlation_id", "stream_id", "event_id", "device_timestamp", "cuda_event_sync_id"):
            d[f] = int(getattr(a, f, -1))
    elif k == cupti.ActivityKind.MEMSET:
        for f in ("start", "end", "bytes", "stream_id", "correlation_id"):
            d[f] = int(getattr(a, f))
    return d


def cbids(names: tuple[str, ...], enum: Any) -> list[int]:
    return [int(m) for m in enum if any(n in m.name for n in names)]


def enable(config: str, sink: Sink) -> list[str]:
    """Turn on what ``config`` asks for; returns the errors met."""
    from cupti import cupti

    errors: list[str] = []
    A = cupti.ActivityKind
    kinds = [A.MEMCPY, A.CONCURRENT_KERNEL]
    if "runtime" in config or "ext" in config or "selective" in config:
        kinds.append(A.RUNTIME)
    if "driver" in config:
        kinds.append(A.DRIVER)
    if "ext" in config:
        kinds.append(A.EXTERNAL_CORRELATION)
    if "cudaevent" in config:
        kinds.append(A.CUDA_EVENT)
    try:
        cupti.activity_register_callbacks(sink.requested, sink.completed)
    except Exception as e:
        errors.append(f"register_callbacks: {type(e).__name__}: {e}")
    for k in kinds:
        try:
            cupti.activity_enable(k)
        except Exception as e:
            errors.append(f"enable {k.name}: {type(e).__name__}: {e}")
    if "latency" in config:
        try:
            cupti.activity_enable_latency_timestamps(1)
        except Exception as e:
            errors.append(f"latency: {type(e).__name__}: {e}")
    if "cudaevent" in config and config.startswith("records"):
        try:  # CUDA 12.8 and later: the device's time of each event record
            cupti.activity_enable_cuda_event_device_timestamps(1)
        except Exception as e:
            errors.append(f"cuda event device timestamps: {type(e).__name__}: {e}")
    if "selective" in config:
        keep = set(cbids(("Memcpy", "LaunchKernel"), cupti.runtime_api_trace_cbid))
        n = 0
        for m in cupti.runtime_api_trace_cbid:
            if m.name in ("INVALID", "SIZE", "FORCE_INT"):
                continue
            try:
                cupti.activity_enable_runtime_api(int(m), 1 if int(m) in keep else 0)
                n += 1
            except Exception as e:
                errors.append(f"enable_runtime_api {m.name}: {e}")
                break
        errors.append(f"(selective: {n} cbids set, {len(keep)} kept)")
    return errors


def small_loop(n: int, ext: bool = False, boundary: bool = False) -> list[float]:
    """Host us per iteration, one median per block of 100; ``boundary``: a CUDA event recorded at the
    start of each iteration, as a step boundary would be."""
    import torch

    from_cupti = None
    if ext:
        from cupti import cupti

        from_cupti = cupti
    dev = torch.device("cuda")
    src = torch.randint(0, 255, (64 * KiB,), dtype=torch.uint8).pin_memory()
    side = torch.cuda.Stream()
    mark = torch.cuda.Event() if boundary else None
    blocks: list[float] = []
    per: list[float] = []
    for i in range(n):
        t0 = _now()
        if mark is not None:
            mark.record()
        if from_cupti is not None:
            from_cupti.activity_push_external_correlation_id(from_cupti.ExternalCorrelationKind.CUSTOM0, i + 1)
        with torch.cuda.stream(side):
            x = src.to(dev, non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        y = x.float().mul_(2).add_(1)
        if from_cupti is not None:
            from_cupti.activity_pop_external_correlation_id(from_cupti.ExternalCorrelationKind.CUSTOM0)
        per.append((_now() - t0) / 1e3)
        del y
        if len(per) == 100:
            torch.cuda.synchronize()
            blocks.append(statistics.median(per))
            per = []
    torch.cuda.synchronize()
    return blocks


def clock_pairs(k: int = 7) -> list[tuple[int, int, int]]:
    """(perf_counter_ns before, CUPTI timestamp, perf_counter_ns after), k tries."""
    from cupti import cupti

    out = []
    for _ in range(k):
        a = _now()
        c = int(cupti.get_timestamp())
        b = _now()
        out.append((a, c, b))
    return out


def offset_of(pairs: list[tuple[int, int, int]]) -> tuple[float, float]:
    """(CUPTI minus perf_counter ns at the tightest pair, its round trip ns)."""
    a, c, b = min(pairs, key=lambda p: p[2] - p[0])
    return c - (a + b) / 2, b - a


def copies_and_launches(sink: Sink) -> dict[str, Any]:
    """Known copies and launches with their host windows (perf_counter ns)."""
    import torch

    dev = torch.device("cuda")
    side = torch.cuda.Stream()
    log: list[dict[str, Any]] = []
    gen = torch.Generator().manual_seed(0)
    for size in (64 * KiB, 1 * MiB, 38 * MiB):
        pinned = torch.randint(0, 255, (size,), dtype=torch.uint8, generator=gen).pin_memory()
        pageable = torch.randint(0, 255, (size,), dtype=torch.uint8, generator=gen)
        for rep in range(12):
            for what in ("pinned_nb", "pinned", "pageable"):
                src = pageable if what == "pageable" else pinned
                t0 = _now()
                if what == "pinned_nb":
                    with torch.cuda.stream(side):
                        x = src.to(dev, non_blocking=True)
                    torch.cuda.current_stream().wait_stream(side)
                else:
                    x = src.to(dev)
                t1 = _now()
                log.append({"what": what, "bytes": size, "rep": rep, "call_s": t0, "call_e": t1})
                del x
            torch.cuda.synchronize()
    # a dict batch with a non-dense image view (alpha sliced off) and a 0.5 MiB blocking batch
    img = torch.randint(0, 255, (64, 4, 64, 64), dtype=torch.uint8).pin_memory()
    ids = torch.randint(0, 30000, (128, 512), dtype=torch.int64).pin_memory()
    for rep in range(12):
        t0 = _now()
        view = img[:, :3]
        out = {k: v.to(dev, non_blocking=True) for k, v in {"img": view, "lab": ids[:, :1]}.items()}
        t1 = _now()
        log.append({"what": "dict_view", "bytes": view.numel() + 128 * 8, "rep": rep, "call_s": t0, "call_e": t1})
        t0 = _now()
        out2 = {"input_ids": ids[:64].to(dev), "mask": ids[64:].to(dev)}
        t1 = _now()
        log.append({"what": "blocking_half_mib", "bytes": ids.numel() * 8, "rep": rep, "call_s": t0, "call_e": t1})
        del out, out2
    torch.cuda.synchronize()
    # launches: main thread, and backward (autograd's device thread)
    w = torch.randn(512, 512, device=dev, requires_grad=True)
    a = torch.randn(256, 512, device=dev)
    for rep in range(10):
        t0 = _now()
        y = (a @ w).relu().sum()
        t1 = _now()
        y.backward()
        t2 = _now()
        log.append({"what": "forward", "rep": rep, "call_s": t0, "call_e": t1})
        log.append({"what": "backward", "rep": rep, "call_s": t1, "call_e": t2})
    torch.cuda.synchronize()
    return {"log": log}


def boundary_steps(steps: int = 30) -> None:
    """Training-like steps (forward on this thread, backward on autograd's), a CUDA event recorded
    at each step's start and after the last: the boundaries ``boundary_check`` reads."""
    import torch

    dev = torch.device("cuda")
    w = torch.randn(512, 512, device=dev, requires_grad=True)
    a = torch.randn(256, 512, device=dev)
    mark = torch.cuda.Event()
    for _ in range(steps):
        mark.record()
        y = (a @ w).relu().sum()
        y.backward()
    mark.record()
    torch.cuda.synchronize()


def boundary_check(recs: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Kernels between consecutive boundaries, by correlation id: the boundaries are the records of
    the one event recorded ``steps + 1`` times. Equal counts a step (and none left between the
    steps) say the ids order every launch, autograd's thread's too."""
    events = [r for r in recs if r["kind"] == "CUDA_EVENT"]
    by_id: dict[int, list[int]] = {}
    for r in events:
        by_id.setdefault(r["event_id"], []).append(r["correlation_id"])
    ours = [k for k, v in by_id.items() if len(v) == steps + 1]
    out: dict[str, Any] = {"cuda_event_records": len(events), "event_ids": len(by_id)}
    if len(ours) != 1:
        out["boundary"] = f"no single event id recorded {steps + 1} times ({sorted(len(v) for v in by_id.values())})"
        return out
    bounds = sorted(by_id[ours[0]])
    kern = sorted(r["correlation_id"] for r in recs if r["kind"] == "CONCURRENT_KERNEL")
    counts = [sum(1 for c in kern if lo < c < hi) for lo, hi in itertools.pairwise(bounds)]
    out["kernels_per_step"] = counts
    out["kernels_inside"] = sum(counts)
    out["kernels_in_run"] = sum(1 for c in kern if bounds[0] < c < bounds[-1])
    stamps = sorted(r["device_timestamp"] for r in events if r["event_id"] == ours[0] and r["device_timestamp"] > 0)
    out["device_timestamps"] = len(stamps)
    return out


def child(config: str, n: int) -> dict[str, Any]:
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    res: dict[str, Any] = {"config": config}
    sink = Sink()
    if config.startswith("kineto_first"):
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            small_loop(200)
            res["errors"] = enable("mk", sink)
            res["blocks_us"] = small_loop(n)
            try:
                from cupti import cupti

                cupti.activity_flush_all(1)
            except Exception as e:
                res["errors"].append(f"flush: {e}")
        res["kineto_events"] = sum(1 for e in prof.events() if "Memcpy" in e.name)
    elif config != "none":
        res["errors"] = enable(config, sink)
        res["clock0"] = clock_pairs()
    if config not in ("none",) and not config.startswith("kineto_first"):
        boundary = "cudaevent" in config
        small_loop(300, ext="ext" in config, boundary=boundary)  # warm-up
        res["blocks_us"] = small_loop(n, ext="ext" in config, boundary=boundary)
    elif config == "none":
        small_loop(300)
        res["blocks_us"] = small_loop(n)
    if config == "records_cudaevent":
        boundary_steps()
    elif config.startswith("records"):
        res.update(copies_and_launches(sink))
    if config.startswith("kineto_after"):
        from torch.profiler import ProfilerActivity, profile

        before = len(sink.recs)
        from cupti import cupti

        cupti.activity_flush_all(1)
        if config == "kineto_after_release":
            for k in (cupti.ActivityKind.MEMCPY, cupti.ActivityKind.CONCURRENT_KERNEL):
                cupti.activity_disable(k)
            cupti.activity_flush_all(1)
        mid = len(sink.recs)
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                small_loop(200)
            res["kineto_events"] = sum(1 for e in prof.events() if "Memcpy" in e.name)
        except Exception as e:
            res["kineto_error"] = f"{type(e).__name__}: {e}"
        after_prof = len(sink.recs)
        if config == "kineto_after_release":
            try:
                cupti.activity_register_callbacks(sink.requested, sink.completed)
                for k in (cupti.ActivityKind.MEMCPY, cupti.ActivityKind.CONCURRENT_KERNEL):
                    cupti.activity_enable(k)
            except Exception as e:
                res["reenable_error"] = f"{type(e).__name__}: {e}"
        small_loop(200)
        try:
            cupti.activity_flush_all(1)
        except Exception as e:
            res["flush_error"] = f"{e}"
        res["records_before_during_after"] = [before, mid, after_prof, len(sink.recs)]
    if config != "none":
        try:
            from cupti import cupti

            cupti.activity_flush_all(1)
        except Exception as e:
            res.setdefault("errors", []).append(f"final flush: {e}")
        time.sleep(0.2)
        res["clock1"] = clock_pairs()
        counts: dict[str, int] = {}
        for r in sink.recs:
            counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        res["counts"] = counts
        res["callbacks"] = sink.callbacks
        res["cb_us_per_record"] = sink.cb_ns / 1e3 / max(1, len(sink.recs))
        res["callback_on_main"] = threading.get_ident() in sink.threads
        kern = [r for r in sink.recs if r["kind"] == "CONCURRENT_KERNEL"]
        if kern:
            res["queued_known"] = sum(1 for r in kern if 0 < r["queued"] < (1 << 63)) / len(kern)
            res["kernel_example"] = kern[len(kern) // 2]
        mem = [r for r in sink.recs if r["kind"] == "MEMCPY"]
        if mem:
            res["memcpy_example"] = mem[len(mem) // 2]
        if config == "records_cudaevent":
            res["boundaries"] = boundary_check(sink.recs, 30)
        elif config.startswith("records"):
            res["records"] = sink.recs
    if res.get("blocks_us"):
        res["us_per_iter"] = statistics.median(res["blocks_us"])
    return res


def kineto_copies() -> dict[str, Any]:
    """The same copies as ``copies_and_launches``, timed by torch.profiler (its own process)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.zeros(1, device="cuda")
    sink = Sink()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        copies_and_launches(sink)
    fd = os.path.join(os.environ.get("OUT", "/tmp"), "kineto_trace.json")
    prof.export_chrome_trace(fd)
    with open(fd, encoding="utf-8") as fh:
        trace = json.load(fh)
    os.unlink(fd)
    rows = []
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") == "X" and ev.get("cat") in ("gpu_memcpy", "kernel"):
            rows.append(
                {
                    "cat": ev["cat"],
                    "name": ev["name"][:50],
                    "dur_us": ev.get("dur"),
                    "bytes": ev.get("args", {}).get("bytes"),
                }
            )
    return {"config": "kineto_copies", "rows": rows}


def summarize_copies(records: list[dict[str, Any]], kineto: list[dict[str, Any]]) -> None:
    """Median memcpy time by (bytes, srcKind) from our records and from torch.profiler's."""
    ours: dict[tuple[int, int], list[float]] = {}
    for r in records:
        if r["kind"] == "MEMCPY" and r["copy_kind"] == 1:
            ours.setdefault((r["bytes"], r["src_kind"]), []).append((r["end"] - r["start"]) / 1e3)
    theirs: dict[tuple[int, str], list[float]] = {}
    for r in kineto:
        if r["cat"] == "gpu_memcpy" and "HtoD" in r["name"]:
            kind = "pinned" if "Pinned" in r["name"] else "pageable"
            theirs.setdefault((int(r["bytes"] or 0), kind), []).append(float(r["dur_us"]))
    print("memcpy HtoD medians (us): bytes srcKind n ours | kineto by name")
    for (b, sk), v in sorted(ours.items()):
        if len(v) < 3:
            continue
        kind = {0: "pageable", 1: "pinned"}.get(sk, str(sk))
        t = theirs.get((b, kind), [])
        print(
            f"  {b:>10} {kind:>9} n={len(v):>3} ours {statistics.median(v):9.2f} | kineto n={len(t):>3} "
            f"{statistics.median(t) if t else float('nan'):9.2f}"
        )


def check_launch_windows(res: dict[str, Any]) -> None:
    """Do kernel ``queued`` times fall inside the host window of their launch?"""
    recs, log = res.get("records", []), res.get("log", [])
    if not recs or not log:
        return
    pairs = res["clock0"] + res["clock1"]
    off0, rt0 = offset_of(res["clock0"])
    off1, rt1 = offset_of(res["clock1"])
    print(
        f"clock: CUPTI - perf_counter = {off0:.0f} ns (rt {rt0} ns) at start, {off1:.0f} ns (rt {rt1}) at end; "
        f"drift {off1 - off0:.0f} ns; pairs {len(pairs)}"
    )
    kern = [r for r in recs if r["kind"] == "CONCURRENT_KERNEL"]
    for what in ("forward", "backward"):
        wins = [e for e in log if e["what"] == what]
        inside = total = 0
        for e in wins:
            s, t = e["call_s"] + off0, e["call_e"] + off0
            ks = [k for k in kern if s - 50_000 <= k["queued"] <= t + 50_000]
            total += len(ks)
            inside += sum(1 for k in ks if s <= k["queued"] <= t)
        print(f"  {what}: {len(wins)} windows, kernels queued within +-50 us {total}, strictly inside {inside}")
    # queued against the runtime launch call of the same correlation id (both on CUPTI's clock)
    api = {r["correlation_id"]: r for r in recs if r["kind"] in ("RUNTIME", "DRIVER")}
    lead, lag = [], []
    for k in kern:
        a = api.get(k["correlation_id"])
        if a is not None and 0 < k["queued"] < (1 << 63):
            lead.append(k["queued"] - a["start"])
            lag.append(a["end"] - k["queued"])
    if lead:
        q = statistics.quantiles(lead, n=10)
        print(
            f"  kernels with a launch record: {len(lead)}; queued - call start ns: min {min(lead)} p10 {q[0]:.0f} "
            f"median {statistics.median(lead):.0f} p90 {q[-1]:.0f}; call end - queued min {min(lag)} "
            f"median {statistics.median(lag):.0f}"
        )
    threads = {r["thread_id"] for r in recs if r["kind"] == "RUNTIME"}
    print(f"  runtime records from {len(threads)} threads")
    # memcpy start vs its host call window
    mem = sorted((r for r in recs if r["kind"] == "MEMCPY" and r["copy_kind"] == 1), key=lambda r: r["correlation_id"])
    print(
        f"  memcpy HtoD records {len(mem)}; correlation ids increasing in start order: "
        f"{all(a['start'] <= b['start'] for a, b in itertools.pairwise(mem))}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child", help="run one configuration in this process")
    ap.add_argument("--n", type=int, default=2000, help="timed iterations per configuration (default 2000)")
    ap.add_argument("--rounds", type=int, default=2, help="alternated rounds of the cost configurations (default 2)")
    ap.add_argument("--only", nargs="+", metavar="CFG", help="run just these configurations (default: all)")
    args = ap.parse_args()
    out = os.environ.get("OUT", "/tmp")
    if args.child == "kineto_copies":
        print("RESULT " + json.dumps(kineto_copies()))
        return
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.n)))
        return
    costs = [
        "none",
        "mk",
        "mk_latency",
        "mk_latency_runtime",
        "mk_latency_selective",
        "mk_latency_driver_runtime",
        "mk_latency_ext",
        "mk_cudaevent",
    ]
    others = [
        "records_latency_runtime",
        "records_cudaevent",
        "kineto_copies",
        "kineto_after",
        "kineto_after_release",
        "kineto_first",
    ]
    if args.only:
        unknown = [c for c in args.only if c not in costs and c not in others]
        if unknown:
            raise SystemExit(f"--only: unknown configuration(s) {unknown}; known: {costs + others}")
        costs = [c for c in costs if c in args.only]
        others = [c for c in others if c in args.only]
    nsys = os.environ.get("PINPROF_NSYS")
    results: dict[str, list[dict[str, Any]]] = {}

    def run(cfg: str, wrap: list[str] | None = None) -> None:
        n = 200 if cfg.startswith("records") else args.n
        cmd = [*(wrap or []), sys.executable, __file__, "--child", cfg, "--n", str(n)]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            print(f"{cfg}: timed out")
            return
        got = [json.loads(line[7:]) for line in p.stdout.splitlines() if line.startswith("RESULT ")]
        if not got:
            print(f"{cfg}: rc {p.returncode}, no result; stderr tail: {p.stderr[-1500:]}")
            return
        r = got[0]
        results.setdefault(cfg, []).append(r)
        brief = {k: v for k, v in r.items() if k not in ("records", "log", "rows", "blocks_us", "clock0", "clock1")}
        print(f"{cfg} ({time.time() - t0:.1f} s): {json.dumps(brief)[:1500]}")
        if p.returncode != 0:
            print(f"  rc {p.returncode}; stderr tail: {p.stderr[-800:]}")

    for _ in range(args.rounds):
        for cfg in costs:
            run(cfg)
    for cfg in others:
        run(cfg)
    if nsys:
        run(
            "mk_latency",
            wrap=[
                nsys,
                "profile",
                "--trace=cuda,nvtx",
                "--sample=none",
                "--cpuctxsw=none",
                "--force-overwrite=true",
                "-o",
                "/tmp/probe_nsys",
            ],
        )
    print("\ncost per iteration (us, medians of block medians, by round):")
    base = [r["us_per_iter"] for r in results.get("none", [])]
    for cfg in costs:
        v = [r.get("us_per_iter", float("nan")) for r in results.get(cfg, [])]
        extra = [x - b for x, b in zip(v, base)]
        print(f"  {cfg:<28} {' '.join(f'{x:7.2f}' for x in v)}   minus none: {' '.join(f'{x:6.2f}' for x in extra)}")
    for r in results.get("records_cudaevent", []):
        print(f"boundaries by correlation id (records_cudaevent): {json.dumps(r.get('boundaries'))}")
    rec = results.get("records_latency_runtime", [{}])[0]
    check_launch_windows(rec)
    summarize_copies(rec.get("records", []), results.get("kineto_copies", [{}])[0].get("rows", []))
    with open(os.path.join(out, "cupti_records.json"), "w", encoding="utf-8") as fh:
        json.dump(
            {
                "records": rec.get("records", []),
                "log": rec.get("log", []),
                "clock0": rec.get("clock0"),
                "clock1": rec.get("clock1"),
            },
            fh,
        )


if __name__ == "__main__":
    main()
