"""The Kubernetes manifests in deploy/kubernetes, checked offline (docs/scale-out.md):

* `kubectl kustomize deploy/kubernetes` renders them (the kustomize built into kubectl);
* every rendered object is walked against the API models of the Kubernetes Python client
  (python3-kubernetes): each field must be in its model's `attribute_map` and have the type its
  `openapi_types` says (str, int, bool, float, list[...], dict(str, ...), a nested model;
  `object`, the int-or-string fields, takes anything), and the object must deserialize through
  `ApiClient`, whose model constructors refuse a missing required field;
* the deployment's own rules (flags, probes, token file mode, grace period, peers Service, ...);
* `yamllint --strict` with the repository's .yamllint passes.

The negative tests prove the checker fails on an unknown field, a wrong type and a missing
required field. Run: /usr/bin/python3 -m pytest -q tests/deploy (ctest runs it as
deploy_kubernetes). Skips, naming what is missing, without kubectl, yamllint or
python3-kubernetes (scripts/test, or scripts/setup --for-tests, installs them).
"""
import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None
try:
    from kubernetes import client as k8s
except ImportError:
    k8s = None


def _missing():
    missing = []
    if shutil.which("kubectl") is None:
        missing.append("kubectl (Debian package kubernetes-client)")
    if shutil.which("yamllint") is None:
        missing.append("yamllint (Debian package yamllint)")
    if k8s is None:
        missing.append("the Python module kubernetes (Debian package python3-kubernetes)")
    if yaml is None:
        missing.append("the Python module yaml (Debian package python3-yaml)")
    return missing


MISSING = _missing()
pytestmark = pytest.mark.skipif(bool(MISSING), reason="missing: " + ", ".join(MISSING))


# ---------------------------------------------------------------------------------------------
# The checker

PRIMITIVES = {
    "str": (str,),
    "datetime": (str,),
    "date": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}


def model_class(api_version, kind):
    """The client's model of apiVersion/kind: apps/v1 DaemonSet -> V1DaemonSet."""
    version = api_version.rsplit("/", 1)[-1]
    return getattr(k8s, version[:1].upper() + version[1:] + kind, None)


def check_value(value, type_name, path, problems):
    """Appends to `problems` what in `value` does not fit the client's type `type_name`."""
    if type_name == "object":
        return
    if type_name.startswith("list[") and type_name.endswith("]"):
        if not isinstance(value, list):
            problems.append(f"{path}: a {type(value).__name__}, expected a list")
            return
        for i, item in enumerate(value):
            check_value(item, type_name[5:-1], f"{path}[{i}]", problems)
        return
    if type_name.startswith("dict(") and type_name.endswith(")"):
        key_type, _, item_type = type_name[5:-1].partition(", ")
        if not isinstance(value, dict):
            problems.append(f"{path}: a {type(value).__name__}, expected a map")
            return
        for key, item in value.items():
            check_value(key, key_type, f"{path} key {key!r}", problems)
            check_value(item, item_type, f"{path}.{key}", problems)
        return
    if type_name in PRIMITIVES:
        wanted = PRIMITIVES[type_name]
        if isinstance(value, bool) and bool not in wanted:  # bool is an int in Python
            problems.append(f"{path}: {value!r} is a bool, expected {type_name}")
        elif not isinstance(value, wanted):
            problems.append(f"{path}: {value!r} is a {type(value).__name__}, expected {type_name}")
        return
    model = getattr(k8s, type_name, None)
    if model is None or not hasattr(model, "openapi_types"):
        problems.append(f"{path}: the client has no model {type_name}")
        return
    check_model(value, model, path, problems)


def check_model(value, model, path, problems):
    if not isinstance(value, dict):
        problems.append(f"{path}: a {type(value).__name__}, expected a {model.__name__} map")
        return
    by_json_name = {json_name: attr for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        attr = by_json_name.get(key)
        if attr is None:
            problems.append(f"{path}.{key}: unknown field of {model.__name__}")
            continue
        check_value(item, model.openapi_types[attr], f"{path}.{key}", problems)


class _Response:
    def __init__(self, obj):
        self.data = json.dumps(obj)


def check_object(obj):
    """Every problem of one rendered object, as text; [] when it fits the API models."""
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    model = model_class(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if model is None:
        return [f"{name}: no model for {obj.get('apiVersion')} {obj.get('kind')}"]
    problems = []
    check_model(obj, model, name, problems)
    try:  # the model constructors refuse a missing required field (client_side_validation)
        k8s.ApiClient().deserialize(_Response(obj), model.__name__)
    except (ValueError, TypeError) as e:
        problems.append(f"{name}: {model.__name__} does not deserialize: {e}")
    return problems


# ---------------------------------------------------------------------------------------------
# The manifests

def render(directory=MANIFESTS):
    run = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, f"kubectl kustomize {directory} failed:\n{run.stderr}"
    return [o for o in yaml.safe_load_all(run.stdout) if o]


@pytest.fixture(scope="module")
def objects():
    return render()


def one(objects, kind, name=None):
    found = [o for o in objects
             if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(objects):
    ds = one(objects, "DaemonSet")
    return ds["spec"]["template"]["spec"]["containers"][0]


def flag(args, name):
    assert name in args, f"serve's args lack {name}: {args}"
    return args[args.index(name) + 1]


def test_renders_every_object_in_one_namespace(objects):
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(["Namespace", "ServiceAccount", "Secret", "DaemonSet", "Service",
                            "Service", "NetworkPolicy", "PodDisruptionBudget"])
    namespaced = [o for o in objects if o["kind"] != "Namespace"]
    assert {o["metadata"].get("namespace") for o in namespaced} == {"codebox"}


def test_every_object_fits_the_api_models(objects):
    problems = [p for o in objects for p in check_object(o)]
    assert problems == []


def test_yamllint_passes():
    run = subprocess.run(["yamllint", "--strict", "-c", str(REPO / ".yamllint"),
                          str(MANIFESTS), str(REPO / ".yamllint")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_serve_runs_as_a_peer_of_the_ready_pods(objects):
    c = container(objects)
    assert c["command"] == ["codebox"] and c["args"][0] == "serve"
    args = c["args"]
    assert flag(args, "--listen") == "0.0.0.0:8080"
    assert flag(args, "--token-file") == "/etc/codebox/token"
    assert flag(args, "--node") == "$(POD_IP)"
    assert flag(args, "--peers-dns") == "codebox-peers.$(POD_NAMESPACE).svc.cluster.local:8080"
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {"POD_IP": "status.podIP", "POD_NAMESPACE": "metadata.namespace"}
    peers = one(objects, "Service", "codebox-peers")["spec"]
    assert peers["clusterIP"] == "None" and peers["publishNotReadyAddresses"] is True
    assert peers["ports"][0]["port"] == 8080
    clients = one(objects, "Service", "codebox")["spec"]
    assert clients.get("clusterIP") != "None" and clients["ports"][0]["port"] == 8080
    labels = one(objects, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    for svc in (peers, clients):
        assert all(labels.get(k) == v for k, v in svc["selector"].items())


def test_probes_grace_period_and_token_mode(objects):
    ds = one(objects, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = container(objects)
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/healthz"
        assert c[probe]["httpGet"]["port"] in (8080, "http")
    assert {"name": "http", "containerPort": 8080, "protocol": "TCP"} in c["ports"]
    drain = int(flag(c["args"], "--drain"))
    assert drain < pod["terminationGracePeriodSeconds"] <= drain + 30
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert token["secret"]["defaultMode"] == 0o400
    assert "fsGroup" not in pod.get("securityContext", {})  # it would make the token 0440
    secret = one(objects, "Secret", token["secret"]["secretName"])
    assert "token" in secret.get("stringData", {}) or "token" in secret.get("data", {})
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts["/etc/codebox"] == "token"
    for path in ("/var/lib/codebox", "/dev/shm", "/run"):
        assert path in mounts, f"no volume at {path}"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/var/lib/codebox"]]["hostPath"]["path"] == "/var/lib/codebox"
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"


def test_placement_privileges_and_resources(objects):
    ds = one(objects, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"codebox.dev/sandbox": "true"}
    assert any(t["key"] == "codebox.dev/sandbox" for t in pod["tolerations"])
    assert pod["automountServiceAccountToken"] is False
    sa = one(objects, "ServiceAccount", pod["serviceAccountName"])
    assert sa["automountServiceAccountToken"] is False
    c = container(objects)
    assert c["securityContext"]["privileged"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "Unconfined"
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["memory"]
    assert "cpu" not in c["resources"]["limits"]
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1
    assert one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_network_policy_admits_clients_and_peers_only(objects):
    spec = one(objects, "NetworkPolicy")["spec"]
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    assert spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "codebox"}
    (ingress,) = spec["ingress"]
    sources = [p["podSelector"]["matchLabels"] for p in ingress["from"]]
    assert sources == [{"codebox.dev/client": "true"}, {"app.kubernetes.io/name": "codebox"}]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8080}]
    ports = sorted((p["protocol"], p["port"]) for rule in spec["egress"] for p in rule["ports"])
    assert ports == [("TCP", 53), ("TCP", 8080), ("UDP", 53)]
    assert not any("ipBlock" in peer for rule in spec["egress"] for peer in rule["to"])


def test_the_image_is_overridden_by_kustomize_images(tmp_path):
    copy_dir = tmp_path / "kubernetes"
    shutil.copytree(MANIFESTS, copy_dir)
    k = copy_dir / "kustomization.yaml"
    text = k.read_text()
    assert "    newName: codebox\n    newTag: latest\n" in text
    k.write_text(text.replace("    newName: codebox\n    newTag: latest\n",
                              "    newName: example/codebox\n    newTag: 1.2.3\n"))
    assert container(render(copy_dir))["image"] == "example/codebox:1.2.3"


# ---------------------------------------------------------------------------------------------
# The checker itself: it must fail where the API server would

def test_checker_refuses_an_unknown_field(objects):
    ds = copy.deepcopy(one(objects, "DaemonSet"))
    pod = ds["spec"]["template"]["spec"]
    pod["containres"] = pod.pop("containers")
    problems = check_object(ds)
    assert any("containres: unknown field of V1PodSpec" in p for p in problems), problems
    # The missing containers is also a missing required field, which deserializing catches.
    assert any("does not deserialize" in p and "containers" in p for p in problems), problems


def test_checker_refuses_wrong_types(objects):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"replicas": "x", "selector": {}, "template": {"spec": {
                      "containers": [{"name": "c"}]}}}}
    problems = check_object(deployment)
    assert problems[0] == "Deployment/d.spec.replicas: 'x' is a str, expected int", problems
    assert "does not deserialize" in problems[1], problems  # the client's int() fails too
    ds = copy.deepcopy(one(objects, "DaemonSet"))
    c = ds["spec"]["template"]["spec"]["containers"][0]
    c["args"] = "serve"                                  # a list expected
    c["ports"][0]["containerPort"] = "8080"              # an int expected
    c["securityContext"]["privileged"] = "true"          # a bool expected
    c["resources"]["limits"]["memory"] = 19              # a str expected (a quoted quantity)
    c["env"][0] = ["POD_IP"]                             # a nested model expected
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = ["x"]  # object: any
    problems = "\n".join(check_object(ds))
    for wanted in (".args: a str, expected a list",
                   ".containerPort: '8080' is a str, expected int",
                   ".privileged: 'true' is a str, expected bool",
                   ".limits.memory: 19 is a int, expected str",
                   ".env[0]: a list, expected a V1EnvVar map"):
        assert wanted in problems, problems
    assert "maxUnavailable" not in problems


def test_checker_refuses_a_missing_required_field_and_an_unknown_kind(objects):
    ds = copy.deepcopy(one(objects, "DaemonSet"))
    del ds["spec"]["template"]["spec"]["containers"][0]["name"]
    problems = check_object(ds)
    assert len(problems) == 1 and "does not deserialize" in problems[0], problems
    assert "`name`" in problems[0], problems
    assert check_object({"apiVersion": "v1", "kind": "Sevrice", "metadata": {"name": "s"}}) == [
        "Sevrice/s: no model for v1 Sevrice"]
    assert check_object(one(objects, "Service", "codebox")) == []
