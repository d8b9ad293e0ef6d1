"""The several-instance recipe of docs/classroom.md, run for real on 127.0.0.1
(tests/test_classroom_proxy.py and bench/bench_classroom.py --proxy): one redis-server with the
recipe's persistence options, app instances started as `python app.py --workers 1 --port P --store
redis://... --proxy 1`, and Debian's nginx with the recipe's configuration (its ports changed, and
test-only lines: a log of which instance answered each request, temporary files in the run's
directory)."""
import collections
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from tests.classroom_support import free_port
from tests.redis_server_support import README, RedisServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_NGINX = ("nginx is not installed: `make test` installs Debian's nginx "
            "(apt-get install -y nginx)")


def nginx_exe():
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def readme_nginx_conf() -> str:
    """The nginx configuration of docs/classroom.md (its ```nginx block)."""
    with open(README, encoding="utf-8") as f:
        m = re.search(r"```nginx\n(.*?)```", f.read(), re.S)
    assert m, "docs/classroom.md's recipe has no nginx configuration"
    return m.group(1)


class Client:
    """One browser through the proxy: its own source address (127.x.y.z: each phone has its
    own), a keep-alive connection, its cookies, and the Origin header a browser's POST sends."""

    def __init__(self, port, source="127.0.0.1", headers=None):
        self.port, self.source = port, source
        self.origin = f"http://127.0.0.1:{port}"
        self.conn = None
        self.cookies = {}
        self.headers = dict(headers or {})

    def request(self, method, path, body=None, headers=None):
        h = {"Host": f"127.0.0.1:{self.port}", **self.headers, **(headers or {})}
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
            h["Origin"] = self.origin
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=30, source_address=(self.source, 0))
                self.conn.request(method, path, body=data, headers=h)
                r = self.conn.getresponse()
                payload = r.read()
                break
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise
        if r.getheader("Connection", "").lower() == "close":
            self.conn = None
        for v in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = v.partition("=")
            value = rest.split(";")[0]
            if "Max-Age=0" in v or "expires=Thu, 01 Jan 1970" in v:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        return r.status, r.headers, payload

    def json(self, method, path, body=None, headers=None):
        status, h, payload = self.request(method, path, body, headers)
        try:
            return status, h, json.loads(payload)
        except ValueError:
            return status, h, payload.decode(errors="replace")


class Cluster:
    """Redis, `instances` app instances and nginx in front, all on free ports of 127.0.0.1."""

    def __init__(self, directory, instances=2, workers=1, app_args=()):
        self.dir = str(directory)
        self.n, self.workers, self.app_args = instances, workers, list(app_args)
        self.redis = None
        self.apps = []            # (port, process)
        self.nginx = None
        self.port = None

    def start(self, timeout=300):
        os.makedirs(os.path.join(self.dir, "redis"), exist_ok=True)
        self.redis = RedisServer(os.path.join(self.dir, "redis")).start()
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        for i in range(self.n):
            port = free_port()
            log = open(os.path.join(self.dir, f"app{i}.log"), "wb")
            proc = subprocess.Popen(
                [sys.executable, os.path.join(ROOT, "app.py"), "--workers", str(self.workers),
                 "--port", str(port), "--store", self.redis.url, "--proxy", "1",
                 "--data-dir", os.path.join(self.dir, f"data{i}"), *self.app_args],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            self.apps.append((port, proc))
        deadline = time.monotonic() + timeout
        for port, proc in self.apps:
            while True:
                assert proc.poll() is None, f"app.py on {port} stopped: {self.app_log(port)}"
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    conn.request("GET", "/class")
                    if conn.getresponse().status == 200:
                        conn.close()
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline, f"app.py on {port} did not answer"
                time.sleep(0.2)
        self.start_nginx()
        return self

    def app_log(self, port) -> str:
        i = [p for p, _ in self.apps].index(port)
        with open(os.path.join(self.dir, f"app{i}.log"), "rb") as f:
            return f.read().decode(errors="replace")[-2000:]

    def start_nginx(self):
        self.port = free_port()
        conf = readme_nginx_conf()
        conf = re.sub(r"listen\s+80;", f"listen 127.0.0.1:{self.port};", conf)
        servers = " ".join(f"server 127.0.0.1:{p};" for p, _ in self.apps)
        conf = re.sub(r"(upstream explainer \{)[^}]*\}", rf"\1 {servers} }}", conf)
        d = self.dir
        test_only = (f"log_format upstream '$upstream_addr $request_method $uri $status';\n"
                     f"  access_log {d}/upstreams.log upstream;\n"
                     + "".join(f"  {k}_temp_path {d}/nginx-{k};\n"
                               for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")))
        conf = conf.replace("http {\n", "http {\n  " + test_only, 1)
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        main = f"daemon off; pid {d}/nginx.pid; error_log stderr;"
        if os.geteuid() == 0:
            main += " user root;"     # workers read and write this run's directory
        self.nginx_log = open(os.path.join(d, "nginx.err"), "wb")
        self.nginx = subprocess.Popen([nginx_exe(), "-p", d, "-c", path, "-g", main],
                                      stdout=self.nginx_log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            assert self.nginx.poll() is None, open(os.path.join(d, "nginx.err")).read()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                conn.request("GET", "/class")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, "nginx did not answer"
            time.sleep(0.05)

    def upstream_counts(self, pattern=r"/class/\w+/state") -> collections.Counter:
        """How many requests whose path matches `pattern` each instance answered (its port)."""
        out = collections.Counter()
        with open(os.path.join(self.dir, "upstreams.log")) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and re.fullmatch(pattern, parts[2]):
                    out[int(parts[0].rsplit(":", 1)[1])] += 1
        return out

    def client(self, source="127.0.0.1", **kw) -> Client:
        return Client(self.port, source, **kw)

    def direct(self, i, source="127.0.0.1") -> Client:
        """A client of instance i itself, bypassing the proxy."""
        return Client(self.apps[i][0], source)

    def stop(self):
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)
            try:
                self.nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()
        for _, proc in self.apps:
            if proc.poll() is None:
                proc.terminate()
        for _, proc in self.apps:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.redis is not None:
            self.redis.close()
