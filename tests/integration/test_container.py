"""The image, really built and really run as the CronJob's pod runs it.

A Docker engine from Debian's docker.io, started here (`dockerd --bridge=none`, everything in a
temporary directory, stopped at the end), builds the Dockerfile as it is. No registry can be
reached, so the base image is made here: `debootstrap --variant=minbase bookworm` with python3
and its venv module, imported with `docker import`, and passed as `--build-arg PYTHON_IMAGE`;
the Dockerfile keeps its official default. The build stage still downloads the dependencies
from PyPI, as any build does (`--network host`).

The image then runs as the rendered CronJob's pod would (tests/support/pallet.py renders it): the
image's ENTRYPOINT with the container's args and env, the ConfigMaps' files mounted read-only
at their mount paths, the emptyDir as a tmpfs of its sizeLimit, the pod's user, a read-only
root, no capabilities, no privilege escalation, the memory limit; host networking so that
every request goes to a loopback nginx. Only the URL and the run's length differ.

Needs root, Debian's docker.io and debootstrap (.ci/run installs them). When they are missing
the tests fail; SOAK_SKIP_CONTAINER=1 skips them instead, for machines that cannot run Docker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runner.report.plan import workers_that_fit
from tests.conftest import REPO, Nginx, assert_counts_add_up, free_port
from tests.support import reaper
from tests.support.pallet import (
    broken_by_the_target,
    dockerfile_instruction,
    find,
    mounted_files,
    render,
    soak_container,
)

pytestmark = pytest.mark.container

# The client of Debian's docker.io, of the same release as its dockerd and with BuildKit built
# in (newer clients need the buildx plugin for BuildKit, which the Dockerfile needs).
DOCKER = "/usr/bin/docker"
BASE_IMAGE = "soak-test/python:bookworm"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
IMAGE = f"soak-test/soak:{VERSION}"
# What the base image gets: python3 and what `python3 -m venv` needs, as the official image has.
BASE_PACKAGES = ["python3", "python3-venv", "ca-certificates"]


def _required() -> tuple[str, str]:
    """dockerd and debootstrap, or the reason this machine cannot run the tests (a failure)."""
    if os.environ.get("SOAK_SKIP_CONTAINER") == "1":
        pytest.skip("SOAK_SKIP_CONTAINER=1: the image is not built or run")
    if os.geteuid() != 0:
        pytest.fail("the container tests start their own dockerd and debootstrap: run them as root "
                    "(or set SOAK_SKIP_CONTAINER=1 to skip them)")
    dockerd = shutil.which("dockerd", path="/usr/sbin:/usr/bin:/sbin:/bin")
    debootstrap = shutil.which("debootstrap", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if dockerd is None or debootstrap is None or not os.access(DOCKER, os.X_OK):
        pytest.fail("the container tests need Debian's docker.io and debootstrap: "
                    "apt-get install -y docker.io debootstrap (as .ci/run does), or set SOAK_SKIP_CONTAINER=1")
    return dockerd, debootstrap


@dataclass
class Docker:
    """A Docker engine of our own: the client, pointed at its socket, and its scratch directory."""

    env: dict[str, str]
    scratch: Path  # on the engine's own file system (memory, where it could mount one)
    timings: dict[str, float] = field(default_factory=dict)

    def __call__(self, *args: str, timeout: float = 120, check: bool = True,
                 stdin: Any = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                              stdin=stdin)
        if check and done.returncode != 0:
            pytest.fail(f"docker {' '.join(args[:2])} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                        f"{done.stderr[-3000:]}")
        return done


STATE_TMPFS_SIZE = "4g"  # the engine's images and layers (about 0.7 GB), the base image's rootfs while it is made


def _in_memory(directory: Path) -> bool:
    """Mount a tmpfs on `directory`, where the engine keeps its state; False where that is refused.

    On disk, writing the layers and dpkg's fsyncs in debootstrap cost a minute, and deleting
    the 16,000 files of the state at the end cost up to 40 s (on a busy CI node); in memory
    both are nearly free, and unmounting frees it all at once.
    """
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATE_TMPFS_SIZE},mode=0700", "soak-dockerd",
                           str(directory)], capture_output=True, text=True, timeout=30)
    return done.returncode == 0


@pytest.fixture(scope="module")
def docker(request: pytest.FixtureRequest) -> Iterator[Docker]:
    """dockerd with no bridge network (containers use the host's), its state in a temporary directory
    (a tmpfs where the machine allows it). Module-scoped: only this file uses it, and its memory and
    processes go when the file is done, not at the end of the whole session. Started as a daemon of
    the run (tests/support/reaper.py): should this process be killed before the end, dockerd gets
    SIGTERM, and the next session start stops what is left of it (containerd, its shims: whatever
    names the state's directory) and unmounts and removes the state."""
    dockerd, _ = _required()
    # Not pytest's tmp_path: the sockets' paths must stay short (108 bytes for a unix socket).
    state = Path(tempfile.mkdtemp(prefix="soak-dockerd-"))
    mounted = _in_memory(state)
    socket = state / "docker.sock"
    log = (state / "dockerd.log").open("wb")
    process = reaper.spawn(
        [dockerd, "--bridge=none", "--iptables=false", "--ip6tables=false", "--data-root", str(state / "data"),
         "--exec-root", str(state / "exec"), "--pidfile", str(state / "dockerd.pid"), "--host", f"unix://{socket}",
         # Apart from any engine the machine runs itself, should this one use the machine's containerd.
         "--containerd-namespace", "soak-test", "--containerd-plugins-namespace", "soak-test-plugins"],
        "dockerd", owns=[state], stdout=log, stderr=subprocess.STDOUT)
    engine = Docker({**os.environ, "DOCKER_HOST": f"unix://{socket}", "DOCKER_BUILDKIT": "1"}, state / "scratch")
    engine.scratch.mkdir()
    try:
        deadline = time.monotonic() + 90
        while engine("version", "--format", "{{.Server.Version}}", check=False, timeout=30).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("dockerd did not start:\n" + (state / "dockerd.log").read_text()[-3000:])
            time.sleep(0.5)
        yield engine
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None and engine.timings:  # the figures, in the test log
            with capture.global_and_fixture_disabled():
                reporter.ensure_newline()
                reporter.write_line("container tests: " + ", ".join(f"{k} {v:.0f}" for k, v in engine.timings.items()))
    finally:
        reaper.stop(process, timeout=60)  # SIGTERM; SIGKILL to its session (containerd too) after a minute
        log.close()
        reaper.unmount_everything_under(state, including_it=mounted)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def base_image(docker: Docker) -> str:
    """A Debian bookworm with python3, made with debootstrap and imported: PYTHON_IMAGE for the build.

    Made once (a few minutes at most); every test here reuses it.
    """
    _, debootstrap = _required()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soak-rootfs-", dir=docker.scratch) as directory:
        rootfs = Path(directory) / "rootfs"
        done = subprocess.run([debootstrap, "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "bookworm",
                               str(rootfs), "http://deb.debian.org/debian"],
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # The build's pip (Debian's) verifies HTTPS against the system store: give it this
        # machine's, so that it trusts what the machine trusts (a proxy's CA, where there is one).
        host_cas = Path("/etc/ssl/certs/ca-certificates.crt")
        if host_cas.exists():
            shutil.copyfile(host_cas, rootfs / "etc/ssl/certs/ca-certificates.crt")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        # An imported image has no environment; the official ones set PATH, and so does this.
        docker("import", "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "-", BASE_IMAGE, stdin=tar.stdout, timeout=600)
        assert tar.wait(timeout=60) == 0
    docker.timings["base image (s)"] = time.monotonic() - started
    return BASE_IMAGE


@pytest.fixture(scope="module")
def image(docker: Docker, base_image: str) -> str:
    """The Dockerfile, built as it is, on the local base image."""
    started = time.monotonic()
    docker("build", "--network", "host", "--build-arg", f"PYTHON_IMAGE={base_image}", "--tag", IMAGE, str(REPO),
           timeout=1800)
    docker.timings["image build (s)"] = time.monotonic() - started
    docker.timings["image (MB)"] = image_bytes(docker, IMAGE) / 1e6
    docker.timings["over its base (MB)"] = (image_bytes(docker, IMAGE) - image_bytes(docker, base_image)) / 1e6
    return IMAGE


def image_bytes(docker: Docker, name: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", name).stdout)


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity in bytes: 64Mi, 1Gi, 500M, 1024."""
    found = re.fullmatch(r"(\d+)(Ki|Mi|Gi|k|M|G)?", quantity)
    assert found, f"not a quantity this test reads: {quantity}"
    factor = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "k": 1000, "M": 1000**2, "G": 1000**3}
    return int(found.group(1)) * factor[found.group(2)]


@dataclass
class Pod:
    """`docker run` arguments that run the image as the rendered CronJob's pod runs it."""

    flags: list[str]  # before the image
    args: list[str]  # after it: the container's args (the image's ENTRYPOINT runs them)
    host_path: Callable[[str], Path]  # where a file the pod sees (by its path in the pod) is kept here
    termination_log: Path  # the file the kubelet would mount at the container's terminationMessagePath
    termination_policy: str  # the container's terminationMessagePolicy

    def termination_message(self, done: subprocess.CompletedProcess[str]) -> str:
        """What Kubernetes shows as the container's `state.terminated.message`, as the kubelet makes it:
        the file (up to 4096 bytes); with FallbackToLogsOnError, when it is empty and the container
        failed, the log's last 80 lines (at most 2048 bytes) instead."""
        message = self.termination_log.read_bytes()[:4096].decode(errors="replace")
        if not message and done.returncode != 0 and self.termination_policy == "FallbackToLogsOnError":
            tail = "".join((done.stdout + done.stderr).splitlines(keepends=True)[-80:])
            message = tail.encode()[-2048:].decode(errors="replace")
        return message


def as_the_pod(resources: tuple[dict[str, Any], ...], root: Path, url: str) -> Pod:
    """The CronJob's pod as docker flags; the URL list points at `url`. Anything unknown fails."""
    pod = find(resources, "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = soak_container(resources)
    assert "command" not in container, "the pod runs the image's ENTRYPOINT"
    assert not pod.get("initContainers") and not pod.get("hostNetwork")
    context = {**pod["securityContext"], **container["securityContext"]}  # the container's wins
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}  # Docker's default seccomp profile
    assert context["runAsNonRoot"] is True
    flags = ["--rm", "--network", "host",  # the one change: the pod's own network is the host's loopback here
             "--user", f"{context['runAsUser']}:{context['runAsGroup']}"]
    if context["readOnlyRootFilesystem"]:
        flags.append("--read-only")
    if context["allowPrivilegeEscalation"] is False:
        flags += ["--security-opt", "no-new-privileges"]
    for capability in context["capabilities"]["drop"]:
        flags += ["--cap-drop", capability]
    assert not context["capabilities"].get("add")
    flags += ["--memory", str(quantity_bytes(container["resources"]["limits"]["memory"]))]
    for item in container.get("env", []):
        flags += ["--env", f"{item['name']}={item['value']}"]

    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    files = mounted_files(resources)
    mounts: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            assert mount.get("readOnly") is True
            here = root / mount["name"]
            here.mkdir(parents=True)
            here.chmod(0o755)  # as a ConfigMap volume: readable by the pod's user
            for path, content in files.items():
                if path.startswith(mount["mountPath"] + "/"):
                    (here / path.removeprefix(mount["mountPath"] + "/")).write_text(content)
                    (here / path.removeprefix(mount["mountPath"] + "/")).chmod(0o644)
            mounts[mount["mountPath"]] = here
            flags += ["--volume", f"{here}:{mount['mountPath']}:ro"]
        elif "emptyDir" in volume:
            size = quantity_bytes(volume["emptyDir"]["sizeLimit"])
            flags += ["--tmpfs", f"{mount['mountPath']}:rw,size={size},mode=1777"]
        else:
            pytest.fail(f"volume {mount['name']}: a kind of volume this test cannot give the container")

    def host_path(path: str) -> Path:
        (directory,) = [m for m in mounts if path.startswith(m + "/")]
        return mounts[directory] / path.removeprefix(directory + "/")

    # The termination message: the kubelet makes an empty file for each container, root's and mode
    # 0666 whatever the umask (kuberuntime_container.go, makeMounts), and mounts it at the path.
    termination_log = root / "termination-log"
    termination_log.touch()
    termination_log.chmod(0o666)
    flags += ["--volume", f"{termination_log}:{container.get('terminationMessagePath', '/dev/termination-log')}"]

    args = list(container["args"])
    urls = host_path(args[args.index("--urls") + 1])
    assert urls.exists(), "--urls names a file that no mounted ConfigMap provides"
    urls.write_text(f"{url}\n")  # the one override: the target
    return Pod(flags, args, host_path, termination_log, container.get("terminationMessagePolicy", "File"))


def run_pod(docker: Docker, image: str, pod: Pod, *extra: str) -> subprocess.CompletedProcess[str]:
    """The pod's container, shortened to two 2 s intervals by flags after its own args."""
    return docker("run", *pod.flags, image, *pod.args, *extra, "--interval", "2s", "--iterations", "2",
                  timeout=180, check=False)


def test_the_image_holds_the_locked_dependencies_and_no_compiler_or_pip(docker: Docker, image: str) -> None:
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == dockerfile_instruction("ENTRYPOINT")
    assert config["Cmd"] == dockerfile_instruction("CMD")
    listing = ("import importlib.metadata as m, json; "
               "print(json.dumps(sorted((d.metadata['Name'].lower().replace('_', '-'), d.version) "
               "for d in m.distributions())))")
    done = docker("run", "--rm", "--network", "none", "--entrypoint", "python3", image, "-c", listing)
    installed = {name: version for name, version in json.loads(done.stdout)}
    locked = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            locked[name.lower().replace("_", "-")] = version
    assert installed == {**locked, "soak-pallet": VERSION}, "exactly the lock's packages and the project"
    tools = docker("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", image, "-c",
                   "command -v gcc cc pip pip3; python3 -m pip --version", check=False)
    assert tools.returncode != 0 and tools.stdout == "", f"a compiler or pip in the image:\n{tools.stdout}"


def test_the_image_stays_slim(docker: Docker, image: str, base_image: str) -> None:
    """The Dockerfile adds the runner's virtual environment and nothing else: no wheels, no compiler."""
    added = image_bytes(docker, image) - image_bytes(docker, base_image)
    # 61 MB on amd64: 37 MB, the remote extra (cramjam, protobuf, opentelemetry-proto: 7.3 MB) and the
    # s3 extra's obstore (a 15 MB library).
    assert 10_000_000 < added < 68_000_000, f"{added / 1e6:.1f} MB over the base image"


def test_the_default_command_runs_the_demo_read_only_and_without_a_network(docker: Docker, image: str) -> None:
    done = docker("run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL",
                  "--security-opt", "no-new-privileges", image, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:")


def test_the_image_runs_the_native_engine(docker: Docker, image: str) -> None:
    """The image's wheel was built with the native engine (setup.py reaches the build stage, the
    C compiled there for the image's platform), and a run with the default `engine: auto` takes it."""
    done = docker("run", "--rm", "--network", "none", "--read-only", image, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "soak: engine: native", done.stderr
    summary = json.loads(done.stdout[done.stdout.index("\n{"):])
    assert summary["engine"] == "native" and summary["good"] == summary["requests"] > 0


def test_the_pod_runs_against_nginx_and_keeps_the_shipped_thresholds(docker: Docker, image: str, nginx: Nginx,
                                                                     tmp_path: Path) -> None:
    resources = render("base")
    pod = as_the_pod(resources, tmp_path, nginx.url)
    before = nginx.requests_logged()
    done = run_pod(docker, image, pod)
    summary = assert_counts_add_up(done.stdout)  # the interval lines, then the summary, adding up
    assert broken_by_the_target(summary) == [], done.stdout[-3000:] + done.stderr  # goal% may be the pace
    assert done.returncode in ((0,) if summary["thresholds"]["passed"] else (3, 9)), done.stdout[-3000:] + done.stderr
    config = json.loads(pod.host_path(pod.args[pod.args.index("--config") + 1]).read_text())
    assert done.stdout.splitlines()[0] == (
        f"# sending {config['qps']} GET req/s with concurrency={config['concurrency']} to {nginx.url} ...")
    assert summary["intervals"] == 2 and summary["good"] == summary["requests"] > 0
    assert summary["requests"] == nginx.requests_logged() - before, "what nginx logged, from the container"
    assert [r["rule"] for r in summary["thresholds"]["rules"]] == config["thresholds"]
    # the verdict where kubectl shows it: passed, or (the machine too busy to keep the pace) which rule broke
    rules = summary["thresholds"]["rules"]
    broken = [f"threshold run {r['rule']}: " for r in rules if not r["ok"]]
    message = pod.termination_message(done)
    if done.returncode == 0:
        assert message == f"passed: {len(rules)} of {len(rules)} thresholds kept\n"
    else:
        lines = message.splitlines()
        assert lines[0] == f"exit code 3: {len(broken)} of {len(rules)} thresholds broken"
        assert [line.split(": ")[0] + ": " for line in lines[1:]] == broken


def test_the_pod_writes_its_metrics_by_remote_write_and_otlp(docker: Docker, image: str, nginx: Nginx,
                                                              tmp_path: Path) -> None:
    """The image has what remoteWrite and otlp load (the remote extra: cramjam, protobuf, opentelemetry-proto),
    and the pod, read-only and without capabilities, writes to a Prometheus and an OTLP receiver on loopback."""
    from tests.support.otlpreceiver import OtlpReceiver
    from tests.support.prometheus import Prometheus

    pod = as_the_pod(render("base"), tmp_path / "pod", nginx.url)
    (tmp_path / "prometheus").mkdir()
    prometheus = Prometheus(tmp_path / "prometheus", [], flags=["--web.enable-remote-write-receiver",
                                                                "--enable-feature=native-histograms"])
    receiver = OtlpReceiver()
    try:
        done = run_pod(docker, image, pod, "--remoteWrite", prometheus.write_url, "--otlp", receiver.url,
                       "--pushgatewayJob", "from-the-image")
        summary = assert_counts_add_up(done.stdout)
        counts = prometheus.query('histogram_count(soak_request_duration_seconds{job="from-the-image"})', time.time())
    finally:
        prometheus.stop()
        receiver.stop()
    assert "remoteWrite" not in done.stderr and "otlp" not in done.stderr, done.stderr
    assert list(counts.values()) == [summary["good"] + summary["bad"]]
    # each interval's snapshot and the final one; those due while a write was out share a request
    assert len(receiver.moments()) == summary["intervals"] + 1 >= len(receiver.requests) >= 1


def test_a_broken_threshold_exits_3(docker: Docker, image: str, nginx: Nginx, tmp_path: Path) -> None:
    """A rule no response can keep, added to the mounted configuration.json: the Job would be Failed."""
    pod = as_the_pod(render("base"), tmp_path, nginx.url)
    config_file = pod.host_path(pod.args[pod.args.index("--config") + 1])
    config = json.loads(config_file.read_text())
    config["thresholds"] = [*config["thresholds"], "max < 1ns"]
    config_file.write_text(json.dumps(config))
    done = run_pod(docker, image, pod)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr
    summary = assert_counts_add_up(done.stdout)
    assert broken_by_the_target(summary) == ["max < 1ns"]
    assert "# threshold run max < 1ns: " in done.stdout
    # `kubectl describe pod` says which rule broke: each broken rule's line of the log, after the code
    broken = [line.removeprefix("# ") for line in done.stdout.splitlines()
              if line.startswith("# threshold ") and line.endswith(" BROKEN")]
    assert any(line.startswith("threshold run max < 1ns: ") for line in broken)
    rules = len(summary["thresholds"]["rules"])
    assert pod.termination_message(done) == "\n".join(
        [f"exit code 3: {len(broken)} of {rules} thresholds broken", *broken]) + "\n"


def test_the_pod_fails_when_its_target_is_down(docker: Docker, image: str, tmp_path: Path) -> None:
    """The shipped configuration against a loopback port where nothing listens: not one response, exit 8
    (the shipped thresholds break too, but 8 says more: runner.core.errors)."""
    pod = as_the_pod(render("base"), tmp_path, f"http://127.0.0.1:{free_port()}/")
    done = run_pod(docker, image, pod)
    assert done.returncode == 8, done.stdout[-3000:] + done.stderr
    summary = assert_counts_add_up(done.stdout)
    assert summary["good"] == 0 and set(summary["errors"]) == {"refused"}
    assert summary["thresholds"]["passed"] is False


def test_validate_in_the_pod_holds_workers_against_its_memory_limit(docker: Docker, image: str, nginx: Nginx,
                                                                     tmp_path: Path) -> None:
    """In the image, under the pod's memory limit (a real cgroup: docker's --memory), validate says how
    many local workers fit, and says so of one more; that many run to their end there, not OOMKilled."""
    resources = render("base")
    limit = quantity_bytes(soak_container(resources)["resources"]["limits"]["memory"])
    fit = workers_that_fit(limit)
    pod = as_the_pod(resources, tmp_path, nginx.url)
    said = docker("run", *pod.flags, image, "validate", *pod.args, "--workers", str(fit + 1),
                  "--concurrency", str(fit + 1), timeout=120)
    (line,) = [line for line in said.stdout.splitlines() if line.startswith("memory:")]
    assert f"MORE than the {limit // 2**20} MiB this runs under" in line and f"at most {fit} workers fit" in line
    done = run_pod(docker, image, pod, "--workers", str(fit), "--concurrency", str(fit))
    assert done.returncode in (0, 3), (done.returncode, done.stderr[-3000:])  # 137 or 5: a process was killed
    summary = assert_counts_add_up(done.stdout)
    assert "failedWorkers" not in summary or not summary["failedWorkers"]
