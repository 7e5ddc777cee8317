"""The emulator as the official Kubernetes Python client sees it.

Run by crates/rollsafe-emulator/tests/python_client.rs against a fresh emulator:

    python conformance.py KUBECONFIG

The kubeconfig's current context is the admin; a context `bob` is a user with no rights.
Every check raises on failure; the script prints one line per check and exits 0 when all pass.
"""

import json
import sys
import threading
import time

from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

NS = "conformance"


def check(name):
    def wrap(fn):
        fn.check_name = name
        return fn
    return wrap


def status_of(error):
    """The Status body of an ApiException, parsed."""
    body = json.loads(error.body)
    assert body["kind"] == "Status", body
    assert body["apiVersion"] == "v1", body
    return body


def meta(name, labels=None):
    return client.V1ObjectMeta(name=name, namespace=NS, labels=labels or {})


def template(app):
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": app}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx:1.27")]),
    )


@check("CRUD of every served kind the client has typed APIs for")
def crud(api):
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    batch, rbac = client.BatchV1Api(api), client.RbacAuthorizationV1Api(api)
    net = client.NetworkingV1Api(api)
    selector = client.V1LabelSelector(match_labels={"app": "x"})
    kinds = [
        ("Secret", core.create_namespaced_secret, core.read_namespaced_secret,
         core.patch_namespaced_secret, core.delete_namespaced_secret,
         client.V1Secret(metadata=meta("s1"), string_data={"k": "v"})),
        ("ConfigMap", core.create_namespaced_config_map, core.read_namespaced_config_map,
         core.patch_namespaced_config_map, core.delete_namespaced_config_map,
         client.V1ConfigMap(metadata=meta("c1"), data={"k": "v"})),
        ("ServiceAccount", core.create_namespaced_service_account,
         core.read_namespaced_service_account, core.patch_namespaced_service_account,
         core.delete_namespaced_service_account, client.V1ServiceAccount(metadata=meta("sa1"))),
        ("Service", core.create_namespaced_service, core.read_namespaced_service,
         core.patch_namespaced_service, core.delete_namespaced_service,
         client.V1Service(metadata=meta("svc1"), spec=client.V1ServiceSpec(
             selector={"app": "x"}, ports=[client.V1ServicePort(port=80)]))),
        ("Deployment", apps.create_namespaced_deployment, apps.read_namespaced_deployment,
         apps.patch_namespaced_deployment, apps.delete_namespaced_deployment,
         client.V1Deployment(metadata=meta("d1"), spec=client.V1DeploymentSpec(
             selector=selector, template=template("x")))),
        ("StatefulSet", apps.create_namespaced_stateful_set, apps.read_namespaced_stateful_set,
         apps.patch_namespaced_stateful_set, apps.delete_namespaced_stateful_set,
         client.V1StatefulSet(metadata=meta("st1"), spec=client.V1StatefulSetSpec(
             selector=selector, service_name="svc1", template=template("x")))),
        ("DaemonSet", apps.create_namespaced_daemon_set, apps.read_namespaced_daemon_set,
         apps.patch_namespaced_daemon_set, apps.delete_namespaced_daemon_set,
         client.V1DaemonSet(metadata=meta("ds1"), spec=client.V1DaemonSetSpec(
             selector=selector, template=template("x")))),
        ("Job", batch.create_namespaced_job, batch.read_namespaced_job,
         batch.patch_namespaced_job, batch.delete_namespaced_job,
         client.V1Job(metadata=meta("j1"), spec=client.V1JobSpec(template=client.V1PodTemplateSpec(
             spec=client.V1PodSpec(restart_policy="Never",
                                   containers=[client.V1Container(name="c", image="busybox")]))))),
        ("Role", rbac.create_namespaced_role, rbac.read_namespaced_role,
         rbac.patch_namespaced_role, rbac.delete_namespaced_role,
         client.V1Role(metadata=meta("r1"), rules=[client.V1PolicyRule(
             api_groups=[""], resources=["configmaps"], verbs=["get"])])),
        ("Ingress", net.create_namespaced_ingress, net.read_namespaced_ingress,
         net.patch_namespaced_ingress, net.delete_namespaced_ingress,
         client.V1Ingress(metadata=meta("i1"), spec=client.V1IngressSpec(
             default_backend=client.V1IngressBackend(service=client.V1IngressServiceBackend(
                 name="svc1", port=client.V1ServiceBackendPort(number=80)))))),
    ]
    for kind, create, read, patch, delete, body in kinds:
        created = create(NS, body)
        assert created.metadata.uid and created.metadata.resource_version, kind
        name = created.metadata.name
        got = read(name, NS)
        assert got.metadata.uid == created.metadata.uid, kind
        patched = patch(name, NS, {"metadata": {"labels": {"checked": "yes"}}})
        assert patched.metadata.labels.get("checked") == "yes", kind
        assert int(patched.metadata.resource_version) > int(created.metadata.resource_version), kind
        delete(name, NS)
        try:
            read(name, NS)
        except ApiException as error:
            assert error.status == 404, (kind, error.status)
            assert status_of(error)["reason"] == "NotFound", kind
        else:
            raise AssertionError(f"{kind} still readable after delete")


@check("list with limit and _continue reads every object exactly once")
def paging(api):
    core = client.CoreV1Api(api)
    for i in range(25):
        core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta(f"page-{i:02d}")))
    names, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(NS, limit=10, _continue=token)
        pages += 1
        names += [item.metadata.name for item in page.items
                  if item.metadata.name.startswith("page-")]
        assert len(page.items) <= 10
        token = page.metadata._continue
        if not token:
            break
    # 25 of ours and the namespace's kube-root-ca.crt: 26 in pages of 10.
    assert pages == 3, pages
    assert sorted(names) == [f"page-{i:02d}" for i in range(25)], names


@check("a stale replace is 409 Conflict with a parseable Status")
def stale_replace(api):
    core = client.CoreV1Api(api)
    first = core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta("stale"), data={"v": "1"}))
    core.patch_namespaced_config_map("stale", NS, {"data": {"v": "2"}})
    first.data = {"v": "3"}
    try:
        core.replace_namespaced_config_map("stale", NS, first)
    except ApiException as error:
        assert error.status == 409, error.status
        status = status_of(error)
        assert status["reason"] == "Conflict", status
        assert status["details"]["name"] == "stale", status
        assert "the object has been modified" in status["message"], status
    else:
        raise AssertionError("a stale replace was accepted")


@check("a failing JSON Patch test is 422 and changes nothing")
def failing_test(api):
    core = client.CoreV1Api(api)
    before = core.read_namespaced_config_map("stale", NS)
    patch = [{"op": "test", "path": "/metadata/uid", "value": "not-the-uid"},
             {"op": "add", "path": "/data/x", "value": "y"}]
    try:
        core.patch_namespaced_config_map("stale", NS, patch)
    except ApiException as error:
        assert error.status == 422, error.status
        assert status_of(error)["reason"] == "Invalid", error.body
    else:
        raise AssertionError("a failing test op was applied")
    after = core.read_namespaced_config_map("stale", NS)
    assert after.metadata.resource_version == before.metadata.resource_version


@check("watch sees ADDED, MODIFIED, DELETED in order")
def watch_order(api):
    core = client.CoreV1Api(api)
    start = core.list_namespaced_config_map(NS).metadata.resource_version

    def change():
        time.sleep(0.2)
        core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta("watched"), data={"a": "1"}))
        core.patch_namespaced_config_map("watched", NS, {"data": {"a": "2"}})
        core.delete_namespaced_config_map("watched", NS)

    writer = threading.Thread(target=change)
    writer.start()
    seen = []
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_config_map, NS, resource_version=start,
                               field_selector="metadata.name=watched", timeout_seconds=10):
        seen.append(event["type"])
        if event["type"] == "DELETED":
            stream.stop()
    writer.join()
    assert seen == ["ADDED", "MODIFIED", "DELETED"], seen


@check("a watch from a compacted resourceVersion is 410 Gone")
def watch_gone(api):
    core = client.CoreV1Api(api)
    try:
        for event in watch.Watch().stream(core.list_namespaced_config_map, NS,
                                          resource_version="1", timeout_seconds=5):
            if event["type"] == "ERROR":
                assert event["raw_object"]["code"] == 410, event
                return
        raise AssertionError("no 410 for a compacted resourceVersion")
    except ApiException as error:
        assert error.status == 410, error.status


@check("label and field selectors")
def selectors(api):
    core = client.CoreV1Api(api)
    for name, tier in [("sel-a", "web"), ("sel-b", "db"), ("sel-c", "web")]:
        core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta(name, {"tier": tier})))
    web = core.list_namespaced_config_map(NS, label_selector="tier=web")
    assert sorted(i.metadata.name for i in web.items) == ["sel-a", "sel-c"]
    not_web = core.list_namespaced_config_map(NS, label_selector="tier,tier!=web")
    assert [i.metadata.name for i in not_web.items] == ["sel-b"]
    by_name = core.list_namespaced_config_map(NS, field_selector="metadata.name=sel-b")
    assert [i.metadata.name for i in by_name.items] == ["sel-b"]
    typed = core.list_namespaced_secret(NS, field_selector="type=Opaque")
    assert all(s.type == "Opaque" for s in typed.items)


@check("impersonation: the admin acting as bob gets bob's answer")
def impersonation(kubeconfig):
    admin = config.new_client_from_config(config_file=kubeconfig)
    admin.set_default_header("Impersonate-User", "bob")
    try:
        client.CoreV1Api(admin).list_namespaced_secret(NS)
    except ApiException as error:
        assert error.status == 403, error.status
        status = status_of(error)
        assert status["reason"] == "Forbidden", status
        assert 'User "bob" cannot list resource "secrets"' in status["message"], status
    else:
        raise AssertionError("impersonating bob could list Secrets")
    review = client.AuthenticationV1Api(admin).create_self_subject_review(
        client.V1SelfSubjectReview())
    assert review.status.user_info.username == "bob", review


@check("the DynamicClient over discovery")
def dynamic_client(api):
    dyn = dynamic.DynamicClient(api)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.namespaced and deployments.name == "deployments"
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "dyn", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "dyn"}},
                     "template": {"metadata": {"labels": {"app": "dyn"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    created = deployments.create(body=body, namespace=NS)
    assert created.metadata.name == "dyn"
    listed = deployments.get(namespace=NS)
    assert "dyn" in [item.metadata.name for item in listed.items]
    secrets = dyn.resources.get(api_version="v1", kind="Secret")
    assert secrets.name == "secrets"
    deployments.delete(name="dyn", namespace=NS)


def main():
    kubeconfig = sys.argv[1]
    api = config.new_client_from_config(config_file=kubeconfig)
    client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    checks = [crud, paging, stale_replace, failing_test, watch_order, watch_gone, selectors,
              impersonation, dynamic_client]
    for fn in checks:
        fn(kubeconfig if fn is impersonation else api)
        print(f"ok: {fn.check_name}", flush=True)


if __name__ == "__main__":
    main()
