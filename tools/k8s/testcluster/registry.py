"""A private registry for tests: the CNCF distribution registry with htpasswd (bcrypt) auth and TLS from
the test PKI, on 127.0.0.1 and on the real node's bridge address, trusted by the node's containerd."""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from tools.k8s.bin_dirs import registry_bin_dir
from tools.k8s.pki import make_serving_pki
from tools.k8s.testcluster.node_config import REGISTRY_HOSTS_DIR, RealNode
from tools.k8s.testcluster.processes import die_with_parent, kill_group

REGISTRY_BINARIES = ("registry", "crane", "registry-htpasswd")
IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)  # Linux; Python names it only from 3.12 on
PUSH_TIMEOUT = 900  # seconds: the runtime image's base layer is about 1.2 GB


def registry_missing(bin_dir: Path | None = None) -> list[str]:
    """Binaries the test registry still needs (empty when it can start)."""
    bin_dir = bin_dir or registry_bin_dir()
    return [str(bin_dir / b) for b in REGISTRY_BINARIES if not os.access(bin_dir / b, os.X_OK)]


class RegistryError(RuntimeError):
    """The registry failed to start or a push failed; the message has the tail of its output."""


@dataclass(frozen=True)
class _Listener:
    name: str  # "loopback" or "node"
    address: str
    sock: socket.socket


def _listen(address: str, port: int, freebind: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if freebind:
        # The bridge (and with it its address) exists only while the node runs, and the node re-creates it
        # when it starts: a free bind holds the port on that address whether or not it is there right now.
        sock.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
    try:
        sock.bind((address, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _listener_pair(gateway: str) -> tuple[_Listener, _Listener]:
    """Sockets on 127.0.0.1:P and gateway:P, one port P free on both."""
    for _ in range(20):
        loopback = _listen("127.0.0.1", 0, freebind=False)
        port = loopback.getsockname()[1]
        try:
            node = _listen(gateway, port, freebind=True)
        except OSError:
            loopback.close()
            continue
        return _Listener("loopback", "127.0.0.1", loopback), _Listener("node", gateway, node)
    raise RegistryError(f"no port free on both 127.0.0.1 and {gateway}")


class TestRegistry:
    """`start()`, `add_user()`, `push_layout()`, `stop()`; `host` is what the kubelet and pods pull from.

    Two registry processes share one storage directory, one htpasswd file and one certificate: one
    serves 127.0.0.1:P (the test's pushes work without the node), the other <gateway>:P (containerd on
    the host and pods on the bridge). Each gets its socket by systemd-style socket activation, so
    both listen on the same port P and the bridge address need not exist when the registry starts.
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(
        self,
        bin_dir: Path | None = None,
        work_dir: Path | None = None,
        gateway: str = RealNode.gateway,
        hosts_dir: Path | None = REGISTRY_HOSTS_DIR,
    ) -> None:
        self.bin_dir = bin_dir or registry_bin_dir()
        self._own_work_dir = work_dir is None
        self.dir = work_dir or Path(tempfile.mkdtemp(prefix="paddlecloud-registry-"))
        self.gateway = gateway
        self.hosts_dir = hosts_dir
        self.port = 0
        self.users: dict[str, str] = {}
        self._hashes: dict[str, str] = {}
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._pusher = ("paddlecloud-pusher", secrets.token_urlsafe(18))

    # ----- addresses -----

    @property
    def host(self) -> str:
        """host:port the kubelet (containerd on the host) and pods (on the bridge) pull from."""
        return f"{self.gateway}:{self.port}"

    @property
    def loopback_host(self) -> str:
        """host:port on 127.0.0.1: the same registry, reachable from this machine without the node."""
        return f"127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.dir / "pki" / "ca.crt"

    @property
    def ca_pem(self) -> str:
        return self.ca_file.read_text()

    @property
    def htpasswd(self) -> Path:
        return self.dir / "htpasswd"

    # ----- lifecycle -----

    def start(self, timeout: float = 30) -> None:
        """Start both processes and return once they serve; on failure nothing of it is left running."""
        missing = registry_missing(self.bin_dir)
        if missing:
            raise RegistryError(f"registry binaries missing: {', '.join(missing)} (run tools/k8s/build.sh)")
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        loopback, node = _listener_pair(self.gateway)
        self.port = loopback.sock.getsockname()[1]
        try:
            make_serving_pki(self.dir / "pki", "registry", ["127.0.0.1", self.gateway], ["localhost"])
            (self.dir / "storage").mkdir(parents=True, exist_ok=True)
            (self.dir / "logs").mkdir(exist_ok=True)
            self.add_user(*self._pusher)
            http_secret = secrets.token_urlsafe(32)  # shared: an upload begun on one may be finished on the other
            _RUNNING.add(self)
            for listener in (loopback, node):
                self._spawn(listener, http_secret)
        finally:
            loopback.sock.close()  # the children hold their own copies
            node.sock.close()
        self._trust()
        self._wait_ready(timeout)

    def _config(self, listener: _Listener, http_secret: str) -> Path:
        config = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
            # No blob descriptor cache: the two processes share the storage and must each see the other's writes.
            "storage": {"filesystem": {"rootdirectory": str(self.dir / "storage")}, "delete": {"enabled": True}},
            "auth": {"htpasswd": {"realm": "paddlecloud-test-registry", "path": str(self.htpasswd)}},
            "http": {
                "addr": f"{listener.address}:{self.port}",  # unused: the socket comes by activation
                "secret": http_secret,
                "tls": {
                    "certificate": str(self.dir / "pki" / "registry.crt"),
                    "key": str(self.dir / "pki" / "registry.key"),
                },
                "debug": {"addr": ""},
            },
        }
        path = self.dir / f"config-{listener.name}.yml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _spawn(self, listener: _Listener, http_secret: str) -> None:
        config = self._config(listener, http_secret)
        fd = listener.sock.fileno()
        # systemd's protocol: the socket is fd 3 and LISTEN_PID is the registry's own pid, which the
        # shell knows ($$) and keeps by exec'ing it.
        move = "" if fd == 3 else f"exec 3<&{fd} {fd}<&-; "
        script = f'{move}LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" serve "$1"'
        log = (self.dir / "logs" / f"registry-{listener.name}.log").open("ab")
        try:
            self._processes[listener.name] = subprocess.Popen(
                ["bash", "-c", script, str(self.bin_dir / "registry"), str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(fd,),
                start_new_session=True,
                preexec_fn=die_with_parent,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OTEL_TRACES_EXPORTER": "none"},
            )
        finally:
            log.close()

    def _trust(self) -> None:
        """Tell the node's containerd (config_path) to check this registry's certificate with our CA."""
        if self.hosts_dir is None:
            return
        host_dir = self.hosts_dir / self.host
        host_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.ca_file, host_dir / "ca.crt")
        (host_dir / "hosts.toml").write_text(
            f'server = "https://{self.host}"\n\n'
            f'[host."https://{self.host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{host_dir / "ca.crt"}"\n'
        )

    def _wait_ready(self, timeout: float) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        deadline = time.monotonic() + timeout
        while True:
            for name, process in self._processes.items():
                if process.poll() is not None:
                    raise RegistryError(f"registry ({name}) exited {process.returncode}: {self.log_tail(name)}")
            try:
                opener.open(f"https://{self.loopback_host}/v2/", timeout=2)
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # up, and asking for a login
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RegistryError(f"registry not ready after {timeout}s: {self.log_tail('loopback')}")
            time.sleep(0.1)

    def log_tail(self, name: str, size: int = 2000) -> str:
        path = self.dir / "logs" / f"registry-{name}.log"
        return path.read_text(errors="replace")[-size:] if path.exists() else "(no log)"

    def stop(self) -> None:
        """Stop both processes, remove the containerd trust entry and the work dir (if it made it)."""
        for process in self._processes.values():
            kill_group(process.pid)
        self._processes.clear()
        if self.hosts_dir is not None and self.port:
            shutil.rmtree(self.hosts_dir / self.host, ignore_errors=True)
        if self._own_work_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        _RUNNING.discard(self)

    def __enter__(self) -> TestRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- users and images -----

    def add_user(self, name: str, password: str) -> None:
        """Let `name` log in with `password` (bcrypt in the htpasswd file; the registry rereads it on change)."""
        result = subprocess.run(
            [str(self.bin_dir / "registry-htpasswd"), name],
            input=password + "\n",
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RegistryError(f"registry-htpasswd {name}: {result.stderr.strip()}")
        self.users[name] = password
        self._hashes[name] = result.stdout.strip()
        text = "".join(f"{line}\n" for line in self._hashes.values())
        tmp = self.htpasswd.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o600)
        tmp.replace(self.htpasswd)
        # The registry reloads when the modification time differs; make sure it does even within one tick.
        stamp = time.time_ns()
        os.utime(self.htpasswd, ns=(stamp, stamp))

    def _repository(self, ref: str) -> str:
        return ref.removeprefix(f"{self.host}/").removeprefix(f"{self.loopback_host}/")

    def _crane(self, *args: str) -> str:
        """Run crane against the loopback process as the pusher; returns its stdout."""
        with tempfile.TemporaryDirectory(prefix="crane-") as docker_config:
            user, password = self._pusher
            auth = base64.b64encode(f"{user}:{password}".encode()).decode()
            Path(docker_config, "config.json").write_text(json.dumps({"auths": {self.loopback_host: {"auth": auth}}}))
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": docker_config,
                "DOCKER_CONFIG": docker_config,
                "SSL_CERT_FILE": str(self.ca_file),  # Go trusts exactly our CA
            }
            result = subprocess.run(
                [str(self.bin_dir / "crane"), *args],
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=PUSH_TIMEOUT,
            )
        if result.returncode != 0:
            raise RegistryError(f"crane {args[0]}: {result.stderr.strip()[-2000:]}")
        return result.stdout

    def push_layout(self, layout_dir: Path | str, ref: str) -> str:
        """Push an OCI layout to `ref` ("alice/paddle:tag", or with this registry's host in front);
        returns the reference to pull it by (`<host>/<repository>:<tag>`)."""
        repository = self._repository(ref)
        self._crane("push", str(layout_dir), f"{self.loopback_host}/{repository}")
        return f"{self.host}/{repository}"

    def append_layer(self, base: str, layer_tar: Path, ref: str) -> str:
        """Push `base` plus one layer (an uncompressed tar) as `ref`; returns the reference to pull it by."""
        repository = self._repository(ref)
        self._crane(
            "append",
            f"--base={self.loopback_host}/{self._repository(base)}",
            f"--new_layer={layer_tar}",
            f"--new_tag={self.loopback_host}/{repository}",
        )
        return f"{self.host}/{repository}"

    def layer_digests(self, ref: str) -> list[str]:
        """The layer digests of the image `ref` in this registry (its manifest, as crane reads it)."""
        manifest = json.loads(self._crane("manifest", f"{self.loopback_host}/{self._repository(ref)}"))
        return [str(layer["digest"]) for layer in manifest["layers"]]


_RUNNING: set[TestRegistry] = set()


@atexit.register
def _stop_all() -> None:  # a test session that dies without its finalizers still leaves nothing running
    for registry in list(_RUNNING):
        with contextlib.suppress(Exception):
            registry.stop()


__all__ = ["REGISTRY_BINARIES", "RegistryError", "TestRegistry", "registry_bin_dir", "registry_missing"]
