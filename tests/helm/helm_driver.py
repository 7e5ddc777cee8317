"""Drives Helm's own Go SDK (through helm-python-sdk) for the chart tests.

One JSON request on stdin, one JSON answer on stdout; the Rust tests in
crates/rollsafe/tests/install_*.rs call it with the virtual environment's python.

Requests (field "op"):
  lint      {chart, values, namespace}            -> {"messages": [...], "errors": [...]}
  render    {chart, values, name, namespace,      -> {"manifests": {path: text}}
             kubeVersion}
            kubeVersion (optional): the cluster version `.Capabilities.KubeVersion`
            says, as `helm template --kube-version` (default: Helm's own, v1.36.0
            for Helm 4.2).
  validate  {chart, values}                       -> {"ok": bool, "error": str | null}
  install   {chart, values, name, namespace,      -> {"manifest": text}
             postRenderer, postRendererArgs}
            a client-side dry-run install, as `helm install --dry-run=client
            --post-renderer NAME --post-renderer-args ARG`: Helm 4 runs the named
            post-renderer plugin found under $HELM_PLUGINS.
  lookup    {chart, values, name, namespace,      -> {"manifests": {path: text}}
             kubeconfig}
            a cluster-aware render: the chart's `lookup` calls reach the cluster.
Errors: {"error": "<Helm error class>", "message": "..."} and exit status 1.
"""

from __future__ import annotations

import json
import sys

import helm_python as helm
from helm_python import _native


def lint(request: dict) -> dict:
    report = helm.lint(
        request["chart"],
        request.get("values"),
        strict=True,
        namespace=request.get("namespace", "default"),
        kube_version=request.get("kubeVersion"),
    )
    return {"messages": report.get("messages") or [], "errors": report.get("errors") or []}


def render(request: dict) -> dict:
    chart = helm.Chart.load(request["chart"])
    if request.get("kubeVersion") is None:
        manifests = chart.render(
            request.get("values"),
            name=request.get("name", "rollsafe"),
            namespace=request.get("namespace", "default"),
            is_install=True,
        )
        return {"manifests": manifests}
    # helm-python-sdk's render does not expose the cluster version its C library takes
    # (`kube_version`, as `helm template --kube-version`): call it directly with it.
    options = {
        "name": request.get("name", "rollsafe"),
        "namespace": request.get("namespace", "default"),
        "is_install": True,
        "kube_version": request["kubeVersion"],
    }
    values = request.get("values")
    rendered = _native.call_string(
        "helm_render",
        chart._raw(),
        None if values is None else json.dumps(values),
        json.dumps(options),
    )
    return {"manifests": json.loads(rendered)}


def validate(request: dict) -> dict:
    chart = helm.Chart.load(request["chart"])
    try:
        chart.validate_schema(request.get("values"))
    except helm.HelmValuesError as error:
        return {"ok": False, "error": str(error)}
    return {"ok": True, "error": None}


def install(request: dict) -> dict:
    # helm-python-sdk does not expose the post-renderer options of install; its C library
    # does (post_renderer, post_renderer_args), so call it directly with them.
    config = helm.Config(
        kube_apiserver="https://127.0.0.1:1",
        kube_token="unused-by-a-client-dry-run",
        namespace=request.get("namespace", "default"),
        storage_driver="memory",
    )
    chart = helm.Chart.load(request["chart"])
    options = {
        "namespace": request.get("namespace", "default"),
        "dry_run": "client",
        "post_renderer": request["postRenderer"],
        "post_renderer_args": request.get("postRendererArgs", []),
    }
    payload = _native.call_string(
        "helm_install",
        config._raw(),
        _native.HANDLE(0),
        chart._raw(),
        None,
        request.get("name", "rollsafe"),
        json.dumps(request.get("values") or {}),
        json.dumps(options),
    )
    return {"manifest": json.loads(payload).get("manifest", "")}


def lookup(request: dict) -> dict:
    config = helm.Config(
        kubeconfig_path=request["kubeconfig"],
        namespace=request.get("namespace", "default"),
    )
    chart = helm.Chart.load(request["chart"])
    manifests = config.render(
        chart,
        request.get("values"),
        name=request.get("name", "rollsafe"),
        namespace=request.get("namespace", "default"),
        is_install=False,
        is_upgrade=True,
    )
    return {"manifests": manifests}


OPS = {"lint": lint, "render": render, "validate": validate, "install": install, "lookup": lookup}


def main() -> int:
    request = json.load(sys.stdin)
    try:
        answer = OPS[request["op"]](request)
    except helm.HelmError as error:
        json.dump({"error": type(error).__name__, "message": str(error)}, sys.stdout)
        return 1
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
