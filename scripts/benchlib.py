"""What the benchmark scripts share: one way to measure a process, one fake
launcher, the two clients' command lines, the page-cache handling and one
Markdown writer.

Used by scripts/bench, scripts/bench-link and scripts/soak (imported as
`benchlib`, from the scripts directory). Standard library only.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRUSS_VERSION = (REPO / "truss-version").read_text().strip()
RELEASE = REPO / "target" / "release"
BENCH = REPO / "target" / "bench"
MD = REPO / "BENCHMARKS.md"
MIB = 1024 * 1024
GIB = 1024 * MIB
PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# One sample per 50 ms is enough to see a process tree's resident set; the
# exact per-process peak comes from GNU time anyway.
SAMPLE_EVERY = 0.05
INSTANT_ACTIVE = REPO / "tests/fake-baseten/scenarios/instant-active.yaml"

# The truss-push binary measured; `scripts/bench --truss-push PATH` swaps it.
TRUSS_PUSH = RELEASE / "truss-push"
# Who is speaking in log lines.
WHO = "bench"
# The cargo/rustc watcher while measuring (see Intruders).
WATCH = None


def log(msg: str) -> None:
    print(f"{WHO}: {msg}", file=sys.stderr, flush=True)


def section(name: str) -> None:
    if WATCH:
        WATCH.section = name


def build_release(no_build: bool) -> None:
    if no_build:
        return
    log("building release binaries")
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-p", "truss-push", "-p", "fake-baseten", "--bins"],
        cwd=REPO, check=True,
    )


def commit() -> str:
    """HEAD's short hash, and whether the tree held changes besides."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return head + (" + uncommitted changes" if dirty else "")


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def python_venv() -> Path:
    return Path(subprocess.run([str(REPO / "scripts/python-env")], check=True, capture_output=True, text=True).stdout.strip())


# --- measuring one process ---------------------------------------------------


def _processes() -> dict[int, bytes]:
    """Every process's /proc/<pid>/stat fields after the command name."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                s = f.read()
        except OSError:
            continue
        out[int(d)] = s[s.rfind(b")") + 2 :].split()
    return out


def _descendants(root: int, procs: dict) -> list[int]:
    kids: dict[int, list[int]] = {}
    for pid, fields in procs.items():
        kids.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], list(kids.get(root, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(kids.get(p, []))
    return found


def _cpu(fields) -> float:
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_usage(root: int) -> tuple[int, float]:
    """Resident bytes and user+sys CPU seconds of the descendants of `root`
    (not `root` itself), now."""
    procs = _processes()
    pids = _descendants(root, procs)
    return sum(int(procs[p][21]) * PAGE for p in pids), sum(_cpu(procs[p]) for p in pids)


def tree_io(root: int, seen: dict[int, tuple[int, int]]) -> None:
    """Records in `seen` each descendant of `root`'s (`read_bytes`,
    `write_bytes`) from /proc/<pid>/io — the bytes it caused to be read
    from storage (a page-cache hit counts none) and written to it (counted
    when it dirties the page cache) — keeping each pid's highest reading."""
    for pid in _descendants(root, _processes()):
        try:
            with open(f"/proc/{pid}/io") as f:
                io = dict(line.split(": ") for line in f.read().splitlines())
        except (OSError, ValueError):
            continue
        r0, w0 = seen.get(pid, (0, 0))
        seen[pid] = (max(r0, int(io.get("read_bytes", 0))), max(w0, int(io.get("write_bytes", 0))))


def tree_threads(root: int) -> dict[str, tuple[str, float]]:
    """Each thread of each descendant of `root`: "pid/tid" → (its name,
    user+sys CPU seconds), from /proc/<pid>/task/<tid>/stat."""
    out = {}
    for pid in _descendants(root, _processes()):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    s = f.read()
            except OSError:
                continue
            name = s[s.find(b"(") + 1 : s.rfind(b")")].decode("utf-8", "replace")
            out[f"{pid}/{tid}"] = (name, _cpu(s[s.rfind(b")") + 2 :].split()))
    return out


class Measured:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def row(self) -> dict:
        """The numbers, without the samples (for the JSON results)."""
        return {k: v for k, v in vars(self).items() if k not in ("cpu_samples", "thread_samples")}


def measure(argv, env=None, cwd=None, stdout=None, on_line=None, threads=False) -> Measured:
    """Runs argv to completion under GNU time: wall, user+sys CPU of the
    whole tree, peak RSS = max(largest single process, 50 ms samples of the
    tree's sum), and the bytes the tree read from and wrote to storage.
    With `on_line`, stdout is read line by line and each line timestamped;
    with `threads`, each thread's CPU is sampled too (see thread_cpu).

    GNU time is the parent on purpose: a child's ru_maxrss starts at its
    parent's resident set at fork, so forking straight from this (larger)
    Python process would put a floor of its size under every reading."""
    out_file = stdout if stdout is not None else subprocess.DEVNULL
    BENCH.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(prefix="time-", dir=BENCH, delete=False) as rusage:
        pass
    t0 = time.time()
    m0 = time.monotonic()
    p = subprocess.Popen(
        ["/usr/bin/time", "-f", "%U %S %M", "-o", rusage.name, *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE if on_line else out_file,
        stderr=subprocess.STDOUT if on_line else out_file,
    )
    peak = [0]
    # The tree had used no CPU before it started: the first sample, so
    # that a moment before the sampler's first reading still has a bracket.
    cpu_samples: list[tuple[float, float]] = [(t0, 0.0)]
    thread_samples: list[tuple[float, dict]] = [(t0, {})]
    io: dict[int, tuple[int, int]] = {}
    done = threading.Event()

    def sample():
        while not done.is_set():
            rss, cpu = tree_usage(p.pid)
            peak[0] = max(peak[0], rss)
            cpu_samples.append((time.time(), cpu))
            if threads:
                thread_samples.append((time.time(), tree_threads(p.pid)))
            tree_io(p.pid, io)
            done.wait(SAMPLE_EVERY)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if on_line:
        for raw in p.stdout:
            on_line(time.time(), raw.decode("utf-8", "replace").rstrip("\n"))
    _, status, ru = os.wait4(p.pid, 0)
    t_end = time.time()
    p.returncode = rc = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - m0
    done.set()
    sampler.join()
    # GNU time prefixes "Command exited with non-zero status N" when it fails.
    maxrss_kib = Path(rusage.name).read_text().split("\n")[-2].split()[2]
    os.unlink(rusage.name)
    # wait4's microseconds, not time's centiseconds (start-up is ~ms); it
    # adds GNU time's own ~1 ms.
    cpu = ru.ru_utime + ru.ru_stime
    # Samples after the tree exited read less: cut there, and end on the
    # exact figure at exit, so every moment of the run has a bracket.
    live = cpu_samples[:1]
    for t1, c1 in cpu_samples[1:]:
        if c1 < live[-1][1]:
            break
        live.append((t1, c1))
    live.append((t_end, max(cpu, live[-1][1])))
    return Measured(
        start=t0,
        wall=wall,
        cpu=cpu,
        rss=max(int(maxrss_kib) * 1024, peak[0]),
        rc=rc,
        cpu_samples=live,
        thread_samples=thread_samples if threads else None,
        # Bytes read from / written to storage: the /proc/<pid>/io samples
        # of the tree (each pid's last reading before it exited), or the
        # block inputs / outputs wait4 reports for it at the end (512-byte
        # units, the same kernel counters, so I/O after the last sample
        # counts too), whichever is larger. A tmpfs counts in neither.
        disk_read=max(sum(r for r, _ in io.values()), ru.ru_inblock * 512),
        disk_write=max(sum(w for _, w in io.values()), ru.ru_oublock * 512),
    )


def cpu_at(samples: list[tuple[float, float]], t: float) -> float | None:
    """The tree's CPU seconds at wall time `t`, interpolated between the
    ~50 ms samples (CPU counters tick every 10 ms); None outside the run."""
    for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)
    return None


def thread_cpu(m: Measured, a: float, b: float) -> list[dict]:
    """Each thread's CPU seconds between wall times `a` and `b` (the
    readings nearest before each; a thread not yet started counts 0, one
    that ended keeps its last reading), busiest first."""

    def at(t):
        last: dict = {}
        for ts, reading in m.thread_samples or []:
            if ts > t:
                break
            last.update(reading)
        return last

    start, end = at(a), at(b)
    out = [
        {"thread": key, "name": name, "cpu": cpu - start.get(key, (name, 0.0))[1]}
        for key, (name, cpu) in end.items()
    ]
    return sorted((x for x in out if x["cpu"] > 0), key=lambda x: -x["cpu"])


# --- the page cache -------------------------------------------------------------


def cached_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1]) * 1024
    return 0


def _clear(p: Path) -> None:
    """Removes the file `p`, or what is inside the directory `p`."""
    if p.is_dir():
        for child in p.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    else:
        p.unlink(missing_ok=True)


def _read_all(paths: list[Path]) -> int:
    n = 0
    for root in paths:
        files = [root] if root.is_file() else [Path(d) / f for d, _, fs in os.walk(root) for f in fs]
        for p in files:
            if p.is_symlink() or not p.is_file():
                continue
            with open(p, "rb") as f:
                while chunk := f.read(8 * MIB):
                    n += len(chunk)
    return n


def prepare(cold: bool, inputs: list[Path], fake: "Fake | None" = None, clear: list[Path] = ()) -> dict:
    """The cache condition before one run, returned for its row. Either
    way: the fake's stored objects and whatever is in `clear` (the last
    run's temporary files) removed, then `sync`, so what the last run left
    dirty (a client's temporary archive) is written out now and not during
    this run (removed first, it needs no writing at all). Then `cold`:
    the kernel's clean page cache, dentries and inodes dropped (needs
    root), so the run reads its `inputs` from the disk; else the `inputs`
    read once, so the run reads them from the page cache whichever client
    went before."""
    if fake:
        fake.drop_objects()
    for p in clear:
        _clear(p)
    before = cached_bytes()
    t0 = time.monotonic()
    os.sync()
    synced = time.monotonic() - t0
    removed = "the fake's stored objects and the last run's temporary files removed; " if fake or clear else ""
    if cold:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError as e:
            raise SystemExit(f"{WHO}: cannot drop the page cache ({e}); --drop-caches needs root") from e
        cond = {"cache": "dropped", "method": f"{removed}sync; echo 3 > /proc/sys/vm/drop_caches"}
    else:
        n = _read_all(inputs)
        cond = {"cache": "warm", "method": f"{removed}sync; the input read once just before ({fmt_bytes(n)})"}
    return cond | {"sync_secs": synced, "cached_before": before, "cached_after": cached_bytes()}


def cache_note(cold: bool) -> str:
    """The cache condition of a table, in words."""
    if cold:
        return ("caches dropped before every run (the fake's stored objects and the last run's temporary files "
                "removed, `sync`, `echo 3 > /proc/sys/vm/drop_caches`): each client read its input from the disk")
    return ("warm caches: before every run the fake's stored objects and the last run's temporary files removed, "
            "`sync`, and the run's input read once, so each client read it from the page cache")


# --- the fake -----------------------------------------------------------------


class Fake:
    """The release fake-baseten, started with `scenario` and `api_key`;
    `extra` adds flags (a fault proxy's rules, a shaped link)."""

    def __init__(self, scenario: Path, api_key: str, store: Path | None = None, reqlog: Path | None = None,
                 extra: list[str] = (), stderr: Path | None = None):
        self.api_key = api_key
        self.store = store
        self.reqlog = reqlog
        self.offset = reqlog.stat().st_size if reqlog and reqlog.exists() else 0
        argv = [str(RELEASE / "fake-baseten"), "--scenario", str(scenario), "--api-key", api_key]
        if store:
            store.mkdir(parents=True, exist_ok=True)
            argv += ["--store-dir", str(store)]
        if reqlog:
            argv += ["--request-log", str(reqlog)]
        self.err = open(stderr, "wb") if stderr else None
        self.proc = subprocess.Popen([*argv, *extra], stdout=subprocess.PIPE, stderr=self.err)
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            detail = stderr.read_text(errors="replace")[-500:] if stderr else ""
            raise RuntimeError(f"the fake did not start{': ' + detail if detail else ''}")
        self.info = json.loads(line)

    def new_requests(self) -> list[dict]:
        with open(self.reqlog, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        return [json.loads(x) for x in data.splitlines() if x.strip()]

    def graphql(self, query: str) -> dict:
        req = urllib.request.Request(
            self.info["graphql_base"].rstrip("/") + "/graphql/",
            data=json.dumps({"query": query}).encode(),
            headers={"Authorization": f"Api-Key {self.api_key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def admin(self, path: str, timeout: float = 600):
        # The fake's own URL: admin reads never go through a proxy or link.
        return urllib.request.urlopen(self.info["url"].rstrip("/") + "/__fake/" + path, timeout=timeout)

    def deployments(self) -> list[dict]:
        with self.admin("deployments", timeout=30) as r:
            return json.load(r)

    def object_size(self, key: str) -> int | None:
        """The stored object's size, from the admin route's Content-Length
        (the body is not read)."""
        try:
            with self.admin(f"objects/{key}", timeout=30) as r:
                return int(r.headers["Content-Length"])
        except Exception:
            return None

    def save_object(self, key: str, dest: Path) -> None:
        with self.admin(f"objects/{key}") as r, open(dest, "wb") as f:
            shutil.copyfileobj(r, f, 8 * MIB)

    def drop_objects(self) -> None:
        """Frees the disk: stored objects and multipart parts (a multipart
        object is its parts, kept where UploadPart wrote them)."""
        if self.store:
            for d in ("objects", "uploads", "tmp"):
                shutil.rmtree(self.store / d, ignore_errors=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.err:
            self.err.close()


def epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


def analyse_push(reqs: list[dict], m: Measured, fake: Fake) -> dict:
    """From the fake's log of one push: first request after start, the
    upload window (first S3 request → create mutation), the CPU the client
    spent in it, and the object."""
    out: dict = {"first_request": None, "upload_secs": None, "transfer_secs": None, "bytes": None, "key": None,
                 "upload_cpu": None, "cpu_from_first_s3": None, "threads": None}
    if reqs:
        out["first_request"] = epoch(reqs[0]["time"]) - m.start
    s3 = [r for r in reqs if r["endpoint"].startswith("s3.")]
    create = [r for r in reqs if r["endpoint"] in ("graphql.create_model_from_truss", "graphql.create_model_version_from_truss")]
    refused = [r for r in reqs if (r.get("status") or 0) >= 400 and not r["endpoint"].startswith("s3.")]
    out["refused"] = [f'{r["method"]} {r["path"]} {r["endpoint"]} -> {r["status"]}' for r in refused]
    if s3 and create:
        out["upload_secs"] = epoch(create[0]["time"]) - epoch(s3[0]["time"])
        args = (create[0].get("graphql") or {}).get("arguments") or {}
        for v in args.values():
            if isinstance(v, dict) and v.get("s3_key"):
                out["key"] = v["s3_key"]
        if out["key"]:
            out["bytes"] = fake.object_size(out["key"])
    if s3:
        # From the first S3 request to the last (CompleteMultipartUpload,
        # or the single PUT): the uploader's own work. The samples start
        # at 0 CPU before the process and end on wait4's exact figure, so
        # both ends always have a bracket.
        a, b = cpu_at(m.cpu_samples, epoch(s3[0]["time"])), cpu_at(m.cpu_samples, epoch(s3[-1]["time"]))
        if a is not None and b is not None:
            out["upload_cpu"] = b - a
        if a is not None:
            # The cross-check: from the first S3 request to the exit (the
            # create, one poll and the predict after the upload included).
            out["cpu_from_first_s3"] = m.cpu - a
        if m.thread_samples:
            out["threads"] = thread_cpu(m, epoch(s3[0]["time"]), epoch(s3[-1]["time"]))
    # Up to the CompleteMultipartUpload request: the parts alone.
    complete = [r for r in reqs if r["endpoint"] == "s3.complete_multipart_upload"]
    if s3 and (complete or create):
        end = complete[0] if complete else create[0]
        out["transfer_secs"] = epoch(end["time"]) - epoch(s3[0]["time"])
    out["s3_requests"] = len(s3)
    out["creates"] = len(create)
    return out


# --- the two clients ------------------------------------------------------------


def sandbox_home(fake: Fake, s3_endpoint: str | None = None) -> Path:
    """HOME for the Python client, routed to the fake as the conformance test
    does: ~/.trussrc for GraphQL, ~/.aws/config for boto3 (truss drops
    AWS_*), S3 at `s3_endpoint` (default: the fake's own)."""
    root = BENCH / "sandbox"
    for d in ("home/.aws", "tmp", "work"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "home/.trussrc").write_text(
        "[baseten]\nremote_provider = baseten\n"
        f"api_key = {fake.api_key}\nremote_url = {fake.info['graphql_base']}\n"
    )
    (root / "home/.aws/config").write_text(
        f"[default]\nendpoint_url = {s3_endpoint or fake.info['s3_endpoint']}\n"
        "s3 =\n    addressing_style = path\n"
    )
    return root


def base_env(root: Path, venv: Path | None = None) -> dict:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if venv:
        path = f"{venv / 'bin'}:{path}"
    return {"PATH": path, "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8"}


def truss_push_argv(truss_dir: Path, name: str) -> list[str]:
    return [
        str(TRUSS_PUSH),
        "--truss-directory", str(truss_dir),
        "--deployment-name", name,
        "--stream-logs", "false",
        "--cleanup", "false",
        "--predict-payload", "{}",
    ]


def truss_push_env(fake: Fake, root: Path, poll: float | None = None, s3_endpoint: str | None = None) -> dict:
    env = base_env(root)
    env.update(
        {
            "BASETEN_API_KEY": fake.api_key,
            "TRUSS_PUSH_APP_URL": fake.info["graphql_base"],
            "TRUSS_PUSH_API_URL": fake.info["rest_base"],
            "TRUSS_PUSH_INFERENCE_URL": fake.info["inference_template"],
            "TRUSS_PUSH_S3_ENDPOINT": s3_endpoint or fake.info["s3_endpoint"],
        }
    )
    if poll is not None:
        env["TRUSS_PUSH_POLL_INTERVAL_SECONDS"] = str(poll)
    return env


def python_push_argv(venv: Path, truss_dir: Path, name: str) -> list[str]:
    return [
        str(venv / "bin/truss"), "push", "--publish", "--deployment-name", name, str(truss_dir),
        "--remote", "baseten", "--non-interactive",
    ]


def python_env(root: Path, venv: Path) -> dict:
    env = base_env(root, venv)
    env.update({"TRUSS_NO_UPDATE_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"})
    return env


# --- data ------------------------------------------------------------------------


def size_label(gib: float) -> str:
    return f"{gib:g}GiB"


def make_trusses(sizes: list[tuple[str, int]]) -> dict[str, Path]:
    """examples/hello-model, plus copies with one random file of each size
    under data/ (generated once; reused by later runs)."""
    out = {"small": REPO / "examples/hello-model"}
    for label, size in sizes:
        d = BENCH / "trusses" / label
        blob = d / "data" / "random.bin"
        if not (blob.exists() and blob.stat().st_size == size):
            log(f"generating {label} of random data")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(REPO / "examples/hello-model", d)
            blob.parent.mkdir(parents=True)
            with open(blob, "wb") as f:
                left = size
                while left:
                    n = min(left, 8 * MIB)
                    f.write(os.urandom(n))
                    left -= n
        out[label] = d
    return out


# --- statistics and formatting ---------------------------------------------------------


def summary(xs: list[float]) -> dict | None:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt_bytes(b: float) -> str:
    for unit, div in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if b >= div:
            return f"{b / div:.1f} {unit}"
    return f"{b:.0f} B"


def fmt_secs(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def cell(s: dict | None, f) -> str:
    """A summary as "median (min–max), n=N"; one value alone says n=1."""
    if not s:
        return "–"
    if s["n"] == 1:
        return f"{f(s['median'])} (n=1)"
    return f"{f(s['median'])} ({f(s['min'])}–{f(s['max'])})"


def ratio(a: dict | None, b: dict | None) -> str:
    if not a or not b or not b["median"]:
        return "–"
    r = a["median"] / b["median"]
    return f"{r:.3f}×" if r < 0.1 else f"{r:.2f}×"


# --- the machine ---------------------------------------------------------------------------


def machine() -> dict:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * 1024
    df = subprocess.run(["df", "-h", "--output=source,fstype,size,avail", str(BENCH)], capture_output=True, text=True, check=False).stdout.splitlines()

    def ver(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.splitlines()[0]
        except (OSError, IndexError):
            return "?"

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_bytes": mem,
        "disk": df[-1] if df else "",
        "kernel": platform.release(),
        "python": platform.python_version(),
        "curl": ver(["curl", "--version"]),
        "rustc": ver(["rustc", "--version"]),
    }


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def busy_elsewhere() -> str:
    """Other processes using CPU right now (ps %CPU > 5), for the record."""
    ps = subprocess.run(["ps", "-eo", "pid,pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True, check=False).stdout
    me = os.getpid()
    rows = []
    for line in ps.splitlines()[1:]:
        pid, pcpu, comm = line.split(None, 2)
        if int(pid) != me and float(pcpu) > 5:
            rows.append(f"{comm} ({pcpu}%)")
    return ", ".join(rows) or "nothing"


class Intruders:
    """Watches for cargo/rustc starting while we measure (other work shares
    this machine); each section is labelled with what it overlapped."""

    def __init__(self):
        self.section = "setup"
        self.seen: dict[str, int] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(2):
            r = subprocess.run(["pgrep", "-x", "cargo|rustc"], capture_output=True, text=True, check=False)
            if r.stdout.strip():
                self.seen[self.section] = self.seen.get(self.section, 0) + 1

    def report(self) -> str:
        self.done.set()
        if not self.seen:
            return "none seen (checked every 2 s)"
        return "; ".join(f"{sec}: in {n} checks (every 2 s)" for sec, n in self.seen.items())


def watch() -> None:
    global WATCH
    WATCH = Intruders()


def wait_for_quiet(timeout: float) -> str:
    t0 = time.monotonic()
    while True:
        busy = subprocess.run(["pgrep", "-x", "cargo|rustc"], capture_output=True, text=True, check=False).stdout.split()
        if not busy:
            return "no cargo/rustc"
        if time.monotonic() - t0 >= timeout:
            return f"cargo/rustc still running after {timeout:.0f} s wait (pids {' '.join(busy)})"
        log("waiting for other cargo/rustc to finish")
        time.sleep(10)


# --- BENCHMARKS.md ----------------------------------------------------------------------------


def write_block(begin: str, end: str, text: str, heading: str | None = None) -> None:
    """Puts `text` between the markers `begin` and `end` of BENCHMARKS.md,
    keeping everything outside them; without the markers, appends them
    (under `heading` when given)."""
    block = f"{begin}\n{text}\n{end}"
    old = MD.read_text() if MD.exists() else "# Benchmarks\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        MD.write_text(head + block + rest.split(end, 1)[1])
    else:
        title = f"\n\n{heading}\n\n" if heading else "\n\n"
        MD.write_text(old.rstrip("\n") + title + block + "\n")
