"""Serve the app from several Streamlit processes behind nginx, with sticky sessions (a classroom setup).

    python deploy/serve.py --processes 2 [--port 8080] [--host 0.0.0.0] [--checkpoint-dir checkpoints]
                           [--model multi30k-de-en] [--torch-threads 1] [--logs DIR]

Starts N `streamlit run app.py` processes on free local ports (127.0.0.1 only, each with one torch thread:
ATLAS_TORCH_THREADS=1, OMP_NUM_THREADS=1, and one shared cookie secret) and nginx in front of them on
--port, configured from deploy/nginx.conf.template (cookie stickiness: see that file and deploy/README.md).
nginx runs as the current user from a temporary folder (config, pid, logs), not as a system service.
Waits until every backend and the proxy answer /_stcore/health, prints the URL, and stops everything on
Ctrl+C. Needs Debian's nginx: `apt-get install nginx`.

Importable: `Deployment(...).start()` / `.stop()` (or `with Deployment(...) as d:`) is what
benchmarks/bench_classroom.py and tests/browser/test_proxy.py use.
"""
from __future__ import annotations

import argparse
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
NGINX_MISSING = ("nginx is not installed (no `nginx` on PATH). The proxy needs Debian's nginx: run "
                 "`apt-get install nginx` (as .ci/run does) and try again.")
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def nginx_binary() -> str | None:
    """The nginx executable (PATH, then /usr/sbin, which a non-root PATH may lack), or None."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def healthy(url: str, timeout: float = 2.0, cookie: str | None = None) -> bool:
    req = urllib.request.Request(url.rstrip("/") + "/_stcore/health")
    if cookie:
        req.add_header("Cookie", cookie)
    try:
        with _HTTP.open(req, timeout=timeout) as r:
            return r.status == 200 and r.read().strip() == b"ok"
    except (urllib.error.URLError, OSError):
        return False


def backend_name(i: int) -> str:
    """The name of backend i in the nginx config and in the atlas_backend cookie."""
    return f"atlas_{i}"


def nginx_config(backend_ports: list[int], listen: str, prefix: Path, access_log: bool = True) -> str:
    """deploy/nginx.conf.template filled in for these backends."""
    upstreams = "\n".join(f"    upstream {backend_name(i)} {{\n        server 127.0.0.1:{p};\n    }}"
                          for i, p in enumerate(backend_ports))
    any_servers = "\n".join(f"        server 127.0.0.1:{p};" for p in backend_ports)
    pinned = "\n".join(f"        {backend_name(i)} {backend_name(i)};" for i in range(len(backend_ports)))
    served = "\n".join(f'        "~(^|\\s)127\\.0\\.0\\.1:{p}$" {backend_name(i)};'
                       for i, p in enumerate(backend_ports))
    # Started by root, nginx's workers would switch to `nobody`: keep them the current user, as the backends are.
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    fields = {"USER": user, "PREFIX": str(prefix), "LISTEN": listen, "UPSTREAMS": upstreams, "ANY_SERVERS": any_servers,
              "PINNED": pinned, "SERVED": served,
              "ACCESS_LOG": f"{prefix}/access.log atlas" if access_log else "off"}
    text = TEMPLATE.read_text(encoding="utf-8")
    for name, value in fields.items():
        text = text.replace(f"@@{name}@@", value)
    if re.search(r"@@[A-Z_]+@@", text):
        raise RuntimeError("nginx.conf.template has a field serve.py does not fill in")
    return text


class Backend:
    """One `streamlit run app.py` process."""

    def __init__(self, index: int, port: int, proc: subprocess.Popen, log: Path):
        self.index, self.port, self.proc, self.log = index, port, proc, log
        self.name = backend_name(index)
        self.url = f"http://127.0.0.1:{port}/"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return "(no log)"


class Deployment:
    """N Streamlit backends and nginx in front of them; start() waits until all are healthy."""

    def __init__(self, processes: int = 2, port: int | None = None, host: str = "127.0.0.1",
                 checkpoint_dir: str | Path | None = None, model: str | None = None, torch_threads: int = 1,
                 extra_env: dict | None = None, workdir: str | Path | None = None, access_log: bool = True,
                 timeout: float = 120.0):
        if processes < 1:
            raise ValueError("at least one process")
        self.processes, self.host, self.timeout = processes, host, timeout
        self.port = port
        self.port_given = port is not None  # a port asked for is used or the start fails; else any free one
        self.checkpoint_dir = Path(checkpoint_dir).resolve() if checkpoint_dir else None
        self.model, self.torch_threads, self.access_log = model, torch_threads, access_log
        self.extra_env = extra_env or {}
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else None
        self.backends: list[Backend] = []
        self.nginx: subprocess.Popen | None = None
        self.nginx_bin = nginx_binary()

    # ----------------------------------------------------------------------------- start / stop

    def start(self) -> Deployment:
        if self.nginx_bin is None:
            raise RuntimeError(NGINX_MISSING)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="atlas_serve_"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_backends()
            self._start_nginx()
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def _backend_env(self, secret: str) -> dict:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "ATLAS_TORCH_THREADS": str(self.torch_threads),
               "OMP_NUM_THREADS": "1",
               # One cookie secret for all: a browser moved to another backend keeps a valid XSRF cookie.
               "STREAMLIT_SERVER_COOKIE_SECRET": secret}
        if self.checkpoint_dir is not None:
            env["ATLAS_CHECKPOINT_DIR"] = str(self.checkpoint_dir)
        if self.model:
            env["ATLAS_DEFAULT_MODEL"] = self.model
        env.update(self.extra_env)
        return env

    def _start_backends(self) -> None:
        """Start all processes at once (they load in parallel), then wait for each to be healthy."""
        secret = os.environ.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(32)
        for i in range(self.processes):
            self.backends.append(self._spawn(i, free_port(), secret))
        deadline = time.monotonic() + self.timeout
        for i, b in enumerate(self.backends):
            for _attempt in range(3):
                if self._wait_healthy(b, deadline):
                    break
                if b.proc.poll() is not None and "is not available" in b.log_tail():
                    b = self.backends[i] = self._spawn(i, free_port(), secret)  # the port was taken meanwhile
                    continue
                break
            if not healthy(b.url):
                raise RuntimeError(f"backend {b.name} (port {b.port}) did not become healthy:\n{b.log_tail()}")

    def _spawn(self, i: int, port: int, secret: str) -> Backend:
        log = self.workdir / f"streamlit_{i}.log"
        cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
               "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
        with open(log, "wb") as out:
            # Own process group: a Ctrl+C in the terminal reaches only the launcher, which stops nginx first.
            proc = subprocess.Popen(cmd, cwd=ROOT, env=self._backend_env(secret), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return Backend(i, port, proc, log)

    @staticmethod
    def _wait_healthy(b: Backend, deadline: float) -> bool:
        while b.proc.poll() is None and time.monotonic() < deadline:
            # Only once this process says it serves the port: before that, another server may answer there.
            if f"127.0.0.1:{b.port}" in b.log_tail(100_000) and healthy(b.url):
                return True
            time.sleep(0.25)
        return False

    def _start_nginx(self) -> None:
        for _attempt in range(3):
            port = self.port or free_port("127.0.0.1" if self.host in ("127.0.0.1", "localhost") else "0.0.0.0")
            conf = self.workdir / "nginx.conf"
            listen = f"{self.host}:{port}" if self.host else str(port)
            conf.write_text(nginx_config([b.port for b in self.backends], listen, self.workdir, self.access_log),
                            encoding="utf-8")
            out = open(self.workdir / "nginx.out", "wb")
            with out:
                self.nginx = subprocess.Popen([self.nginx_bin, "-p", str(self.workdir), "-c", str(conf),
                                               "-e", str(self.workdir / "error.log")],
                                              stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True)
            self.port = port
            deadline = time.monotonic() + 15
            while self.nginx.poll() is None and time.monotonic() < deadline:
                if self._proxy_answers():
                    return
                time.sleep(0.1)
            err = self._nginx_errors()
            self._stop_nginx()
            if "Address already in use" not in err or self.port_given:
                raise RuntimeError(f"nginx did not start on {listen}:\n{err}")
            self.port = None
        raise RuntimeError("nginx found no free port")

    def _proxy_answers(self) -> bool:
        """Our nginx (not some other server on that port) passes /_stcore/health to a healthy backend."""
        try:
            with _HTTP.open(self.url + "_stcore/health", timeout=2) as r:
                return r.status == 200 and r.read().strip() == b"ok" and bool(r.headers.get("X-Atlas-Backend"))
        except (urllib.error.URLError, OSError):
            return False

    def _nginx_errors(self) -> str:
        text = ""
        for name in ("nginx.out", "error.log"):
            try:
                text += (self.workdir / name).read_text(encoding="utf-8", errors="replace")[-3000:]
            except OSError:
                pass
        return text or "(no output)"

    def _stop_nginx(self) -> None:
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)  # graceful: finish the requests in flight
            try:
                self.nginx.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.nginx.terminate()  # fast shutdown (closes the websockets)
                try:
                    self.nginx.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.nginx.kill()
                    self.nginx.wait(timeout=5)

    def stop(self) -> None:
        """Stop nginx, then every backend (only the processes this deployment started, by their ids)."""
        self._stop_nginx()
        for b in self.backends:
            if b.proc.poll() is None:
                b.proc.terminate()
        for b in self.backends:
            try:
                b.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                b.proc.kill()
                b.proc.wait(timeout=10)
        if self._own_workdir and self.workdir is not None and not os.environ.get("ATLAS_SERVE_KEEP_LOGS"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ----------------------------------------------------------------------------- while running

    def pids(self) -> list[int]:
        """Process ids of the backends, then nginx's master (its workers are its children)."""
        return [b.proc.pid for b in self.backends] + ([self.nginx.pid] if self.nginx else [])

    def dead(self) -> list[str]:
        gone = [f"{b.name} (port {b.port}) exited with {b.proc.returncode}" for b in self.backends
                if b.proc.poll() is not None]
        if self.nginx is not None and self.nginx.poll() is not None:
            gone.append(f"nginx exited with {self.nginx.returncode}: {self._nginx_errors()}")
        return gone


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=2, help="Streamlit processes behind nginx")
    ap.add_argument("--port", type=int, default=8080, help="the port nginx listens on")
    ap.add_argument("--host", default="0.0.0.0", help="the address nginx listens on (0.0.0.0: every interface)")
    ap.add_argument("--checkpoint-dir", default=None, help="the checkpoint root (ATLAS_CHECKPOINT_DIR)")
    ap.add_argument("--model", default=None, help="the default model (ATLAS_DEFAULT_MODEL)")
    ap.add_argument("--torch-threads", type=int, default=1, help="ATLAS_TORCH_THREADS of each process")
    ap.add_argument("--logs", default=None,
                    help="keep nginx's config and the logs in this folder (default: a temporary one, removed at exit)")
    args = ap.parse_args()

    if nginx_binary() is None:
        print(NGINX_MISSING, file=sys.stderr)
        return 2
    d = Deployment(args.processes, args.port, args.host, args.checkpoint_dir, args.model, args.torch_threads,
                   workdir=args.logs)
    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    print(f"Starting {args.processes} Streamlit processes and nginx …", flush=True)
    try:
        d.start()
        for b in d.backends:
            print(f"  {b.name}: 127.0.0.1:{b.port} (pid {b.proc.pid}, log {b.log})")
        print(f"  nginx: pid {d.nginx.pid}, config and logs in {d.workdir}")
        shown = f"http://{socket.gethostname()}:{d.port}/" if args.host == "0.0.0.0" else d.url
        print(f"\nAttention Atlas is served at {d.url}  (on the network: {shown})\nCtrl+C stops it.", flush=True)
        reported: set[str] = set()
        while not stop:
            for line in d.dead():
                if line not in reported:
                    reported.add(line)
                    print(f"WARNING: {line}", file=sys.stderr, flush=True)
            if d.nginx.poll() is not None:
                return 1
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        print("Stopping …", flush=True)
        d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
