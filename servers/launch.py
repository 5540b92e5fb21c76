"""Start and stop real search servers on 127.0.0.1 for neardup's tests and benchmarks.

Solr comes from Maven Central (solr-test-framework, run by servers/solr's small launcher);
Elasticsearch is the integ-test zip from Maven Central, unpacked once under .servers/.
Nothing here needs Docker. Each server runs in the background with a modest heap; its pid is kept
under .servers/ so that `stop` (and `make stop-servers`) can end it.

    python servers/launch.py solr [--cloud] [--port 8983]
    python servers/launch.py elasticsearch [--port 9200]
    python servers/launch.py stop
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / ".servers"
SOLR_PROJECT = ROOT / "servers" / "solr"
SOLR_CONFIGSET = ROOT / "schema" / "solr" / "conf"
ES_VERSION = "8.19.21"  # the newest on Maven Central; runs on the machine's JDK 17


@dataclass
class Server:
    name: str
    urls: list[str]  # base URLs, one per node
    process: subprocess.Popen[bytes]
    log: Path
    zookeeper: str | None = None  # a SolrCloud cluster's ZooKeeper: HOST:PORT/CHROOT
    command: list[str] = field(default_factory=list)  # how it was started, to start it again
    env: dict[str, str] | None = None

    def stop(self, grace: float = 20) -> None:
        _terminate(self.process.pid, grace)
        self.process.wait(timeout=60)
        (STATE / f"{self.name}.pid").unlink(missing_ok=True)

    def kill(self) -> None:
        """SIGKILL, as a machine that loses power: no shutdown, nothing flushed."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)

    def restart(self) -> None:
        """Start it again on the data it left (its URLs stay the same)."""
        self.process = _spawn(self.name, self.command, self.log, self.env).process


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise RuntimeError(f"{what} failed ({' '.join(command)}):\n{tail}")


def solr_classpath() -> str:
    """Build the launcher and resolve Solr's jars from Maven Central (cached after one run)."""
    STATE.mkdir(exist_ok=True)
    classpath_file = STATE / "solr.classpath"
    jar = SOLR_PROJECT / "target" / "neardup-solr-launcher-1.0.jar"
    sources = [SOLR_PROJECT / "pom.xml", *SOLR_PROJECT.rglob("src/**/*.*")]
    newest = max(p.stat().st_mtime for p in sources)
    if not jar.exists() or not classpath_file.exists() or jar.stat().st_mtime < newest:
        mvn = ["mvn", "-q", "-B", "-f", str(SOLR_PROJECT / "pom.xml")]
        _run([*mvn, "package"], "building the Solr launcher")
        _run(
            [*mvn, "dependency:build-classpath", f"-Dmdep.outputFile={classpath_file}"],
            "resolving Solr from Maven Central",
        )
    return f"{jar}{os.pathsep}{classpath_file.read_text().strip()}"


def solr_security(user: str, password: str) -> dict[str, object]:
    """A security.json that requires HTTP basic auth for every request (Solr's salted SHA-256)."""
    salt = os.urandom(32)
    hashed = hashlib.sha256(hashlib.sha256(salt + password.encode()).digest()).digest()
    credential = f"{base64.b64encode(hashed).decode()} {base64.b64encode(salt).decode()}"
    return {
        "authentication": {
            "class": "solr.BasicAuthPlugin",
            "blockUnknown": True,
            "credentials": {user: credential},
        }
    }


def start_solr(
    *,
    cloud: bool = False,
    port: int | None = None,
    nodes: int = 2,
    heap: str = "512m",
    work: Path | None = None,
    timeout: float = 240,
    credentials: tuple[str, str] | None = None,
    tls: bool = False,
    keep: bool = False,
) -> Server:
    """Start standalone Solr (or a SolrCloud cluster of ``nodes``) and wait until it serves.

    With ``credentials`` (standalone only), every request needs that user and password (the
    BasicAuth plugin). With ``tls`` (standalone only), it serves HTTPS with a certificate from a
    CA made for the run (``work/certs/ca.crt``). With
    ``keep``, the cores a server left in ``work`` are served again (a restart); otherwise
    ``work`` starts empty.
    """
    port = port or 8983
    work = work or STATE / ("solr-cloud" if cloud else "solr")
    # One pid file per server, so that `stop` finds every one, whoever started it.
    name = f"solr-cloud-{work.name}" if cloud else f"solr-{port}"
    _refuse_if_running(name)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    if credentials:
        (work / "security.json").write_text(json.dumps(solr_security(*credentials)))
    keystore = []
    if tls:
        certs = make_certificates(work / "certs").parent
        _run(
            ["openssl", "pkcs12", "-export", "-in", str(certs / "node.crt"), "-inkey",
             str(certs / "node.key"), "-out", str(certs / "node.p12"), "-passout", "pass:neardup"],
            "making Solr's keystore",
        )  # fmt: skip
        keystore = [
            f"-Dneardup.keystore={certs / 'node.p12'}",
            "-Dneardup.keystore.password=neardup",
        ]
    command = [
        os.environ.get("NEARDUP_JAVA", "java"),
        f"-Xmx{heap}",
        "-Xss1m",
        *keystore,
        "-Dsolr.log.dir=" + str(work / "logs"),
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        solr_classpath(),
        "neardup.SolrLauncher",
        "cloud" if cloud else "standalone",
        str(work),
        str(nodes if cloud else port),
        str(SOLR_CONFIGSET),
    ]
    expected = nodes if cloud else 1

    def ready(output: bytes) -> list[str] | None:
        lines = output.splitlines()
        urls = [line[6:].decode().strip() for line in lines if line.startswith(b"READY ")]
        return urls if len(urls) == expected else None

    server = _spawn(name, command, work / "solr.log")
    server.urls = _wait([server], ready, timeout)
    if cloud:
        said = server.log.read_text(errors="replace").splitlines()
        server.zookeeper = next(line[10:].strip() for line in said if line.startswith("ZOOKEEPER "))
    return server


def start_solr_cluster(
    *, nodes: int = 3, port: int | None = None, heap: str = "384m", timeout: float = 240
) -> list[Server]:
    """A SolrCloud cluster whose nodes are processes of their own, so that one can be killed
    while the others go on: its ZooKeeper (with the neardup configset) first, then ``nodes``
    Solr nodes on consecutive ports from ``port``. The first server is ZooKeeper
    (``zookeeper`` holds its address); each node's ``urls`` is its base URL."""
    work = STATE / "solr-cluster"
    _refuse_if_running(
        "solr-cluster-zookeeper", *(f"solr-cluster-node-{n + 1}" for n in range(nodes))
    )
    shutil.rmtree(work, ignore_errors=True)
    java = [os.environ.get("NEARDUP_JAVA", "java"), f"-Xmx{heap}", "-Xss1m"]
    java += ["-Djava.net.preferIPv4Stack=true", "-cp", solr_classpath(), "neardup.SolrLauncher"]

    def ready(output: bytes) -> list[str] | None:
        urls = [
            line[6:].decode().strip() for line in output.splitlines() if line.startswith(b"READY ")
        ]
        return urls or None

    (work / "zookeeper").mkdir(parents=True)
    keeper = _spawn(
        "solr-cluster-zookeeper",
        [*java, "zookeeper", str(work / "zookeeper"), "0", str(SOLR_CONFIGSET)],
        work / "zookeeper.log",
    )
    keeper.zookeeper = _wait([keeper], ready, timeout)[0]
    servers = [keeper]
    first = port or free_port()
    for n in range(nodes):
        home = work / f"node-{n + 1}"
        home.mkdir()
        node = _spawn(
            f"solr-cluster-node-{n + 1}",
            [*java, "node", str(home), str(first + n), keeper.zookeeper],
            home / "solr.log",
        )
        node.urls = _wait([node], ready, timeout)
        node.zookeeper = keeper.zookeeper
        servers.append(node)
    return servers


def _refuse_if_running(*names: str) -> None:
    """Refuse to start a server again while the one started under its name runs: started
    again, it failed on the port and its pid took the running one's place (`stop` then stopped
    nothing, and the first server ran on unseen); and its work folder, emptied first, was the
    running server's data."""
    STATE.mkdir(exist_ok=True)
    for name in names:
        kept = STATE / f"{name}.pid"
        if kept.exists() and _running(running := int(kept.read_text())):
            raise RuntimeError(
                f"{name} is running already (pid {running}): stop it first with make stop-servers"
            )


def _spawn(name: str, command: list[str], log: Path, env: dict[str, str] | None = None) -> Server:
    """Run ``command`` in the background, in its own process group, with its pid kept. Its
    output goes to ``log``, never to a pipe: a pipe nobody reads once the server is up fills,
    and a server that logs to the console then blocks (Elasticsearch's master thread did)."""
    _refuse_if_running(name)
    kept = STATE / f"{name}.pid"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    kept.write_text(str(process.pid))
    return Server(name, [], process, log, command=command, env=env)


def _wait(
    servers: list[Server], ready: Callable[[bytes], list[str] | None], timeout: float
) -> list[str]:
    """Wait until ``ready`` (given the first server's output so far) returns the URLs; if a server
    exits or time runs out, stop them all and raise with the end of the log."""
    deadline = time.monotonic() + timeout
    while (urls := ready(servers[0].log.read_bytes())) is None:
        failed = next((s for s in servers if s.process.poll() is not None), None)
        if failed or time.monotonic() > deadline:
            culprit = failed or servers[0]
            for server in servers:
                _terminate(server.process.pid, grace=3)
            text = culprit.log.read_text(errors="replace")
            tail = "\n".join(text.splitlines()[-20:])
            why = "exited" if failed else f"did not answer within {timeout:.0f} s"
            raise RuntimeError(f"{culprit.name} {why} (see {culprit.log}):\n{tail}")
        time.sleep(0.3)
    return urls


def elasticsearch_home() -> Path:
    """Fetch the Elasticsearch integ-test zip from Maven Central and unpack it once."""
    home = STATE / f"elasticsearch-{ES_VERSION}"
    if (home / "bin" / "elasticsearch").exists():
        return home
    STATE.mkdir(exist_ok=True)
    artifact = f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:{ES_VERSION}:zip"
    _run(
        [
            "mvn",
            "-q",
            "-B",
            "dependency:copy",
            f"-Dartifact={artifact}",
            f"-DoutputDirectory={STATE}",
        ],
        "fetching Elasticsearch from Maven Central",
    )
    archive = STATE / f"elasticsearch-{ES_VERSION}.zip"
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(STATE)
    for script in (home / "bin").iterdir():
        script.chmod(0o755)
    archive.unlink()
    return home


def _java_home() -> str:
    if os.environ.get("NEARDUP_ES_JAVA_HOME"):
        return os.environ["NEARDUP_ES_JAVA_HOME"]
    java = shutil.which("java")
    if not java:
        raise RuntimeError("no java on PATH: Elasticsearch needs a JDK 17 or newer")
    return str(Path(java).resolve().parents[1])


def make_certificates(folder: Path) -> Path:
    """A certificate authority and, signed by it, a certificate for 127.0.0.1 and localhost, as
    PEM files in ``folder`` (ca.crt, node.crt, node.key), made with openssl; returns ca.crt."""
    folder.mkdir(parents=True, exist_ok=True)
    days, rsa = "30", "rsa:2048"
    _run(
        ["openssl", "req", "-x509", "-newkey", rsa, "-nodes", "-days", days, "-subj",
         "/CN=neardup test CA", "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.crt")],
        "making a test CA",
    )  # fmt: skip
    _run(
        ["openssl", "req", "-newkey", rsa, "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", str(folder / "node.key"), "-out", str(folder / "node.csr")],
        "making a node key",
    )  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run(
        ["openssl", "x509", "-req", "-days", days, "-in", str(folder / "node.csr"),
         "-CA", str(folder / "ca.crt"), "-CAkey", str(folder / "ca.key"), "-CAcreateserial",
         "-extfile", str(folder / "san.ext"), "-out", str(folder / "node.crt")],
        "signing the node certificate",
    )  # fmt: skip
    return folder / "ca.crt"


def start_elasticsearch(
    *,
    port: int = 9200,
    nodes: int = 1,
    heap: str = "512m",
    work: Path | None = None,
    timeout: float = 240,
    credentials: tuple[str, str] | None = None,
    tls: bool = False,
    keep: bool = False,
) -> list[Server]:
    """Start an Elasticsearch cluster of ``nodes`` on 127.0.0.1 (HTTP ports from ``port`` up).

    Elasticsearch refuses to run as root; as root, the nodes run as ``nobody``. With
    ``credentials`` (one node only: more need TLS between them), security is on: a user named
    ``elastic`` is the built-in superuser with that password (its bootstrap password, as the
    Docker image sets ELASTIC_PASSWORD), another a superuser of the file realm. With ``tls`` as
    well, HTTP is HTTPS with a certificate from a CA made for the run (``work/certs/ca.crt``),
    as Elasticsearch 8 ships; otherwise HTTP stays plain, on loopback. With ``keep``, the data the
    nodes left in ``work`` is served again (a restart); otherwise ``work`` starts empty.
    """
    if credentials and nodes > 1:
        raise ValueError("credentials need a single node")
    if tls and not credentials:
        raise ValueError("TLS comes with credentials")
    _refuse_if_running(*(f"elasticsearch-{port + n}" for n in range(nodes)))
    home = elasticsearch_home()
    work = work or STATE / "elasticsearch"
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    cluster = f"neardup-{port}"
    transport = [free_port() for _ in range(nodes)]
    names = [f"node-{n}" for n in range(1, nodes + 1)]
    as_user = (
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--init-groups"]
        if os.geteuid() == 0
        else []
    )
    servers = []
    for n, name in enumerate(names):
        node = work / name
        for folder in ("data", "logs", "tmp"):
            (node / folder).mkdir(parents=True, exist_ok=True)
        shutil.copytree(home / "config", node / "config", dirs_exist_ok=True)
        env = {
            "ES_JAVA_HOME": _java_home(),
            "ES_PATH_CONF": str(node / "config"),
            "ES_TMPDIR": str(node / "tmp"),
            "ES_JAVA_OPTS": f"-Xms{heap} -Xmx{heap}",
        }
        if credentials:
            _add_user(home, *credentials, env={**os.environ, **env})
        if tls:
            make_certificates(node / "config" / "certs")  # in its config: ES reads no other
        if as_user:
            subprocess.run(["chown", "-R", "nobody:nogroup", str(work)], check=True)
        settings = {
            "cluster.name": cluster,
            "node.name": name,
            "network.host": "127.0.0.1",
            "http.port": port + n,
            "transport.port": transport[n],
            "path.data": node / "data",
            "path.logs": node / "logs",
            # loopback only, for tests and benchmarks: plain HTTP, security only when asked for
            "xpack.security.enabled": str(bool(credentials)).lower(),
            "xpack.security.http.ssl.enabled": str(tls).lower(),
            "xpack.security.transport.ssl.enabled": "false",
            "cluster.routing.allocation.disk.threshold_enabled": "false",
        }
        if tls:
            settings["xpack.security.http.ssl.certificate"] = "certs/node.crt"
            settings["xpack.security.http.ssl.key"] = "certs/node.key"
        if nodes == 1:
            settings["discovery.type"] = "single-node"
        else:
            settings["discovery.seed_hosts"] = ",".join(f"127.0.0.1:{t}" for t in transport)
            settings["cluster.initial_master_nodes"] = ",".join(names)
        command = [*as_user, str(home / "bin" / "elasticsearch")]
        command += [f"-E{key}={value}" for key, value in settings.items()]
        servers.append(_spawn(f"elasticsearch-{port + n}", command, node / "console.log", env))
    http = "https" if tls else "http"
    url = f"{http}://127.0.0.1:{port}"
    ca = work / names[0] / "config" / "certs" / "ca.crt" if tls else None
    _wait(servers, lambda _output: _healthy(url, nodes, credentials, ca), timeout)
    for n, server in enumerate(servers):
        server.urls = [f"{http}://127.0.0.1:{port + n}"]
    return servers


def _add_user(home: Path, user: str, password: str, env: dict[str, str]) -> None:
    """``elastic``: the built-in superuser's bootstrap password, in the node's keystore; any
    other name: a superuser of the file realm."""
    if user == "elastic":
        keystore = str(home / "bin" / "elasticsearch-keystore")
        _run([keystore, "create"], "making the Elasticsearch keystore", env=env)
        added = subprocess.run(
            [keystore, "add", "-x", "bootstrap.password"],
            input=password,
            capture_output=True,
            text=True,
            env=env,
        )
        if added.returncode:
            raise RuntimeError(f"setting the elastic user's password failed: {added.stderr}")
        return
    command = [str(home / "bin" / "elasticsearch-users"), "useradd", user, "-p", password]
    _run([*command, "-r", "superuser"], "adding the Elasticsearch user", env=env)


def _healthy(
    url: str, nodes: int, credentials: tuple[str, str] | None, ca: Path | None = None
) -> list[str] | None:
    health = urllib.request.Request(
        f"{url}/_cluster/health?wait_for_status=yellow&wait_for_nodes={nodes}&timeout=1s"
    )
    if credentials:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        health.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(health, timeout=5, context=context) as response:
            return [url] if json.load(response).get("timed_out") is False else None
    except (OSError, ValueError):
        return None


def _running(pid: int) -> bool:
    """Whether the process group ``pid`` leads is still there."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, and another user's
        return True
    return True


def _terminate(pid: int, grace: float = 20) -> None:
    """SIGTERM the process group, and SIGKILL it if it is still there after ``grace`` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(int(grace / 0.2)):
        if not _running(pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def stop_all() -> list[str]:
    stopped = []
    for pid_file in STATE.glob("*.pid") if STATE.exists() else []:
        _terminate(int(pid_file.read_text()))
        pid_file.unlink()
        stopped.append(pid_file.stem)
    return stopped


def main() -> None:
    parser = argparse.ArgumentParser(description="Start or stop neardup's local search servers.")
    commands = parser.add_subparsers(dest="command", required=True)
    solr = commands.add_parser("solr", help="start Solr in the background")
    solr.add_argument("--cloud", action="store_true", help="a 2-node SolrCloud cluster")
    solr.add_argument("--port", type=int, default=8983)
    solr.add_argument("--heap", default="512m")
    elasticsearch = commands.add_parser(
        "elasticsearch", help="start Elasticsearch in the background"
    )
    elasticsearch.add_argument("--nodes", type=int, default=1)
    elasticsearch.add_argument("--port", type=int, default=9200)
    elasticsearch.add_argument("--heap", default="512m")
    commands.add_parser("stop", help="stop every server started here")
    args = parser.parse_args()
    if args.command == "stop":
        print("stopped: " + (", ".join(stop_all()) or "nothing was running"))
        return
    try:
        if args.command == "elasticsearch":
            servers = start_elasticsearch(port=args.port, nodes=args.nodes, heap=args.heap)
            print(
                f"Elasticsearch is running ({servers[0].log}); stop it with: make stop-servers",
                file=sys.stderr,
            )
            print(f"elasticsearch://127.0.0.1:{args.port}/neardup")
            return
        server = start_solr(cloud=args.cloud, port=args.port, heap=args.heap)
    except RuntimeError as exc:
        sys.exit(str(exc))
    host_port = server.urls[0].split("://", 1)[1].split("/", 1)[0]
    print(f"Solr is running ({server.log}); stop it with: make stop-servers", file=sys.stderr)
    print(f"solr://{host_port}/solr/neardup" + ("?shards=2" if args.cloud else ""))
    if server.zookeeper:
        print(f"solr+zk://{server.zookeeper}/neardup?shards=2")


if __name__ == "__main__":
    main()
