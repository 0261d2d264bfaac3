"""deploy/: every Kubernetes, KServe and Grafana file parses, and agrees
with the nereid binary. For each container of the manifests, nereid is
started with exactly the container's args (only the model repository
becomes the examples and each port becomes one the kernel picks, mapped
back), every probe's path is called on the port it names, and then:
the Service and PodMonitor name ports the container has, the
HorizontalPodAutoscaler's metric is the adapter rule's, and every metric
name the adapter rule and the Grafana dashboard query is on /metrics of
that server after it served some requests.

Environment: NEREID_BIN (the binary), NEREID_BACKEND_DIR, NEREID_EXAMPLES."""
import glob
import json
import os
import re

import pytest
import yaml

from deploy_helpers import EXAMPLES, SOURCE, Server, http_get, infer_simple

NEREID = os.environ.get("NEREID_BIN", "nereid")
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", "")
DEPLOY = os.path.join(SOURCE, "deploy")
# nereid's port flags, their defaults and the front end each one is.
PORT_FLAGS = {"http": ("--http-port", 8000), "grpc": ("--grpc-port", 8001), "metrics": ("--metrics-port", 8002)}
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
                   "bool", "offset", "inf", "nan"}


def project_version():
    text = open(os.path.join(SOURCE, "CMakeLists.txt")).read()
    return re.search(r"project\(nereid VERSION (\S+)", text).group(1)


def documents():
    docs = {}
    for path in sorted(glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True)):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    docs.setdefault(doc["kind"], []).append((path, doc))
    return docs


DOCS = documents()


def one(kind):
    assert len(DOCS.get(kind, [])) == 1, f"expected one {kind}: {DOCS.get(kind)}"
    return DOCS[kind][0][1]


def flag_value(args, flag):
    values = [a.split("=", 1)[1] for a in args if a.startswith(flag + "=")]
    assert len(values) <= 1, (flag, args)
    assert not any(a == flag for a in args), f"{flag} without '=': the test reads flag=value only"
    return values[0] if values else None


def roles_of(args):
    """{port number: role} that nereid serves with these args."""
    roles = {}
    for role, (flag, default) in PORT_FLAGS.items():
        allow = flag_value(args, f"--allow-{role}")
        if allow is not None and allow.lower() in ("false", "0", "no", "off"):
            continue
        v = flag_value(args, flag)
        roles[int(v) if v is not None else default] = role
    return roles


def resolve_port(container, port):
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    assert port in named, f"probe port {port} is not a port of the container"
    return named[port]


def run_args(args):
    """The container's args for a local run: the examples as the repository,
    every port 0."""
    out = []
    for a in args:
        if a.startswith(("--model-repository=", "--model-store=")):
            out.append(f"--model-repository={EXAMPLES}")
        elif any(a.startswith(flag + "=") for flag, _ in PORT_FLAGS.values()):
            out.append(a.split("=", 1)[0] + "=0")
        else:
            out.append(a)
    for flag, _ in PORT_FLAGS.values():
        if flag_value(args, flag) is None:
            out.append(f"{flag}=0")
    if BACKENDS:
        out.append(f"--backend-directory={BACKENDS}")  # the image's binary finds them beside itself
    return out


def exposed_names(text):
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names


def promql_metric_names(expr):
    """Metric names an expression selects (strings, label matchers, ranges,
    grouping clauses, functions and keywords left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"<<[^>]*>>", "", e)
    names = set()
    for m in re.finditer(r"(?<![A-Za-z0-9_.:$])[A-Za-z_:][A-Za-z0-9_:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group(0) in PROMQL_KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def dashboard_queries():
    with open(os.path.join(DEPLOY, "grafana", "nereid-dashboard.json")) as f:
        dash = json.load(f)
    exprs = []

    def walk(panels):
        for p in panels:
            exprs.extend(t["expr"] for t in p.get("targets", []))
            walk(p.get("panels", []))
    walk(dash["panels"])
    names = set()
    for e in exprs:
        names |= promql_metric_names(e)
    for var in dash.get("templating", {}).get("list", []):
        q = var.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"label_values\((\w+)\s*,", q or "")
        if m:
            names.add(m.group(1))
    return names, exprs


def start_and_probe(container):
    """Starts nereid with the container's args, calls each probe; returns
    (server, {role: local port}). The caller stops the server."""
    args = container["args"]
    roles = roles_of(args)
    for p in container.get("ports", []):
        assert p["containerPort"] in roles, f"container port {p} is not one nereid serves with {args}"
    s = Server([NEREID, *run_args(args)])
    try:
        s.wait_ready()
        local = s.ports()
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = container.get(kind)
            if probe is None:
                continue
            get = probe["httpGet"]
            port = resolve_port(container, get["port"])
            assert port in roles, f"{kind} port {port} is not one nereid serves"
            status, body = http_get(local[roles[port]], get["path"])
            assert status == 200, (kind, get, status, body)
    except BaseException:
        s.close()
        raise
    return s, local


def test_every_file_parses_and_is_named():
    for path in glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                assert doc.get("apiVersion") and doc.get("kind"), path
                if doc["kind"] != "Kustomization":
                    assert doc["metadata"]["name"], path
    kust = one("Kustomization")
    here = {os.path.basename(p) for p in glob.glob(os.path.join(DEPLOY, "kubernetes", "*.yaml"))}
    assert set(kust["resources"]) == here - {"kustomization.yaml"}
    for kind in ("Deployment", "Service", "PodMonitor", "HorizontalPodAutoscaler", "ConfigMap",
                 "ClusterServingRuntime"):
        one(kind)


def containers():
    dep = one("Deployment")["spec"]["template"]["spec"]["containers"]
    rt = one("ClusterServingRuntime")["spec"]["containers"]
    assert len(dep) == 1 and len(rt) == 1
    return dep[0], rt[0]


def test_images_are_this_version():
    for c in containers():
        assert c["image"] == f"localhost/nereid:{project_version()}", c["image"]


def test_deployment_agrees_with_nereid():
    dep = one("Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = c["args"]
    mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
    assert flag_value(args, "--model-repository") in mounts
    # The grace period covers the preStop pause and nereid's own drain.
    exit_timeout = int(flag_value(args, "--exit-timeout-secs") or 30)
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[:2] == ["/bin/busybox", "sleep"], pre_stop
    assert pod["terminationGracePeriodSeconds"] > exit_timeout + int(pre_stop[2])
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert "startupProbe" in c and "requests" in c["resources"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True

    names = {p["name"]: p["containerPort"] for p in c["ports"]}
    roles = roles_of(args)
    svc = one("Service")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    for p in svc["spec"]["ports"]:
        assert p["targetPort"] in names and p["port"] == names[p["targetPort"]], p
    assert {roles[n] for n in names.values()} == {"http", "grpc", "metrics"}
    pm = one("PodMonitor")["spec"]
    assert pm["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    (endpoint,) = pm["podMetricsEndpoints"]
    assert roles[names[endpoint["port"]]] == "metrics"

    hpa = one("HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    (metric,) = hpa["metrics"]
    adapter = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])
    (rule,) = adapter["rules"]
    assert metric["pods"]["metric"]["name"] == rule["name"]["as"]

    s, local = start_and_probe(c)
    try:
        for _ in range(3):
            infer_simple(local["http"])
        status, body = http_get(local["metrics"], endpoint["path"])
        assert status == 200
        exposed = exposed_names(body.decode())
        adapter_names = promql_metric_names(rule["seriesQuery"]) | promql_metric_names(rule["metricsQuery"])
        assert adapter_names and adapter_names <= exposed, adapter_names - exposed

        wanted, exprs = dashboard_queries()
        assert exprs and wanted
        gpu = {n for n in wanted if n.startswith(("nv_gpu_", "nv_energy_"))}
        if not any(n.startswith("nv_gpu_") for n in exposed):
            wanted -= gpu  # GPU panels stay empty on a server without GPU metrics
        assert wanted <= exposed, f"the dashboard queries metrics nereid does not serve: {sorted(wanted - exposed)}"
        s.stop_clean()
    finally:
        s.close()


def test_kserve_runtime_agrees_with_nereid():
    rt = one("ClusterServingRuntime")["spec"]
    c = rt["containers"][0]
    assert c["name"] == "kserve-container"
    assert flag_value(c["args"], "--model-repository") == "/mnt/models"
    assert {"v2", "grpc-v2"} <= set(rt["protocolVersions"])
    roles = roles_of(c["args"])
    assert roles.get(8080) == "http" and roles.get(9000) == "grpc"
    assert int(rt["annotations"]["prometheus.kserve.io/port"]) in roles
    formats = {f["name"] for f in rt["supportedModelFormats"]}
    assert {"triton", "onnx"} <= formats
    s, local = start_and_probe(c)
    try:
        infer_simple(local["http"])
        status, _ = http_get(local["metrics"], rt["annotations"]["prometheus.kserve.io/path"])
        assert status == 200
        s.stop_clean()
    finally:
        s.close()


@pytest.mark.parametrize("expr,names", [
    ('sum by (model) (rate(nv_a{model=~"$model"}[$__rate_interval])) / clamp_min(sum(rate(nv_b[1m])), 1e-9)',
     {"nv_a", "nv_b"}),
    ('max by (model, quantile) (nv_c{quantile=~"0.5|0.9"}) > 0', {"nv_c"}),
    ("sum by (<<.GroupBy>>) (rate(nv_d{<<.LabelMatchers>>}[1m]))", {"nv_d"}),
])
def test_promql_names(expr, names):
    assert promql_metric_names(expr) == names
