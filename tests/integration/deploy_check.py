#!/usr/bin/env python3
"""Checks the deploy/ manifests for the fields that matter (run by
test_deploy_manifests.sh).  Usage: deploy_check.py ROOT BUILD_DIR

Every problem is printed as "FAIL: ..."; sub-checks that cannot run here
(binary not built, binary without the flag set yet) print "skip: ...".
Exit status: 0 all good, 1 a problem was found.
"""
import os
import re
import subprocess
import sys

import yaml

# The capability set the agent needs, in Kubernetes spelling (no CAP_).
AGENT_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "SYS_RESOURCE", "CHECKPOINT_RESTORE"}

problems = []
notes = []


def fail(msg):
    problems.append(msg)


def skip(msg):
    notes.append(msg)


def load_docs(path):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    return docs


def objects_in(root):
    """Every Kubernetes object under deploy/kubernetes, by (kind, name)."""
    objs = {}
    for dirpath, _, files in os.walk(os.path.join(root, "deploy", "kubernetes")):
        for fn in sorted(files):
            if not fn.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(dirpath, fn)
            try:
                docs = load_docs(path)
            except yaml.YAMLError as e:
                fail(f"{path}: does not parse: {e}")
                continue
            for d in docs:
                if isinstance(d, list):  # a JSON6902 patch file
                    continue
                if d.get("kind") == "Kustomization":
                    continue
                for field in ("apiVersion", "kind", "metadata"):
                    if field not in d:
                        fail(f"{path}: object without {field}")
                name = d.get("metadata", {}).get("name")
                if not name:
                    fail(f"{path}: {d.get('kind')} without metadata.name")
                key = (d.get("kind"), name)
                if key in objs:
                    fail(f"{path}: {key} defined twice")
                objs[key] = (path, d)
    return objs


def json_pointer(doc, pointer):
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    parent = doc
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent[p]
    last = parts[-1]
    return parent, (int(last) if isinstance(parent, list) and last != "-" else last)


def apply_json6902(doc, ops, where):
    """The subset kustomize overlays here use: test, replace, add."""
    import copy

    doc = copy.deepcopy(doc)
    for op in ops:
        try:
            parent, key = json_pointer(doc, op["path"])
            if op["op"] == "test":
                if parent[key] != op["value"]:
                    fail(f"{where}: test {op['path']} is {parent[key]!r}, patch expects {op['value']!r}")
            elif op["op"] == "replace":
                parent[key]  # must exist
                parent[key] = op["value"]
            elif op["op"] == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if key == "-" else key, op["value"])
                else:
                    parent[key] = op["value"]
            else:
                fail(f"{where}: op {op['op']} not checked by this test")
        except (KeyError, IndexError, ValueError, TypeError) as e:
            fail(f"{where}: path {op.get('path')} does not exist in the target ({e})")
    return doc


def kustomize(root, kdir, objs):
    """Resolves a kustomization into {(kind, name): doc}, applying patches."""
    kfile = os.path.join(kdir, "kustomization.yaml")
    k = load_docs(kfile)[0]
    out = {}
    for res in k.get("resources", []):
        rpath = os.path.normpath(os.path.join(kdir, res))
        if os.path.isdir(rpath):
            if not os.path.exists(os.path.join(rpath, "kustomization.yaml")):
                fail(f"{kfile}: resource {res} is a directory without kustomization.yaml")
                continue
            out.update(kustomize(root, rpath, objs))
        elif not os.path.exists(rpath):
            fail(f"{kfile}: resource {res} does not exist")
        else:
            for d in load_docs(rpath):
                out[(d["kind"], d["metadata"]["name"])] = d
    for p in k.get("patches", []):
        tgt = p.get("target", {})
        key = (tgt.get("kind"), tgt.get("name"))
        if key not in out:
            fail(f"{kfile}: patch target {key} is not among the resources")
            continue
        ops = load_docs(os.path.join(kdir, p["path"]))[0]
        out[key] = apply_json6902(out[key], ops, f"{kfile}: {p['path']}")
    return out


def pod_spec(d):
    return d["spec"]["template"]["spec"]


def containers(d):
    return pod_spec(d).get("containers", []) + pod_spec(d).get("initContainers", [])


def flag_value(args, flag):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def mount_for(d, container, path):
    """(volumeMount, volume) of a container mounting at path, or (None, None)."""
    for m in container.get("volumeMounts", []):
        if m["mountPath"] == path:
            for v in pod_spec(d).get("volumes", []):
                if v["name"] == m["name"]:
                    return m, v
            fail(f"{d['metadata']['name']}: mount {path} names missing volume {m['name']}")
    return None, None


def under_mount(d, container, path):
    """The mount whose mountPath holds file path (longest prefix)."""
    best = (None, None)
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") + "/"
        if path.startswith(mp) and (best[0] is None or len(mp) > len(best[0]["mountPath"])):
            best = mount_for(d, container, m["mountPath"])
    return best


def check_no_privileged(objs):
    for (kind, name), (path, d) in objs.items():
        if kind not in ("DaemonSet", "Deployment", "StatefulSet"):
            continue
        for c in containers(d):
            sc = c.get("securityContext", {})
            if sc.get("privileged"):
                fail(f"{path}: {name}/{c['name']} is privileged")
            if sc.get("allowPrivilegeEscalation", True):
                fail(f"{path}: {name}/{c['name']} allows privilege escalation")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                fail(f"{path}: {name}/{c['name']} does not drop ALL capabilities")
            if kind != "DaemonSet" and sc.get("capabilities", {}).get("add"):
                fail(f"{path}: {name}/{c['name']} adds capabilities")


def check_agent(objs):
    path, ds = objs.get(("DaemonSet", "strata-agent"), (None, None))
    if ds is None:
        fail("no DaemonSet strata-agent")
        return None
    spec = pod_spec(ds)
    if spec.get("hostPID") is not True:
        fail(f"{path}: hostPID is not true")
    c = containers(ds)[0]
    caps = set(c.get("securityContext", {}).get("capabilities", {}).get("add", []))
    if caps != AGENT_CAPS:
        fail(f"{path}: capabilities {sorted(caps)}, want exactly {sorted(AGENT_CAPS)}")
    required = {
        "/sys/kernel/btf": True,  # readOnly wanted
        "/sys/fs/bpf": None,
        "/sys/fs/cgroup": True,
    }
    for mp, ro in required.items():
        m, v = mount_for(ds, c, mp)
        if m is None:
            fail(f"{path}: agent lacks mount {mp}")
            continue
        if v.get("hostPath", {}).get("path") != mp:
            fail(f"{path}: {mp} is not the host's {mp}")
        if ro and not m.get("readOnly"):
            fail(f"{path}: {mp} should be readOnly")
    if not any(mount_for(ds, c, p)[0] for p in ("/sys/kernel/tracing", "/sys/kernel/debug")):
        fail(f"{path}: agent mounts neither tracefs nor debugfs")
    args = c.get("args", [])
    spool = flag_value(args, "--spool")
    m, v = mount_for(ds, c, spool) if spool else (None, None)
    if not spool or m is None or "hostPath" not in v:
        fail(f"{path}: --spool {spool} is not a hostPath mount (batches must survive restarts)")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c.get("env", [])}
    for field in ("spec.nodeName", "metadata.name"):
        if field not in env.values():
            fail(f"{path}: no env var from the downward API field {field}")
    if c.get("securityContext", {}).get("readOnlyRootFilesystem") is not True:
        fail(f"{path}: agent root filesystem is writable")
    return ds


def check_token(d, c, args, path, flag="--token-file"):
    """The Secret whose mount holds the file flag names (None: a problem)."""
    tf = flag_value(args, flag)
    if not tf:
        fail(f"{path}: {d['metadata']['name']} has no {flag}")
        return None
    m, v = under_mount(d, c, tf)
    if m is None or "secret" not in v:
        fail(f"{path}: {flag} {tf} is not inside a Secret mount")
        return None
    key = os.path.basename(tf)
    items = v["secret"].get("items")
    if items and key not in {i.get("path") for i in items}:
        fail(f"{path}: secret volume does not project {key}")
    return v["secret"]["secretName"]


def check_server(objs, resolved, ds):
    path, dep = objs.get(("Deployment", "strata-server"), (None, None))
    _, svc = objs.get(("Service", "strata-server"), (None, None))
    if dep is None or svc is None:
        fail("no Deployment/Service strata-server")
        return
    c = containers(dep)[0]
    args = c.get("args", [])
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    listen = flag_value(args, "--listen") or ""
    lport = int(listen.rsplit(":", 1)[-1]) if ":" in listen else None
    if lport not in ports.values():
        fail(f"{path}: --listen {listen} is not a declared containerPort {ports}")
    rp = c.get("readinessProbe", {}).get("httpGet", {})
    if rp.get("path") != "/healthz":
        fail(f"{path}: readiness probe is not GET /healthz")
    if ports.get(rp.get("port"), rp.get("port")) != lport:
        fail(f"{path}: readiness probe port {rp.get('port')} is not the listen port")
    ann = dep["spec"]["template"]["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/metrics":
        fail(f"{path}: no Prometheus scrape annotations for /metrics")
    if str(ann.get("prometheus.io/port")) != str(lport):
        fail(f"{path}: prometheus.io/port {ann.get('prometheus.io/port')} != listen port {lport}")
    store = flag_value(args, "--store") or ""
    if not store.startswith("sqlite:"):
        fail(f"{path}: base --store {store} is not sqlite:")
    else:
        m, v = under_mount(dep, c, store[len("sqlite:"):])
        if m is None or "persistentVolumeClaim" not in v:
            fail(f"{path}: SQLite database {store} is not on a PersistentVolumeClaim")
        elif ("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]) not in objs:
            fail(f"{path}: PVC {v['persistentVolumeClaim']['claimName']} is not defined")
    if svc["spec"]["selector"] != dep["spec"]["selector"]["matchLabels"]:
        fail(f"{path}: Service selector does not match the Deployment")
    svc_port = svc["spec"]["ports"][0]
    tp = svc_port["targetPort"]
    if ports.get(tp, tp) != lport:
        fail(f"{path}: Service targetPort {tp} is not the listen port")
    # Agents hold the ingest token, readers the read token: two Secrets.
    if flag_value(args, "--token-file"):
        fail(f"{path}: server uses --token-file (one credential for ingest and read)")
    server_secret = check_token(dep, c, args, path, "--ingest-token-file")
    read_secret = check_token(dep, c, args, path, "--read-token-file")
    if server_secret and server_secret == read_secret:
        fail(f"{path}: ingest and read tokens come from one Secret ({server_secret})")
    for a in args:
        if re.search(r"(?i)(password|token)=|://[^/@]*:[^/@]*@", a):
            fail(f"{path}: a secret on the command line: {a}")

    if ds is not None:
        ac = containers(ds)[0]
        url = flag_value(ac.get("args", []), "--server") or ""
        want = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc:{svc_port['port']}"
        if want not in url:
            fail(f"agent --server {url} does not point at the Service ({want})")
        agent_secret = check_token(ds, ac, ac.get("args", []), "agent")
        if agent_secret != server_secret:
            fail(f"agent token Secret {agent_secret} != server ingest token Secret {server_secret}")

    # The ClickHouse overlay: the patched server must point at the
    # ClickHouse Service's HTTP port.
    chdep = resolved.get(("Deployment", "strata-server"))
    chsvc = resolved.get(("Service", "clickhouse"))
    if chdep is None or chsvc is None:
        fail("the clickhouse overlay lacks the server Deployment or the clickhouse Service")
        return
    chc = containers(chdep)[0]
    chargs = chc.get("args", [])
    store = flag_value(chargs, "--store") or ""
    m = re.fullmatch(r"clickhouse://(\w+)@([^/:@]+):(\d+)/(\w+)", store)
    if not m:
        fail(f"clickhouse overlay: --store {store} is not clickhouse://USER@HOST:PORT/DB")
        return
    user, host, port = m.group(1), m.group(2), int(m.group(3))
    check_clickhouse_password(chdep, chc, chargs, user, resolved)
    if host.split(".")[0] != chsvc["metadata"]["name"]:
        fail(f"clickhouse overlay: host {host} is not the clickhouse Service")
    if port not in [p["port"] for p in chsvc["spec"]["ports"]]:
        fail(f"clickhouse overlay: port {port} is not a clickhouse Service port")
    if ("StatefulSet", "clickhouse") not in resolved:
        fail("clickhouse overlay: no clickhouse StatefulSet")


def check_clickhouse_password(chdep, chc, chargs, user, resolved):
    """The server's ClickHouse password file and ClickHouse's user agree:
    one Secret, read by the server as a file, by ClickHouse from the env
    var its users.d config names; the passwordless default user removed."""
    secret = check_token(chdep, chc, chargs, "clickhouse overlay", "--store-password-file")
    sts = resolved.get(("StatefulSet", "clickhouse"))
    cm = resolved.get(("ConfigMap", "clickhouse-config"))
    if not secret or sts is None or cm is None:
        fail("clickhouse overlay: no password Secret, StatefulSet or ConfigMap")
        return
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef", {})
           for e in containers(sts)[0].get("env", [])}
    users = "".join(v for k, v in cm.get("data", {}).items() if "users" in k)
    m = re.search(rf"<{user}>.*?<password from_env=\"(\w+)\"\s*/>", users, re.S)
    if not m:
        fail(f"clickhouse overlay: no users.d entry for {user} with a password from_env")
        return
    ref = env.get(m.group(1), {})
    if ref.get("name") != secret:
        fail(f"clickhouse overlay: ClickHouse's {m.group(1)} is not from Secret {secret}")
    if '<default remove="remove"/>' not in users:
        fail("clickhouse overlay: the passwordless default user is kept")
    mounts = {mm["mountPath"] for mm in containers(sts)[0].get("volumeMounts", [])}
    if not any(p.startswith("/etc/clickhouse-server/users.d/") for p in mounts):
        fail("clickhouse overlay: the users config is not mounted in users.d")


def check_tls(tls):
    """The TLS overlay: the server serves HTTPS with key and certificate
    from a Secret, its probes speak HTTPS, and the agents ship to https://
    verifying with a CA from a Secret."""
    dep = tls.get(("Deployment", "strata-server"))
    ds = tls.get(("DaemonSet", "strata-agent"))
    if dep is None or ds is None:
        fail("tls overlay lacks the server Deployment or the agent DaemonSet")
        return
    c = containers(dep)[0]
    args = c.get("args", [])
    cert = check_token(dep, c, args, "tls overlay", "--tls-cert")
    key = check_token(dep, c, args, "tls overlay", "--tls-key")
    if cert and cert != key:
        fail(f"tls overlay: certificate ({cert}) and key ({key}) from different Secrets")
    for probe in ("readinessProbe", "livenessProbe"):
        if c.get(probe, {}).get("httpGet", {}).get("scheme") != "HTTPS":
            fail(f"tls overlay: the server's {probe} does not speak HTTPS")
    ac = containers(ds)[0]
    aargs = ac.get("args", [])
    if not (flag_value(aargs, "--server") or "").startswith("https://"):
        fail(f"tls overlay: agent --server {flag_value(aargs, '--server')} is not https://")
    check_token(ds, ac, aargs, "tls overlay agent", "--ca-file")


def unit_settings(path):
    settings = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";", "[")) or "=" not in line:
                continue
            k, v = line.split("=", 1)
            settings.setdefault(k, []).append(v)
    return settings


def check_units(root):
    d = os.path.join(root, "deploy", "systemd")
    agent = unit_settings(os.path.join(d, "strata-agent.service"))
    want = {"CAP_" + c for c in AGENT_CAPS}
    for key in ("CapabilityBoundingSet", "AmbientCapabilities"):
        got = set(" ".join(agent.get(key, [])).split())
        if got != want:
            fail(f"strata-agent.service: {key} {sorted(got)}, want exactly {sorted(want)}")
    if "bpf" not in agent.get("SystemCallFilter", [""])[0].split():
        fail("strata-agent.service: SystemCallFilter does not allow bpf")
    server = unit_settings(os.path.join(d, "strata-server.service"))
    if server.get("CapabilityBoundingSet") != [""]:
        fail("strata-server.service: holds capabilities")
    creds = {v.split(":", 1)[0] for v in server.get("LoadCredential", [])}
    for flag, cred in (("--ingest-token-file", "ingest-token"), ("--read-token-file", "read-token")):
        if f"{flag} ${{CREDENTIALS_DIRECTORY}}/{cred}" not in server["ExecStart"][0] or cred not in creds:
            fail(f"strata-server.service: {flag} is not the {cred} credential")
    return {"strata-agent": agent["ExecStart"][0], "strata-server": server["ExecStart"][0]}


def check_flags(build, objs, resolved, execs, extra=()):
    """Every --flag a manifest or unit passes must be in the binary's --help."""
    uses = {"strata-agent": set(), "strata-server": set()}
    for d in list(resolved.values()) + list(extra) + [d for _, d in objs.values()]:
        if d.get("kind") not in ("DaemonSet", "Deployment"):
            continue
        for c in containers(d):
            binary = os.path.basename((c.get("command") or [""])[0])
            if binary in uses:
                uses[binary] |= {a.split("=")[0] for a in c.get("args", []) if a.startswith("--")}
    for binary, line in execs.items():
        uses[binary] |= set(re.findall(r"(--[a-z][a-z0-9-]*)", line))
    for binary, flags in uses.items():
        exe = os.path.join(build, binary)
        if not os.access(exe, os.X_OK):
            skip(f"{binary} not built: flags {sorted(flags)} not checked")
            continue
        r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
        text = r.stdout + r.stderr
        if "--help" not in text and "-h" not in text and "usage" not in text.lower():
            skip(f"{binary} has no --help yet: flags not checked")
            continue
        # The agent before the uploader: --server is listed but inert.
        if binary == "strata-agent" and re.search(r"--server.*not in this build", text):
            skip(f"{binary} has no uploader yet: flags {sorted(flags)} not checked")
            continue
        for f in sorted(flags):
            if not re.search(re.escape(f) + r"\b", text):
                fail(f"{binary}: manifests use {f}, which `{binary} --help` does not list")
        print(f"ok: {binary} --help lists {' '.join(sorted(flags))}")


def check_clickhouse_cluster(cl):
    """The clustered ClickHouse overlay: the server's --store names one host
    per StatefulSet pod (through its headless Service), --clickhouse-cluster
    names a cluster of remote_servers with one shard per pod on those pods'
    native port, which the container declares."""
    where = "clickhouse-cluster overlay"
    dep, sts = cl.get(("Deployment", "strata-server")), cl.get(("StatefulSet", "clickhouse"))
    cm = cl.get(("ConfigMap", "clickhouse-config"))
    if dep is None or sts is None or cm is None:
        fail(f"{where}: no server Deployment, clickhouse StatefulSet or ConfigMap")
        return
    args = containers(dep)[0].get("args", [])
    store, name = flag_value(args, "--store") or "", flag_value(args, "--clickhouse-cluster")
    m = re.fullmatch(r"clickhouse://(\w+)@([^/@]+)/(\w+)", store)
    if not m or not name:
        fail(f"{where}: --store {store} / --clickhouse-cluster {name} is not a cluster store")
        return
    hosts = [h.split(":") for h in m.group(2).split(",")]
    replicas, svc = sts["spec"].get("replicas", 1), sts["spec"]["serviceName"]
    headless = cl.get(("Service", svc))
    if headless is None or headless["spec"].get("clusterIP") != "None":
        fail(f"{where}: the StatefulSet's Service {svc} is not headless")
    want = [f"{sts['metadata']['name']}-{i}.{svc}.{sts['metadata']['namespace']}.svc" for i in range(replicas)]
    if [h[0] for h in hosts] != want:
        fail(f"{where}: --store hosts {[h[0] for h in hosts]} are not the pods {want}")
    xml = "".join(v for v in cm.get("data", {}).values() if f"<{name}>" in v)
    shards = re.findall(r"<shard>.*?<host>([^<]+)</host>\s*<port>(\d+)</port>", xml, re.S)
    if [h for h, _ in shards] != want:
        fail(f"{where}: cluster {name}'s shards {shards} are not the pods {want}")
    ports = [p["containerPort"] for p in containers(sts)[0].get("ports", [])]
    if any(int(p) not in ports for _, p in shards):
        fail(f"{where}: a shard's native port is not a container port ({ports})")


def check_replicas(rp):
    """The replicas overlay: at least two server pods on the clustered
    store, each named by its pod (--replica-id $(POD_NAME) from the
    downward API), without a ReadWriteOnce claim every pod would share."""
    where = "replicas overlay"
    dep = rp.get(("Deployment", "strata-server"))
    if dep is None:
        fail(f"{where}: no server Deployment")
        return
    if dep["spec"].get("replicas", 1) < 2:
        fail(f"{where}: {dep['spec'].get('replicas', 1)} server replica(s)")
    if dep["spec"].get("strategy", {}).get("type") == "Recreate":
        fail(f"{where}: Recreate stops every replica at once")
    c = containers(dep)[0]
    args = c.get("args", [])
    if flag_value(args, "--replica-id") != "$(POD_NAME)":
        fail(f"{where}: --replica-id is {flag_value(args, '--replica-id')!r}, not $(POD_NAME)")
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        fail(f"{where}: POD_NAME is not the pod's name (downward API)")
    if not (flag_value(args, "--store") or "").startswith("clickhouse://"):
        fail(f"{where}: replicas need a shared ClickHouse store")
    if any("persistentVolumeClaim" in v for v in pod_spec(dep).get("volumes", [])):
        fail(f"{where}: a claim every replica would mount")


def main():
    root, build = sys.argv[1], sys.argv[2]
    objs = objects_in(root)
    resolved = kustomize(root, os.path.join(root, "deploy", "kubernetes", "clickhouse"), objs)
    cluster = kustomize(root, os.path.join(root, "deploy", "kubernetes", "clickhouse-cluster"), objs)
    check_clickhouse_cluster(cluster)
    replicas = kustomize(root, os.path.join(root, "deploy", "kubernetes", "replicas"), objs)
    check_replicas(replicas)
    base = kustomize(root, os.path.join(root, "deploy", "kubernetes", "base"), objs)
    tls = kustomize(root, os.path.join(root, "deploy", "kubernetes", "tls"), objs)
    for key in base:
        if key not in resolved:
            fail(f"clickhouse overlay lost {key}")
        if key not in tls:
            fail(f"tls overlay lost {key}")
        if key not in cluster:
            fail(f"clickhouse-cluster overlay lost {key}")
        if key not in replicas:
            fail(f"replicas overlay lost {key}")
    check_tls(tls)
    check_no_privileged(objs)
    ds = check_agent(objs)
    check_server(objs, resolved, ds)
    execs = check_units(root)
    check_flags(build, objs, resolved, execs,
                list(tls.values()) + list(cluster.values()) + list(replicas.values()))
    print(f"checked {len(objs)} objects: {', '.join(f'{k}/{n}' for k, n in sorted(objs))}")
    for n in notes:
        print("skip:", n)
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
