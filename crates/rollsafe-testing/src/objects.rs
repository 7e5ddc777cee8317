//! Builders for the objects the suites seed and change: the workloads ([`Workload`]) and the
//! Secrets and ConfigMaps they read ([`Source`]), so that every suite builds them with one
//! vocabulary.

use k8s_openapi::ByteString;
use serde_json::{Map, Value, json};

/// How a workload's container consumes a Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Volume,
    EnvFrom,
}

/// A Deployment, StatefulSet or DaemonSet in `apps/v1`, one container `app`.
#[derive(Debug, Clone)]
#[must_use]
pub struct Workload {
    kind: &'static str,
    name: String,
    namespace: String,
    secret: Option<(String, Via)>,
    replicas: bool,
    annotations: Map<String, Value>,
    labels: Map<String, Value>,
    env: Vec<Value>,
    env_from: Vec<Value>,
    progress_deadline: Option<u32>,
}

impl Workload {
    fn new(kind: &'static str, name: &str) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            namespace: "default".to_owned(),
            secret: None,
            replicas: false,
            annotations: Map::new(),
            labels: Map::new(),
            env: Vec::new(),
            env_from: Vec::new(),
            progress_deadline: None,
        }
    }

    /// A Deployment.
    pub fn deployment(name: &str) -> Self {
        Self::new("Deployment", name)
    }

    /// A StatefulSet (its `serviceName` is its name).
    pub fn stateful_set(name: &str) -> Self {
        Self::new("StatefulSet", name)
    }

    /// A DaemonSet.
    pub fn daemon_set(name: &str) -> Self {
        Self::new("DaemonSet", name)
    }

    /// A workload of `kind` (`Deployment`, `StatefulSet` or `DaemonSet`).
    pub fn of_kind(kind: &str, name: &str) -> Self {
        match kind {
            "StatefulSet" => Self::stateful_set(name),
            "DaemonSet" => Self::daemon_set(name),
            _ => Self::deployment(name),
        }
    }

    /// In `namespace` (default `default`).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }

    /// Mounts Secret `secret` as a volume.
    pub fn consuming_secret_via_volume(mut self, secret: &str) -> Self {
        self.secret = Some((secret.to_owned(), Via::Volume));
        self
    }

    /// Reads Secret `secret` with `envFrom`.
    pub fn consuming_secret_via_env_from(mut self, secret: &str) -> Self {
        self.secret = Some((secret.to_owned(), Via::EnvFrom));
        self
    }

    /// With `replicas: 1` (not for a DaemonSet, which has none).
    pub fn with_replicas(mut self) -> Self {
        self.replicas = true;
        self
    }

    /// With `progressDeadlineSeconds` = `seconds` (a Deployment's).
    pub fn progress_deadline_seconds(mut self, seconds: u32) -> Self {
        self.progress_deadline = Some(seconds);
        self
    }

    /// With annotation `key` = `value` on the workload's own metadata.
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), json!(value));
        self
    }

    /// With these annotations, a JSON object (merged into those given before).
    pub fn annotations(mut self, annotations: Value) -> Self {
        if let Value::Object(map) = annotations {
            self.annotations.extend(map);
        }
        self
    }

    /// Opted in (or out) with `rollsafe.dev/watch` = `value`.
    pub fn watch(self, value: &str) -> Self {
        self.annotate("rollsafe.dev/watch", value)
    }

    /// With label `key` = `value` on the workload's own metadata.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), json!(value));
        self
    }

    /// The container's `env` entries, `env` a JSON array (appended to those given before).
    pub fn env(mut self, env: Value) -> Self {
        self.env.extend(array(env));
        self
    }

    /// The container reads `key` of Secret `secret` into variable `variable`.
    pub fn env_secret_key(self, variable: &str, secret: &str, key: &str) -> Self {
        self.env(json!([secret_key_ref(variable, secret, key)]))
    }

    /// The container's `envFrom` entries, `env_from` a JSON array (appended to those given
    /// before, after [`Self::consuming_secret_via_env_from`]'s).
    pub fn env_from(mut self, env_from: Value) -> Self {
        self.env_from.extend(array(env_from));
        self
    }

    /// The container reads all of Secret `secret` with `envFrom` (beside other sources).
    pub fn env_from_secret(self, secret: &str) -> Self {
        self.env_from(json!([{"secretRef": {"name": secret}}]))
    }

    /// The container reads all of ConfigMap `config_map` with `envFrom`.
    pub fn env_from_config_map(self, config_map: &str) -> Self {
        self.env_from(json!([{"configMapRef": {"name": config_map}}]))
    }

    /// The object.
    pub fn build(self) -> Value {
        let mut spec = json!({"containers": [{"name": "app", "image": "registry.example/app:1"}]});
        let mut env_from = Vec::new();
        match &self.secret {
            Some((secret, Via::Volume)) => {
                spec["volumes"] = json!([{"name": "creds", "secret": {"secretName": secret}}]);
            }
            Some((secret, Via::EnvFrom)) => {
                env_from.push(json!({"secretRef": {"name": secret}}));
            }
            None => {}
        }
        env_from.extend(self.env_from);
        if !env_from.is_empty() {
            spec["containers"][0]["envFrom"] = Value::Array(env_from);
        }
        if !self.env.is_empty() {
            spec["containers"][0]["env"] = Value::Array(self.env);
        }
        let name = &self.name;
        let mut object = json!({
            "apiVersion": "apps/v1", "kind": self.kind,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec}
            }
        });
        if !self.annotations.is_empty() {
            object["metadata"]["annotations"] = Value::Object(self.annotations);
        }
        if !self.labels.is_empty() {
            object["metadata"]["labels"] = Value::Object(self.labels);
        }
        if self.kind == "StatefulSet" {
            object["spec"]["serviceName"] = json!(name);
        }
        if let Some(seconds) = self.progress_deadline {
            object["spec"]["progressDeadlineSeconds"] = json!(seconds);
        }
        if self.replicas && self.kind != "DaemonSet" {
            object["spec"]["replicas"] = json!(1);
        }
        object
    }
}

impl From<Workload> for Value {
    fn from(workload: Workload) -> Self {
        workload.build()
    }
}

/// An `env` entry: variable `variable` from `key` of Secret `secret`.
pub fn secret_key_ref(variable: &str, secret: &str, key: &str) -> Value {
    json!({"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
}

/// The elements of a JSON array (`[]` for anything else).
fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}

/// What a [`Source`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKind {
    Secret,
    ConfigMap,
}

/// A Secret (its `data` base64-encoded, as the API serves it) or a ConfigMap (plain `data`) a workload reads.
#[derive(Debug, Clone)]
#[must_use]
pub struct Source {
    kind: SourceKind,
    name: String,
    namespace: String,
    data: Vec<(String, String)>,
    annotations: Map<String, Value>,
    labels: Map<String, Value>,
}

impl Source {
    fn new(kind: SourceKind, namespace: &str, name: &str) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            data: Vec::new(),
            annotations: Map::new(),
            labels: Map::new(),
        }
    }

    /// A Secret `name` in `namespace`.
    pub fn secret(namespace: &str, name: &str) -> Self {
        Self::new(SourceKind::Secret, namespace, name)
    }

    /// A ConfigMap `name` in `namespace`.
    pub fn config_map(namespace: &str, name: &str) -> Self {
        Self::new(SourceKind::ConfigMap, namespace, name)
    }

    /// In `namespace` instead.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }

    /// With these keys and values (appended to those given before).
    pub fn data(mut self, data: &[(&str, &str)]) -> Self {
        self.data
            .extend(data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self
    }

    /// With annotation `key` = `value`.
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), json!(value));
        self
    }

    /// With these annotations, a JSON object (merged into those given before).
    pub fn annotations(mut self, annotations: Value) -> Self {
        if let Value::Object(map) = annotations {
            self.annotations.extend(map);
        }
        self
    }

    /// With label `key` = `value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), json!(value));
        self
    }

    /// The object. A Secret's `metadata.annotations` is always present (`{}` when none).
    pub fn build(self) -> Value {
        let (kind, data): (&str, Map<String, Value>) = match self.kind {
            SourceKind::Secret => (
                "Secret",
                self.data
                    .into_iter()
                    .map(|(k, v)| (k, json!(ByteString(v.into_bytes()))))
                    .collect(),
            ),
            SourceKind::ConfigMap => (
                "ConfigMap",
                self.data.into_iter().map(|(k, v)| (k, json!(v))).collect(),
            ),
        };
        let mut object = json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "data": data
        });
        if self.kind == SourceKind::Secret || !self.annotations.is_empty() {
            object["metadata"]["annotations"] = Value::Object(self.annotations);
        }
        if !self.labels.is_empty() {
            object["metadata"]["labels"] = Value::Object(self.labels);
        }
        object
    }
}

impl From<Source> for Value {
    fn from(source: Source) -> Self {
        source.build()
    }
}
