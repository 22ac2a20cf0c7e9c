"""The pallet's Kubernetes manifests, as `kubectl kustomize` renders them.

Every variant (the root, and the root with each optional component turned on the way
README says: by uncommenting its line) is rendered with the real kubectl and checked for what
schemas cannot say. Their validation against the Kubernetes schemas in strict mode, yamllint
and checkov's scan are checks of their own (tests/checks.py), run before the tests.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import runner
from runner.config.jsonfile import read_config_file
from runner.config.settings import merge, settings_from
from runner.config.urls import URLS_KEY, load_url_file
from runner.core.errors import EXIT_USAGE
from tests.conftest import REPO, run_soak
from tests.support.pallet import (
    KUBERNETES_VERSIONS,
    VARIANTS,
    find,
    mounted_files,
    nginx_server,
    pod_specs,
    render,
    soak_container,
)

# The namespaces the pallet owns: `kubectl delete -k .` deletes them and all they hold.
PALLET_NAMESPACES = ["soak", "soak-target"]
# Every variant README and docs/ tell of, the monitoring component's too.
EVERY_VARIANT = [*VARIANTS, "monitoring", "linkerd+scale-out+metrics+monitoring"]


def stable_name(resource: dict[str, Any]) -> str:
    """The resource's name, a generated ConfigMap's content hash written as docs/ write it: `<hash>`."""
    name: str = resource["metadata"]["name"]
    return re.sub(r"-[a-z0-9]{10}$", "-<hash>", name) if resource["kind"] == "ConfigMap" else name


@pytest.mark.parametrize("variant", VARIANTS)
def test_renders_the_pallet(variant: str) -> None:
    kinds = sorted((r["kind"], r["metadata"].get("namespace", ""), stable_name(r)) for r in render(variant))
    components = variant.split("+")
    # The linkerd and metrics components open what they need with NetworkPolicies of their own.
    extra = [("NetworkPolicy", "soak", "soak-linkerd"), ("NetworkPolicy", "soak-target", "nginx-linkerd")] \
        if "linkerd" in components else []
    extra += [("NetworkPolicy", "soak", "soak-metrics")] if "metrics" in components else []
    extra += [("PersistentVolumeClaim", "soak", "soak-results")] if "results-pvc" in components else []
    assert kinds == sorted([
        ("ConfigMap", "soak", "soak-config-<hash>"), ("ConfigMap", "soak", "soak-urls"), ("CronJob", "soak", "soak"),
        ("ConfigMap", "soak-target", "nginx-conf-<hash>"),
        ("Deployment", "soak-target", "nginx"), ("Namespace", "", "soak"), ("Namespace", "", "soak-target"),
        ("NetworkPolicy", "soak", "soak"), ("NetworkPolicy", "soak-target", "nginx"), ("Service", "soak-target", "nginx"),
        ("ServiceAccount", "soak", "soak"), *extra,
    ])


@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_delete_k_deletes_the_pallets_own_namespaces_and_nothing_of_the_users(variant: str) -> None:
    """`kubectl delete -k .` deletes every object rendered, and a Namespace takes all it holds with it: the
    target's was `nginx`, a name many clusters use for their own nginx. The only Namespaces rendered are the
    pallet's own; every other object is in one of them (none cluster-wide, none left to land in whichever
    namespace kubectl's context names); docs/kubernetes.md says what goes, naming each."""
    resources = render(variant)
    assert sorted(r["metadata"]["name"] for r in resources if r["kind"] == "Namespace") == PALLET_NAMESPACES
    elsewhere = [(r["kind"], r["metadata"]["name"], r["metadata"].get("namespace")) for r in resources
                 if r["kind"] != "Namespace" and r["metadata"].get("namespace") not in PALLET_NAMESPACES]
    assert elsewhere == []
    docs = (REPO / "docs" / "kubernetes.md").read_text()
    section = docs.split("\n## Removing the pallet\n", 1)[1].split("\n## ", 1)[0]
    for resource in resources:
        assert resource["kind"] in section and f"`{stable_name(resource)}`" in section, (resource["kind"], stable_name(resource))


def test_cronjob_runs_hourly_one_at_a_time_and_never_retries() -> None:
    cronjob = find(render("base"), "CronJob", "soak")["spec"]
    assert cronjob["schedule"] == "0 * * * *"
    assert cronjob["timeZone"] == "Etc/UTC"
    assert cronjob["concurrencyPolicy"] == "Forbid"
    # Late enough to start right after an overrunning soak, early enough not to pile up.
    assert 0 < cronjob["startingDeadlineSeconds"] < 3600
    assert cronjob["successfulJobsHistoryLimit"] >= 1 and cronjob["failedJobsHistoryLimit"] >= 1
    job = cronjob["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    assert job["ttlSecondsAfterFinished"] >= 3600
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False


def test_the_deadline_outlasts_the_configured_soak() -> None:
    """activeDeadlineSeconds kills a hung run, not a healthy one: it exceeds the soak's length."""
    settings = settings_from(merge(read_config_file(str(REPO / "configuration.json"))))
    deadline = find(render("base"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
    assert settings.pace.run_ns is not None
    run_s = settings.pace.run_ns / 1e9
    assert run_s + 5 * 60 <= deadline <= run_s + 30 * 60


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_meets_the_restricted_profile(variant: str) -> None:
    for name, pod in pod_specs(render(variant)):
        pod_context = pod.get("securityContext", {})
        assert pod_context.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        assert pod_context.get("runAsNonRoot") is True, name
        assert isinstance(pod_context.get("runAsUser"), int) and pod_context["runAsUser"] > 0, name
        assert pod.get("automountServiceAccountToken") is False, name
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), name
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container.get("securityContext", {})
            where = f"{name}/{container['name']}"
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("privileged", False) is False, where
            assert context.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not context.get("capabilities", {}).get("add"), where
            assert context.get("readOnlyRootFilesystem") is True, where
            assert context.get("runAsNonRoot", True) is True, where
            assert context.get("seccompProfile", {"type": "RuntimeDefault"})["type"] == "RuntimeDefault", where


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_has_resources(variant: str) -> None:
    for name, pod in pod_specs(render(variant)):
        for container in pod["containers"]:
            resources = container.get("resources", {})
            assert {"cpu", "memory"} <= set(resources.get("requests", {})), name
            assert "memory" in resources.get("limits", {}), name
            # A CPU limit throttles, and throttling would read as latency in the results.
            assert "cpu" not in resources.get("limits", {}), name


def test_nginx_is_probed_and_the_service_reaches_it_where_the_default_url_points() -> None:
    resources = render("base")
    deployment = find(resources, "Deployment", "nginx")
    service = find(resources, "Service", "nginx")
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["port"] in ("http", 8080)
    assert "livenessProbe" in container
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port["targetPort"] in container_ports or port["targetPort"] in container_ports.values()
    assert service["spec"]["type"] == "ClusterIP"
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    assert load_url_file(str(REPO / "urlsconfigmap.yaml")) == [f"http://{host}"]


@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_namespaces_enforce_the_restricted_profile_of_a_pinned_version(variant: str) -> None:
    """Enforced as the oldest Kubernetes the pallet supports defines "restricted" (an upgrade cannot start
    refusing its pods); audited and warned by the cluster's own version, which tells of a coming change.
    The linkerd component enforces "privileged" (linkerd-init needs NET_ADMIN) and keeps the rest."""
    meshed = "linkerd" in variant.split("+")
    for name in PALLET_NAMESPACES:
        labels = find(render(variant), "Namespace", name)["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == ("privileged" if meshed else "restricted")
        assert labels["pod-security.kubernetes.io/enforce-version"] == f"v{KUBERNETES_VERSIONS[0].rsplit('.', 1)[0]}"
        for mode in ("audit", "warn"):
            assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
            assert labels[f"pod-security.kubernetes.io/{mode}-version"] == "latest"


def image_tag(image: str) -> str:
    """The tag of `registry/name:tag` (or `...:tag@sha256:...`)."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[1]


@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_the_pallet_as_kubernetes_people_expect_it(variant: str) -> None:
    """Issue 25's points, each on the rendered pallet: kubectl's default container, the termination
    message, the labels and version, the pinned target, the soak's own ServiceAccount, Linux nodes."""
    resources = render(variant)
    cronjob = find(resources, "CronJob", "soak")
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
    container = soak_container(resources)
    # `kubectl logs job/...` behind Linkerd picks the runner, not the proxy
    assert template["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] == container["name"]
    # the verdict where kubectl shows it: the runner writes where the container says, by default
    runner_path = settings_from(merge({})).report.termination_message_path
    assert container["terminationMessagePath"] == runner_path == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert not any(a.startswith("--terminationMessagePath") for a in container["args"])
    # the soak's own identity, with no token and no API access
    pod = template["spec"]
    account = find(resources, "ServiceAccount", pod["serviceAccountName"])
    assert account["metadata"] == {**account["metadata"], "name": "soak", "namespace": "soak"}
    assert account["automountServiceAccountToken"] is False and pod["automountServiceAccountToken"] is False
    assert not [r for r in resources if r["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    # Linux nodes only: the images are built for linux/amd64 and linux/arm64
    for name, spec in pod_specs(resources):
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}, name
    # no priority class: the soak gets what ordinary pods get (docs/deploy.md, "Priority and preemption")
    assert "priorityClassName" not in pod and not [r for r in resources if r["kind"] == "PriorityClass"]
    # the recommended labels, on every object and pod template: the soak's version is the package's,
    # the target's is the version its image is pinned to (a full nginx version, and Alpine's)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version == runner.__version__ == image_tag(container["image"])
    (nginx,) = find(resources, "Deployment", "nginx")["spec"]["template"]["spec"]["containers"]
    pinned = re.fullmatch(r"(\d+\.\d+\.\d+)-alpine\d+\.\d+", image_tag(nginx["image"]))
    assert pinned, f"{nginx['image']}: not a full nginx and Alpine version"
    expected = {"soak": ("load-generator", version), "soak-target": ("target", pinned[1])}
    for resource in resources:
        namespace = resource["metadata"].get("namespace") or resource["metadata"]["name"]
        component, want = expected[namespace]
        where = (resource["kind"], resource["metadata"]["name"])
        assert resource["metadata"]["labels"]["app.kubernetes.io/part-of"] == "soak-pallet", where
        for meta in [resource["metadata"]] + [t["metadata"] for t in pod_templates(resource)]:
            assert meta["labels"]["app.kubernetes.io/part-of"] == "soak-pallet", where  # the pods' too
            assert meta["labels"]["app.kubernetes.io/component"] == component, where
            assert meta["labels"]["app.kubernetes.io/version"] == want, where


def pod_templates(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates a workload holds (a CronJob's Job template's too)."""
    if resource["kind"] == "Deployment":
        return [resource["spec"]["template"]]
    if resource["kind"] == "CronJob":
        return [resource["spec"]["jobTemplate"], resource["spec"]["jobTemplate"]["spec"]["template"]]
    return []


# Empty maps the API server keeps as written: a NetworkPolicy's label selectors.
KEPT_EMPTY = {"namespaceSelector", "podSelector"}


@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_what_is_applied_is_what_the_api_server_keeps(variant: str) -> None:
    """The API server drops an empty list or map (Go's omitempty): `ingress: []` came back without it,
    so every `kubectl apply -k .` found the live object changed and said "configured". Nothing
    rendered is empty, so a second apply says "unchanged". But an empty label selector: a
    NetworkPolicy's selectors are pointers to a LabelSelector, which omitempty keeps when set, and
    `{}` there means "every namespace" (or pod), as the soak's egress to any pod says it."""
    def empties(value: Any, path: str) -> list[str]:
        if isinstance(value, dict):
            if not value and path.rsplit(".", 1)[-1] in KEPT_EMPTY:
                return []
            return ([path] if not value else []) + [e for k, v in value.items() for e in empties(v, f"{path}.{k}")]
        if isinstance(value, list):
            return ([path] if not value else []) + [e for i, v in enumerate(value) for e in empties(v, f"{path}[{i}]")]
        return []

    for resource in render(variant):
        assert empties(resource, f"{resource['kind']}/{resource['metadata']['name']}") == []
    # and the NetworkPolicies' directions stand as policyTypes: one with no rule denies it all
    soak = find(render(variant), "NetworkPolicy", "soak")["spec"]
    assert soak["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in soak
    assert "egress" not in find(render(variant), "NetworkPolicy", "nginx")["spec"]


def test_config_mounts_are_where_the_runner_reads() -> None:
    """The runner's --config and --urls paths are files of the mounted, rendered ConfigMaps."""
    resources = render("base")
    files = mounted_files(resources)
    args = soak_container(resources)["args"]
    config_path = args[args.index("--config") + 1]
    urls_path = args[args.index("--urls") + 1]
    assert json.loads(files[config_path]) == json.loads((REPO / "configuration.json").read_text())
    assert files[urls_path] == yaml.safe_load((REPO / "urlsconfigmap.yaml").read_text())["data"]["urls.txt"]
    for mount in soak_container(resources)["volumeMounts"]:
        if mount["mountPath"].startswith("/etc/soak"):
            assert mount["readOnly"] is True


def test_validate_reads_the_urls_key_the_pod_reads(tmp_path: Path) -> None:
    """A urlsconfigmap.yaml whose list sits under another key passed validate (its only key was
    read), while the rendered CronJob reads /etc/soak/urls/urls.txt, which it then has not."""
    renamed = ("urlsconfigmap.yaml", "  urls.txt: |", "  targets.txt: |")
    args = soak_container(render("base"))["args"]
    urls_path = args[args.index("--urls") + 1]
    assert urls_path.rsplit("/", 1)[1] == URLS_KEY
    assert urls_path in mounted_files(render("base"))
    assert urls_path not in mounted_files(render("base", (renamed,))), "the pod would find no list"
    edited = tmp_path / "urlsconfigmap.yaml"
    edited.write_text((REPO / "urlsconfigmap.yaml").read_text().replace(renamed[1], renamed[2]))
    done = run_soak("validate", "--config", str(REPO / "configuration.json"), "--urls", str(edited))
    assert (done.returncode, done.stdout) == (EXIT_USAGE, "")
    assert done.stderr == (f"soak: {edited}: the ConfigMap has no key urls.txt, which is the file the soak pod reads "
                           "(it has the key targets.txt); put the URLs under urls.txt\n")
    shipped = run_soak("validate", "--config", str(REPO / "configuration.json"), "--urls",
                       str(REPO / "urlsconfigmap.yaml"))
    assert shipped.returncode == 0, shipped.stderr


def test_the_docs_say_how_an_eviction_past_the_pods_own_limit_shows() -> None:
    """docs/deploy.md said every evicted soak pod carries the condition DisruptionTarget; the kubelet's
    eviction of a pod past its own emptyDir's sizeLimit adds none (its evictPod is given no condition):
    only status.reason Evicted and a message that names the volume and the limit, as the docs now
    say for the rendered pod's own volume."""
    spec = find(render("base"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if "emptyDir" in v]
    # the kubelet's words (pkg/kubelet/eviction: emptyDirMessageFmt), for this volume and limit
    message = f'Usage of EmptyDir volume "{volume["name"]}" exceeds the limit "{volume["emptyDir"]["sizeLimit"]}".'
    text = " ".join((REPO / "docs" / "deploy.md").read_text().split())
    assert f"`{message}`" in text
    assert "no `DisruptionTarget` condition" in text and "`status.reason` is `Evicted`" in text
    assert "A preempted or evicted soak pod says so: its status carries the condition `DisruptionTarget`" not in text


@pytest.mark.parametrize("path", ["README.md", "docs/kubernetes.md"])
def test_where_the_docs_suggest_a_job_by_hand_they_say_the_history_limits_delete_it(path: str) -> None:
    """`kubectl create job --from=cronjob/soak` makes the CronJob the Job's controller, so its history
    limits delete that Job with the hourly ones; the docs that suggest it did not say so."""
    spec = find(render("base"), "CronJob", "soak")["spec"]
    (limit,) = {spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]}
    text = " ".join((REPO / path).read_text().split())
    after = text[text.index("kubectl create job -n soak --from=cronjob/soak"):][:1500]
    for said in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit", "ttlSecondsAfterFinished", f"{limit}"):
        assert said in after, said
    assert "> soak-now.log" in after, "how to keep its log"


def test_the_image_is_set_in_one_place_and_matches_the_dockerfile_user() -> None:
    kustomization = yaml.safe_load((REPO / "kustomization.yaml").read_text())
    (soak_image,) = [i for i in kustomization["images"] if i["name"] == "soak"]
    resources = render("base")
    assert soak_container(resources)["image"] == f"{soak_image['newName']}:{soak_image['newTag']}"
    pod = find(resources, "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    user = [line.split()[1] for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("USER ")]
    assert user == [f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"]


def test_linkerd_component_injects_native_sidecars_in_both_namespaces() -> None:
    for name in PALLET_NAMESPACES:
        metadata = find(render("linkerd"), "Namespace", name)["metadata"]
        assert metadata["annotations"]["linkerd.io/inject"] == "enabled"
        assert metadata["annotations"]["config.beta.linkerd.io/proxy-enable-native-sidecar"] == "true"
        assert metadata["annotations"]["config.alpha.linkerd.io/proxy-enable-native-sidecar"] == "true"
        assert metadata["labels"]["pod-security.kubernetes.io/warn"] == "restricted"
    assert "annotations" not in find(render("base"), "Namespace", "soak")["metadata"]


def test_the_linkerd_docs_read_the_runners_log_as_everywhere_else() -> None:
    """docs/linkerd.md told users to pass `-c soak`: the rendered meshed pod names the runner its default
    container, so `kubectl logs job/...` reads it, as README's command does; `-c` is for the proxy."""
    template = find(render("linkerd"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]
    assert template["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] == "soak"
    # one container: Linkerd injects its proxy at admission, as a native sidecar (an init container)
    assert [c["name"] for c in template["spec"]["containers"]] == ["soak"]
    docs = (REPO / "docs" / "linkerd.md").read_text()
    commands = re.findall(r"^kubectl logs .*$", docs, re.M)
    assert "kubectl logs -n soak job/soak-<time>" in commands
    assert all(" -c soak" not in command for command in commands), commands
    assert "-c soak`" not in docs


@pytest.mark.parametrize("variant", ["base", "nginx-10-replicas", "linkerd+nginx-10-replicas"])
def test_nginx_names_its_pod_in_the_header_the_shipped_configuration_counts_backends_by(variant: str) -> None:
    """Each pod adds X-Soak-Backend: its name ($hostname), always (a 5xx too), and the soak counts by it."""
    resources = render(variant)
    server = nginx_server(resources)
    assert "add_header X-Soak-Backend $hostname always;" in server
    assert "listen 8080;" in server  # where the Service's targetPort and the probes point
    config = json.loads(mounted_files(resources)["/etc/soak/config/configuration.json"])
    assert config["backendHeader"] == "X-Soak-Backend"


def test_nginx_10_replicas_component() -> None:
    assert find(render("nginx-10-replicas"), "Deployment", "nginx")["spec"]["replicas"] == 10
    assert find(render("base"), "Deployment", "nginx")["spec"]["replicas"] == 1
    both = render("linkerd+nginx-10-replicas")
    assert find(both, "Deployment", "nginx")["spec"]["replicas"] == 10


def test_metrics_component_serves_and_annotates_port_9090() -> None:
    """The runner's --metricAddr, the container port and the prometheus.io annotations agree."""
    for variant in ("metrics", "linkerd+scale-out+metrics"):
        resources = render(variant)
        container = soak_container(resources)
        assert container["args"][-1] == "--metricAddr=:9090"
        addr = settings_from(merge({"metricAddr": container["args"][-1].split("=", 1)[1]})).metrics.addr
        (port,) = container["ports"]
        assert port == {"name": "metrics", "containerPort": int(addr.rsplit(":", 1)[1]), "protocol": "TCP"}
        template = find(resources, "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]
        assert template["metadata"]["annotations"] == {
            "prometheus.io/scrape": "true", "prometheus.io/port": str(port["containerPort"]), "prometheus.io/path": "/metrics",
            "kubectl.kubernetes.io/default-container": "soak",
        }
    base = soak_container(render("base"))
    assert "ports" not in base and not any(a.startswith("--metricAddr") for a in base["args"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_empty_dir_has_a_size_limit(variant: str) -> None:
    """Which checkov (tests/checks.py) does not check."""
    for name, pod in pod_specs(render(variant)):
        for volume in pod.get("volumes", []):
            if "emptyDir" in volume:
                assert volume["emptyDir"].get("sizeLimit"), f"{name}: emptyDir {volume['name']} has no sizeLimit"


@pytest.mark.parametrize("variant", ["results-pvc", "scale-out+results-s3", "linkerd+scale-out+metrics+results-pvc"])
def test_the_results_components_name_each_run_by_its_job_and_the_runner_takes_their_arguments(
        variant: str, tmp_path: Path) -> None:
    resources = render(variant)
    container = soak_container(resources)
    pod = find(resources, "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    store, run = container["args"][-2:]
    assert run == "--resultsRun=$(SOAK_JOB)"
    (job,) = [e for e in container["env"] if e["name"] == "SOAK_JOB"]
    assert job["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    if "results-pvc" in variant:
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == "results"]
        assert store == f"--resultsStore=file://{mount['mountPath']}"
        (volume,) = [v for v in pod["volumes"] if v["name"] == "results"]
        assert volume["persistentVolumeClaim"]["claimName"] == find(resources, "PersistentVolumeClaim")["metadata"][
            "name"] == "soak-results"
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"] == 10001, "the runner writes"
        store = f"--resultsStore=file://{tmp_path}/results"  # the volume, here
    else:
        assert store.startswith("--resultsStore=s3://")
        assert container["envFrom"] == [{"secretRef": {"name": "soak-results-s3", "optional": True}}]
    # The arguments as Kubernetes expands them for a Job's pod, and the runner takes them.
    args = [a.replace("$(SOAK_JOB)", "soak-29400000") for a in container["args"][:-2]]
    config = {"/etc/soak/config/configuration.json": tmp_path / "configuration.json", "/etc/soak/urls/urls.txt":
              tmp_path / "urls.txt"}
    for path, content in mounted_files(resources).items():
        if path in config:
            config[path].write_text(content)
    args = [str(config.get(a, a)) for a in args]
    env = {"JOB_COMPLETION_INDEX": "1", "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "x"}
    done = run_soak("validate", *args, store, "--resultsRun=soak-29400000", env=env)
    assert done.returncode == 0, done.stderr
    assert "(run soak-29400000, job soak)" in done.stdout
