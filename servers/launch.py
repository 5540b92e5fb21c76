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
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / ".servers"
SOLR_PROJECT = ROOT / "servers" / "solr"
SOLR_CONFIGSET = ROOT / "schema" / "solr" / "conf"


@dataclass
class Server:
    name: str
    urls: list[str]  # base URLs, one per node
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        _terminate(self.process.pid)
        self.process.wait(timeout=60)
        (STATE / f"{self.name}.pid").unlink(missing_ok=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
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


def start_solr(
    *,
    cloud: bool = False,
    port: int | None = None,
    nodes: int = 2,
    heap: str = "512m",
    work: Path | None = None,
    timeout: float = 240,
) -> Server:
    """Start standalone Solr (or a SolrCloud cluster of ``nodes``) and wait until it serves."""
    name = "solr-cloud" if cloud else "solr"
    work = work or STATE / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    command = [
        os.environ.get("NEARDUP_JAVA", "java"),
        f"-Xmx{heap}",
        "-Xss1m",
        "-Dsolr.log.dir=" + str(work / "logs"),
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        solr_classpath(),
        "neardup.SolrLauncher",
        "cloud" if cloud else "standalone",
        str(work),
        str(nodes if cloud else (port or 8983)),
        str(SOLR_CONFIGSET),
    ]
    return _start(
        name, command, work / "solr.log", ready_lines=nodes if cloud else 1, timeout=timeout
    )


def _start(name: str, command: list[str], log: Path, ready_lines: int, timeout: float) -> Server:
    STATE.mkdir(exist_ok=True)
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log_file, start_new_session=True
        )
    (STATE / f"{name}.pid").write_text(str(process.pid))
    urls: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    buffer = b""
    while len(urls) < ready_lines:
        if process.poll() is not None or time.monotonic() > deadline:
            _terminate(process.pid)
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"{name} did not start (see {log}):\n{tail}")
        buffer += process.stdout.read() or b""
        *lines, buffer = buffer.split(b"\n")
        urls += [
            line.decode().split(" ", 1)[1].strip() for line in lines if line.startswith(b"READY ")
        ]
        time.sleep(0.2)
    return Server(name, urls, process, log)


def _terminate(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
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
    commands.add_parser("stop", help="stop every server started here")
    args = parser.parse_args()
    if args.command == "stop":
        print("stopped: " + (", ".join(stop_all()) or "nothing was running"))
        return
    try:
        server = start_solr(cloud=args.cloud, port=args.port, heap=args.heap)
    except RuntimeError as exc:
        sys.exit(str(exc))
    host_port = server.urls[0].split("://", 1)[1].split("/", 1)[0]
    print(f"Solr is running ({server.log}); stop it with: make stop-servers", file=sys.stderr)
    print(f"solr://{host_port}/solr/neardup")


if __name__ == "__main__":
    main()
