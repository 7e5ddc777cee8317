//! The seed's "Behavior to Know" through `rollsafe render`, as Helm runs it: every promise as a
//! sequence of renders whose outputs are applied to an in-process emulator, with the previous
//! copy of the workloads taken from
//!
//! - the previous output (`--previous FILE`),
//! - the live objects read back from the emulator (`--previous FILE`: the namespace set by the
//!   server, server fields and defaults present),
//! - the cluster itself (`--previous-from-cluster`),
//!
//! each for manifests with and without `metadata.namespace`, and for `--workload-type
//! deployment`, `statefulset` and none. "Restarts" means the emulator recorded a rollout when
//! the output was applied.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rollsafe_emulator::{Fault, FaultAction, RunningEmulator};
use rollsafe_testing::TestCluster;
use serde_json::{Value, json};

const NS: &str = "shop";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    PreviousOutput,
    LiveObject,
    FromCluster,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Deployment,
    StatefulSet,
    Any,
}

impl Type {
    fn args(self) -> &'static [&'static str] {
        match self {
            Type::Deployment => &["--workload-type", "deployment"],
            Type::StatefulSet => &["--workload-type", "statefulset"],
            Type::Any => &[],
        }
    }

    /// (kind, plural, name) of the workloads the input holds.
    fn workloads(self) -> &'static [(&'static str, &'static str, &'static str)] {
        match self {
            Type::Deployment => &[("Deployment", "deployments", "web")],
            Type::StatefulSet => &[("StatefulSet", "statefulsets", "db")],
            Type::Any => &[
                ("Deployment", "deployments", "web"),
                ("StatefulSet", "statefulsets", "db"),
            ],
        }
    }
}

/// What the chart renders at one step.
#[derive(Debug, Clone)]
struct Component {
    /// Data of the ConfigMap the pods reference (`None`: not rendered).
    cfg: Option<&'static str>,
    cfg_mark: Option<&'static str>,
    unused: Option<&'static str>,
    port: u16,
    service_mark: Option<&'static str>,
    image: &'static str,
}

const BASE: Component = Component {
    cfg: Some("a"),
    cfg_mark: None,
    unused: Some("u"),
    port: 80,
    service_mark: None,
    image: "app:1",
};

fn mark(object: &mut Value, value: Option<&str>) {
    if let Some(value) = value {
        object["metadata"]["annotations"] = json!({"openchoreo.dev/restart-on-change": value});
    }
}

fn workload(kind: &str, name: &str, image: &str) -> Value {
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "main", "image": image,
                    "envFrom": [{"configMapRef": {"name": "cfg"}}]
                }]}
            }
        }
    });
    if kind == "StatefulSet" {
        object["spec"]["serviceName"] = json!(name);
    }
    object
}

impl Component {
    fn objects(&self, ty: Type) -> Vec<Value> {
        let mut out = Vec::new();
        if let Some(data) = self.cfg {
            let mut cfg = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cfg"}, "data": {"k": data}});
            mark(&mut cfg, self.cfg_mark);
            out.push(cfg);
        }
        if let Some(data) = self.unused {
            out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "unused"}, "data": {"k": data}}));
        }
        let mut service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": self.port}]}});
        mark(&mut service, self.service_mark);
        out.push(service);
        for (kind, _, name) in ty.workloads() {
            out.push(workload(kind, name, self.image));
        }
        out
    }

    fn manifest(&self, ty: Type, namespaced: bool) -> String {
        self.objects(ty)
            .into_iter()
            .map(|mut object| {
                if namespaced {
                    object["metadata"]["namespace"] = json!(NS);
                }
                serde_json::to_string_pretty(&object).unwrap()
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

/// One step: what is rendered, whether the setting is on, whether the pods restart.
struct Step {
    component: Component,
    on: bool,
    restarts: bool,
}

fn step(component: Component, on: bool, restarts: bool) -> Step {
    Step {
        component,
        on,
        restarts,
    }
}

/// The promises of the seed's "Behavior to Know", each as a sequence of renders. The first step
/// (default mode) installs the release; its result is not checked.
fn promises() -> Vec<(&'static str, Vec<Step>)> {
    let cfg_changed = Component {
        cfg: Some("b"),
        ..BASE
    };
    vec![
        (
            "turning the setting on does not restart pods; then referenced changes do, others not",
            vec![
                step(BASE, false, false),
                step(BASE, true, false),
                step(Component { port: 81, ..BASE }, true, false),
                step(
                    Component {
                        unused: Some("v"),
                        port: 81,
                        ..BASE
                    },
                    true,
                    false,
                ),
                step(
                    Component {
                        cfg: Some("b"),
                        unused: Some("v"),
                        port: 81,
                        ..BASE
                    },
                    true,
                    true,
                ),
            ],
        ),
        (
            "changing restart-on-change does not restart pods",
            vec![
                step(BASE, false, false),
                step(BASE, true, false),
                step(
                    Component {
                        cfg_mark: Some("false"),
                        ..BASE
                    },
                    true,
                    false,
                ),
                step(
                    Component {
                        cfg_mark: Some("false"),
                        ..cfg_changed.clone()
                    },
                    true,
                    false,
                ),
                step(cfg_changed.clone(), true, false),
                step(
                    Component {
                        service_mark: Some("true"),
                        ..cfg_changed.clone()
                    },
                    true,
                    false,
                ),
                step(
                    Component {
                        service_mark: Some("true"),
                        port: 81,
                        ..cfg_changed.clone()
                    },
                    true,
                    true,
                ),
            ],
        ),
        (
            "turning the setting off restarts nothing when nothing changed",
            vec![
                step(BASE, false, false),
                step(BASE, true, false),
                step(BASE, false, false),
            ],
        ),
        (
            "turning the setting off restarts once after a change",
            vec![
                step(BASE, false, false),
                step(BASE, true, false),
                step(cfg_changed.clone(), true, true),
                step(cfg_changed.clone(), false, true),
                step(cfg_changed.clone(), false, false),
            ],
        ),
        (
            "removing a referenced ConfigMap restarts pods, removing another does not",
            vec![
                step(BASE, false, false),
                step(BASE, true, false),
                step(
                    Component {
                        unused: None,
                        ..BASE
                    },
                    true,
                    false,
                ),
                step(
                    Component {
                        cfg: None,
                        unused: None,
                        ..BASE
                    },
                    true,
                    true,
                ),
            ],
        ),
        (
            "pod template changes always roll the pods",
            vec![
                step(BASE, false, false),
                step(BASE, true, false),
                step(
                    Component {
                        image: "app:2",
                        ..BASE
                    },
                    true,
                    true,
                ),
                step(
                    Component {
                        image: "app:3",
                        ..BASE
                    },
                    false,
                    true,
                ),
            ],
        ),
    ]
}

struct Cluster {
    emu: RunningEmulator,
    /// Context namespace `default`.
    kubeconfig: PathBuf,
    /// Context namespace `shop`.
    kubeconfig_shop: PathBuf,
    dir: tempfile::TempDir,
    // Last: the emulator's runtime outlives the emulator.
    _runtime: tokio::runtime::Runtime,
}

impl Cluster {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let TestCluster {
            emu,
            kubeconfig,
            dir,
            ..
        } = runtime.block_on(TestCluster::start(Vec::new()));
        let kubeconfig_shop = dir.path().join("kubeconfig-shop");
        let text = emu
            .handle()
            .kubeconfig_yaml()
            .replace("namespace: default", &format!("namespace: {NS}"));
        std::fs::write(&kubeconfig_shop, text).unwrap();
        Self {
            emu,
            kubeconfig,
            kubeconfig_shop,
            dir,
            _runtime: runtime,
        }
    }

    fn rollouts(&self, name: &str) -> usize {
        self.emu
            .handle()
            .rollouts()
            .iter()
            .filter(|r| r.name == name && r.namespace == NS)
            .count()
    }

    /// Applies the workloads of a render's output, as `helm upgrade -n shop` would.
    fn apply(&self, output: &str) {
        let manifest = rollsafe_manifest::Manifest::parse(output).unwrap();
        for (_, object) in manifest.objects() {
            // The workloads: the emulator serves apps and core config kinds only.
            if !matches!(object["kind"].as_str(), Some("Deployment" | "StatefulSet")) {
                continue;
            }
            let mut object = object.clone();
            if object["metadata"].get("namespace").is_none() {
                object["metadata"]["namespace"] = json!(NS);
            }
            self.emu.handle().put_object(object).unwrap();
        }
    }

    /// The live workloads, as `kubectl get -o json` gives them.
    fn live(&self, ty: Type) -> String {
        ty.workloads()
            .iter()
            .filter_map(|(_, plural, name)| self.emu.handle().get_object(plural, Some(NS), name))
            .map(|object| serde_json::to_string(&object).unwrap())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

fn rollsafe() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
    command
        .env_remove("REFERENCED_CONFIG_ROLLOUT")
        .env_remove("HELM_NAMESPACE")
        .env_remove("RUST_LOG")
        // No kubeconfig of the machine running the tests is ever read.
        .env("KUBECONFIG", "/nonexistent/rollsafe-test-kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST");
    command
}

fn transcript(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// One release's sequence of renders.
struct Release<'a> {
    cluster: &'a Cluster,
    source: Source,
    ty: Type,
    namespaced: bool,
    last_output: String,
}

impl Release<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.cluster.dir.path().join(name)
    }

    /// Renders, applies, and returns for each workload whether it restarted.
    fn render(&mut self, component: &Component, on: bool) -> Vec<(&'static str, bool)> {
        let input = self.path("input.yaml");
        std::fs::write(&input, component.manifest(self.ty, self.namespaced)).unwrap();
        let mut command = rollsafe();
        command.arg("render").args(self.ty.args());
        if on {
            command.arg("--referenced-config-rollout");
        }
        match self.source {
            Source::PreviousOutput => {
                let previous = self.path("previous.yaml");
                std::fs::write(&previous, &self.last_output).unwrap();
                command.arg("--previous").arg(&previous);
                if !self.namespaced {
                    command.args(["--namespace", NS]);
                }
            }
            Source::LiveObject => {
                let previous = self.path("live.yaml");
                std::fs::write(&previous, self.cluster.live(self.ty)).unwrap();
                command.arg("--previous").arg(&previous);
                if !self.namespaced {
                    command.env("HELM_NAMESPACE", NS);
                }
            }
            Source::FromCluster => {
                // Without namespaces in the manifests, the release namespace is the
                // kubeconfig context's; with them, the objects' own (the context says
                // `default`).
                let kubeconfig = if self.namespaced {
                    &self.cluster.kubeconfig
                } else {
                    &self.cluster.kubeconfig_shop
                };
                command
                    .arg("--previous-from-cluster")
                    .arg("--kubeconfig")
                    .arg(kubeconfig);
            }
        }
        command.arg(&input);
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("has no previous copy"),
            "every workload has a previous copy: {}",
            transcript(&output)
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        let before: Vec<usize> = self
            .ty
            .workloads()
            .iter()
            .map(|(_, _, name)| self.cluster.rollouts(name))
            .collect();
        self.cluster.apply(&stdout);
        self.last_output = stdout;
        self.ty
            .workloads()
            .iter()
            .zip(before)
            .map(|((_, _, name), before)| (*name, self.cluster.rollouts(name) > before))
            .collect()
    }
}

#[test]
fn behavior_to_know_through_every_previous_source() {
    let cluster = Cluster::start();
    let mut checked = 0;
    for source in [
        Source::PreviousOutput,
        Source::LiveObject,
        Source::FromCluster,
    ] {
        for namespaced in [true, false] {
            for ty in [Type::Deployment, Type::StatefulSet, Type::Any] {
                for (promise, steps) in promises() {
                    cluster.emu.handle().reset().unwrap();
                    let mut release = Release {
                        cluster: &cluster,
                        source,
                        ty,
                        namespaced,
                        last_output: String::new(),
                    };
                    for (i, step) in steps.iter().enumerate() {
                        let restarted = release.render(&step.component, step.on);
                        if i == 0 {
                            continue;
                        }
                        for (name, restarted) in restarted {
                            assert_eq!(
                                restarted, step.restarts,
                                "{promise}: step {i}, {source:?}, namespaced {namespaced}, {ty:?}, {name}"
                            );
                            checked += 1;
                        }
                    }
                    // `--previous-from-cluster` only ever read the workloads, one `get` each.
                    let requests = cluster.emu.handle().requests();
                    if source == Source::FromCluster {
                        assert!(!requests.is_empty());
                        for request in &requests {
                            let workload = ty.workloads().iter().any(|(_, plural, name)| {
                                request.path
                                    == format!("/apis/apps/v1/namespaces/{NS}/{plural}/{name}")
                            });
                            assert!(
                                request.method == "GET"
                                    && request.verb.as_deref() == Some("get")
                                    && workload,
                                "{request:?}"
                            );
                        }
                    } else {
                        assert!(requests.is_empty(), "{requests:?}");
                    }
                }
            }
        }
    }
    assert!(checked > 300, "{checked}");
}

// ---- no previous copy ---------------------------------------------------------------------------

fn render_with(args: &[&str], input: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let path = dir.join("input.yaml");
    std::fs::write(&path, input).unwrap();
    let mut command = rollsafe();
    command.arg("render").args(args).arg(&path);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

#[test]
fn a_workload_without_a_previous_copy_is_reported_and_strict_makes_it_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.to_str().unwrap();
    let input = BASE.manifest(Type::Any, false);
    let on = ["--referenced-config-rollout", "--previous", empty];

    let output = render_with(&on, &input, dir.path(), &[("HELM_NAMESPACE", NS)]);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    // Each workload once, for people; with --log-format json, each once, for programs.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut json_on = on.to_vec();
    json_on.push("--log-format=json");
    let json_output = render_with(&json_on, &input, dir.path(), &[("HELM_NAMESPACE", NS)]);
    assert_eq!(json_output.stdout, output.stdout);
    let records: Vec<Value> = String::from_utf8_lossy(&json_output.stderr)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let mut lines = Vec::new();
    let mut expected_records = Vec::new();
    for (kind, name) in [("Deployment", "web"), ("StatefulSet", "db")] {
        lines.push(format!(
            "rollsafe: warning: {kind} {NS}/{name} has no previous copy: rendered as new (the \
             default-mode value); its referenced-config state starts now"
        ));
        expected_records.push(
            json!({"warning": "noPreviousCopy", "kind": kind, "namespace": NS, "name": name}),
        );
    }
    assert_eq!(stderr.lines().collect::<Vec<_>>(), lines);
    assert_eq!(records, expected_records);

    let mut strict = on.to_vec();
    strict.push("--strict-previous");
    let output = render_with(&strict, &input, dir.path(), &[("HELM_NAMESPACE", NS)]);
    assert_eq!(output.status.code(), Some(1), "{}", transcript(&output));
    assert!(output.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "no previous copy of Deployment shop/web, StatefulSet shop/db (--strict-previous)"
        ),
        "{}",
        transcript(&output)
    );

    // Strict without any previous source is a usage error.
    let output = render_with(
        &["--referenced-config-rollout", "--strict-previous"],
        &input,
        dir.path(),
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{}", transcript(&output));

    // Default mode never looks for previous copies, so never reports them.
    let output = render_with(
        &["--previous", empty, "--strict-previous"],
        &input,
        dir.path(),
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    assert!(output.stderr.is_empty(), "{}", transcript(&output));
}

#[test]
fn the_release_namespace_decides_which_live_copy_matches() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start();
    let input = BASE.manifest(Type::Deployment, false);
    let first = render_with(&[], &input, dir.path(), &[]);
    cluster.apply(&String::from_utf8(first.stdout).unwrap());
    let live = dir.path().join("live.yaml");
    std::fs::write(&live, cluster.live(Type::Deployment)).unwrap();
    let live = live.to_str().unwrap();
    let on = ["--referenced-config-rollout", "--previous", live];
    let found = |output: &Output| {
        assert_eq!(output.status.code(), Some(0), "{}", transcript(output));
        !String::from_utf8_lossy(&output.stderr).contains("has no previous copy")
    };
    // --namespace, else HELM_NAMESPACE; the flag wins.
    let mut flag = on.to_vec();
    flag.extend(["--namespace", NS]);
    assert!(found(&render_with(&flag, &input, dir.path(), &[])));
    assert!(found(&render_with(
        &on,
        &input,
        dir.path(),
        &[("HELM_NAMESPACE", NS)]
    )));
    let mut other = on.to_vec();
    other.extend(["-n", "other"]);
    assert!(!found(&render_with(
        &other,
        &input,
        dir.path(),
        &[("HELM_NAMESPACE", NS)]
    )));
    // Else the kubeconfig context's namespace.
    let kubeconfig = cluster.kubeconfig_shop.to_str().unwrap().to_owned();
    assert!(found(&render_with(
        &on,
        &input,
        dir.path(),
        &[("KUBECONFIG", &kubeconfig)]
    )));
    // None at all: said so, and the live copy (in a namespace) does not match.
    let output = render_with(&on, &input, dir.path(), &[]);
    assert!(!found(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("rollsafe: note: no release namespace"),
        "{}",
        transcript(&output)
    );
    // An invalid namespace is a usage error, named without its value.
    let output = render_with(&on, &input, dir.path(), &[("HELM_NAMESPACE", "Not_Valid")]);
    assert_eq!(output.status.code(), Some(2), "{}", transcript(&output));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("Not_Valid"));
}

#[test]
fn cluster_failures_stop_the_render_without_upstream_text() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start();
    let input = BASE.manifest(Type::Deployment, true);
    let kubeconfig = cluster.kubeconfig.to_str().unwrap().to_owned();
    let args = [
        "--referenced-config-rollout",
        "--previous-from-cluster",
        "--kubeconfig",
        kubeconfig.as_str(),
    ];
    // Not there yet: new, with a warning.
    let output = render_with(&args, &input, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("has no previous copy"));

    cluster.emu.handle().add_fault(Fault {
        matcher: Fault::on("get", "deployments").always(),
        action: FaultAction::Status {
            code: 403,
            reason: None,
            message: Some("upstream-secret-text".to_owned()),
            retry_after_seconds: None,
            plain_text: false,
        },
    });
    let output = render_with(&args, &input, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", transcript(&output));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "Deployment shop/web: cannot read the live object: Kubernetes answered HTTP 403"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("upstream-secret-text"), "{stderr}");
    cluster.emu.handle().clear_faults();

    // Every call has a time limit.
    cluster.emu.handle().clear_requests();
    cluster.emu.handle().add_fault(Fault {
        matcher: Fault::on("get", "deployments").always(),
        action: FaultAction::Delay { millis: 2_000 },
    });
    let mut timed = args.to_vec();
    timed.push("--request-timeout=200ms");
    let output = render_with(&timed, &input, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", transcript(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("did not answer in time"),
        "{}",
        transcript(&output)
    );
    // Sent once: no retry. The entry is logged when the server lets the request go.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while cluster
        .emu
        .handle()
        .requests_for("get", "deployments")
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the get was never logged"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        cluster
            .emu
            .handle()
            .requests_for("get", "deployments")
            .len(),
        1
    );
}

// ---- DaemonSets and CronJobs ---------------------------------------------------------------------

/// A Deployment reading `cfg`, a DaemonSet mounting the Secret `creds`, a CronJob reading `cfg`,
/// and the ConfigMap `unused` nobody reads; all in `shop`.
fn every_kind_manifest(creds: &str, unused: &str) -> String {
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": NS}, "data": {"k": "a"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unused", "namespace": NS}, "data": {"k": unused}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": NS}, "data": {"p": creds}}),
        {
            let mut web = workload("Deployment", "web", "app:1");
            web["metadata"]["namespace"] = json!(NS);
            web
        },
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": NS, "labels": {"app": "agent"}},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {
                        "containers": [{"name": "agent", "image": "agent:1"}],
                        "volumes": [{"name": "creds", "secret": {"secretName": "creds"}}]
                    }
                }
            }
        }),
        json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "report", "namespace": NS},
            "spec": {
                "schedule": "@daily",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "job", "image": "job:1", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]
                }}}}
            }
        }),
    ];
    objects
        .iter()
        .map(|object| serde_json::to_string_pretty(object).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[test]
fn a_daemon_set_read_from_the_cluster_rolls_with_its_secret_only() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start();
    let kubeconfig = cluster.kubeconfig.to_str().unwrap().to_owned();
    let apply = |output: &Output| {
        assert_eq!(output.status.code(), Some(0), "{}", transcript(output));
        let stdout = String::from_utf8(output.stdout.clone()).unwrap();
        for (_, object) in rollsafe_manifest::Manifest::parse(&stdout)
            .unwrap()
            .objects()
        {
            if matches!(
                object["kind"].as_str(),
                Some("Deployment" | "DaemonSet" | "CronJob")
            ) {
                cluster.emu.handle().put_object(object.clone()).unwrap();
            }
        }
        stdout
    };
    let rolled = |name: &str, before: usize| cluster.rollouts(name) > before;
    let on = [
        "--referenced-config-rollout",
        "--previous-from-cluster",
        "--kubeconfig",
        kubeconfig.as_str(),
        "--strict-previous",
    ];
    // Installed in default mode: every kind annotated.
    let installed = apply(&render_with(
        &[],
        &every_kind_manifest("c2VjcmV0", "u"),
        dir.path(),
        &[],
    ));
    let live_cron_job = cluster
        .emu
        .handle()
        .get_object("cronjobs", Some(NS), "report")
        .expect("the CronJob is stored");
    assert!(
        live_cron_job
            .pointer("/spec/jobTemplate/spec/template/metadata/annotations")
            .and_then(|a| a.get("openchoreo.dev/dp-resource-hash"))
            .is_some(),
        "{live_cron_job}"
    );
    cluster.emu.handle().clear_requests();
    let (web, agent) = (cluster.rollouts("web"), cluster.rollouts("agent"));
    // The setting turned on, then an unrelated ConfigMap changed: nothing rolls.
    let turned_on = apply(&render_with(
        &on,
        &every_kind_manifest("c2VjcmV0", "u"),
        dir.path(),
        &[],
    ));
    let unrelated = apply(&render_with(
        &on,
        &every_kind_manifest("c2VjcmV0", "v"),
        dir.path(),
        &[],
    ));
    assert!(!rolled("web", web) && !rolled("agent", agent));
    assert_ne!(turned_on, installed, "the state is written");
    // Only the workloads were read, one `get` each per render.
    let requests = cluster.emu.handle().requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    for request in &requests {
        assert!(
            request.method == "GET"
                && [
                    format!("/apis/apps/v1/namespaces/{NS}/deployments/web"),
                    format!("/apis/apps/v1/namespaces/{NS}/daemonsets/agent"),
                    format!("/apis/batch/v1/namespaces/{NS}/cronjobs/report"),
                ]
                .contains(&request.path),
            "{request:?}"
        );
    }
    // The Secret the DaemonSet mounts changes: the DaemonSet rolls, the Deployment does not,
    // and the CronJob's next Job is unchanged.
    let rotated = apply(&render_with(
        &on,
        &every_kind_manifest("bmV3", "v"),
        dir.path(),
        &[],
    ));
    assert!(rolled("agent", agent), "{rotated}");
    assert!(!rolled("web", web), "{rotated}");
    let stamp = |yaml: &str, kind: &str, pointer: &str| {
        rollsafe_manifest::Manifest::parse(yaml)
            .unwrap()
            .objects()
            .find(|(_, o)| o["kind"] == kind)
            .and_then(|(_, o)| o.pointer(pointer).cloned())
    };
    let job = "/spec/jobTemplate/spec/template/metadata/annotations";
    assert_eq!(
        stamp(&rotated, "CronJob", job),
        stamp(&unrelated, "CronJob", job)
    );
}
