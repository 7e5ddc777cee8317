//! The control plane's readiness steps, in order: etcd answers `/health`, the API server
//! `/readyz`, the simulated node is Ready and untainted (kwok and the node lifecycle
//! controller), and a canary Deployment becomes Available and its namespace goes away again
//! (the scheduler, the workload controllers, kwok's pod stages, the namespace controller and
//! the garbage collector).

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{ControlPlaneError, READY_STEP};

const POLL: Duration = Duration::from_millis(250);

/// Polls `check` until it gives `Some`, for at most [`READY_STEP`].
pub(super) async fn until<T, F, Fut>(step: &str, check: F) -> Result<T, ControlPlaneError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    crate::poll::poll_until(READY_STEP, POLL, check)
        .await
        .ok_or_else(|| ControlPlaneError::NotReady {
            step: step.to_owned(),
        })
}

/// etcd's `/health` says `"health":"true"`.
pub(super) async fn etcd(port: u16) -> Result<(), ControlPlaneError> {
    until("etcd answers /health", || async move {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        answer.contains("\"health\":\"true\"").then_some(())
    })
    .await
}

/// A client from a kubeconfig file.
pub(super) async fn client(kubeconfig: &Path) -> Result<Client, ControlPlaneError> {
    let setup = || ControlPlaneError::Setup {
        reason: "the admin kubeconfig does not load".to_owned(),
    };
    let file = Kubeconfig::read_from(kubeconfig).map_err(|_| setup())?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|_| setup())?;
    Client::try_from(config).map_err(|_| setup())
}

/// `/readyz` answers `ok`.
pub(super) async fn api_server(client: &Client) -> Result<(), ControlPlaneError> {
    until("kube-apiserver answers /readyz", || async {
        let request = http::Request::get("/readyz").body(Vec::new()).ok()?;
        let text = client.request_text(request).await.ok()?;
        (text.trim() == "ok").then_some(())
    })
    .await
}

/// The API server's `gitVersion`.
pub(super) async fn version(client: &Client) -> Result<String, ControlPlaneError> {
    until("kube-apiserver answers /version", || async {
        client.apiserver_version().await.ok().map(|v| v.git_version)
    })
    .await
}

/// Creates the simulated node and waits until kwok reports it Ready and the node lifecycle
/// controller removed its `not-ready` taint.
pub(super) async fn node(client: &Client, name: &str) -> Result<(), ControlPlaneError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "type": "kwok"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
        }
    }))
    .map_err(|_| ControlPlaneError::Setup {
        reason: "the node object".to_owned(),
    })?;
    until("the simulated node is created", || async {
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Some(()),
            Err(_) => None,
        }
    })
    .await?;
    until(
        "the simulated node is Ready and untainted (kwok, node lifecycle controller)",
        || async {
            let node = nodes.get(name).await.ok()?;
            let ready = node
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let tainted = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key.starts_with("node.kubernetes.io/")));
            (ready && !tainted).then_some(())
        },
    )
    .await
}

/// The canary: a one-replica Deployment in a namespace of its own becomes Available, then the
/// namespace is deleted and goes away.
pub(super) async fn canary(client: &Client) -> Result<(), ControlPlaneError> {
    const NS: &str = "rollsafe-canary";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let setup = || ControlPlaneError::Setup {
        reason: "the canary objects".to_owned(),
    };
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}})).map_err(|_| setup())?;
    until("the canary namespace is created", || async {
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Some(()),
            Err(_) => None,
        }
    })
    .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let canary: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "canary"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "canary"}},
            "template": {"metadata": {"labels": {"app": "canary"}},
                         "spec": {"containers": [{"name": "app", "image": "registry.invalid/pause:1"}]}}
        }
    }))
    .map_err(|_| setup())?;
    // The namespace's default ServiceAccount comes from the controller manager; the
    // ServiceAccount admission plugin refuses pods until it exists, and the ReplicaSet
    // controller retries with back-off — creating the Deployment once is enough.
    until("the canary Deployment is created", || async {
        match deployments.create(&PostParams::default(), &canary).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Some(()),
            Err(_) => None,
        }
    })
    .await?;
    until(
        "the canary Deployment is Available (scheduler, workload controllers, kwok)",
        || async {
            let d = deployments.get("canary").await.ok()?;
            (d.status?.available_replicas? == 1).then_some(())
        },
    )
    .await?;
    let _ = namespaces.delete(NS, &DeleteParams::default()).await;
    until(
        "the canary namespace is gone (namespace controller, garbage collector, kwok)",
        || async {
            match namespaces.get_opt(NS).await {
                Ok(None) => Some(()),
                _ => None,
            }
        },
    )
    .await
}
