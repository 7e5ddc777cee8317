//! Reloader's Helm chart values (stakater/reloader) as rollsafe's chart values, by the table
//! in docs/watch.md ("Reloader's flags and chart values, and what they become"). A setting
//! absent or at Reloader's default moves nothing; each other known setting is either moved
//! ([`Mapped`], its value in the snippet) or not ([`Unmapped`], with why). Any other key is
//! Reloader's own packaging or unknown here, and is listed as not moved.
//!
//! The snippet always enables the controller with `reloaderCompat: true`.

use std::collections::BTreeSet;

use rollsafe_core::name::Namespace;
use rollsafe_core::reference::TargetKind;
use rollsafe_manifest::YamlCause;
use serde::Serialize;
use serde_json::{Map, Value, json};
use thiserror::Error;

/// Why a values file cannot be read as Reloader's values.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ValuesError {
    /// The document, or `reloader`, is not a mapping.
    #[error("{0} is not a mapping")]
    NotAMapping(&'static str),
    /// A setting has the wrong type.
    #[error("{setting} is not {expected}")]
    Type {
        /// The setting's path.
        setting: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A namespace list holds something that is not a namespace name.
    #[error("{setting} holds {value:?}, which is not a namespace name")]
    Namespace {
        /// The setting's path.
        setting: String,
        /// The entry.
        value: String,
    },
    /// The file is not YAML: where the parser stopped and why, never the file's text.
    #[error("not a YAML values file{}: {cause}", at(*line, *column))]
    Yaml {
        /// 1-based line, when the parser knows it.
        line: Option<u64>,
        /// 1-based column, when the parser knows it.
        column: Option<u64>,
        /// Why, in fixed words.
        cause: YamlCause,
    },
}

impl ValuesError {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            ValuesError::NotAMapping(_) => "values_not_a_mapping",
            ValuesError::Type { .. } => "values_type",
            ValuesError::Namespace { .. } => "values_namespace",
            ValuesError::Yaml { .. } => "values_yaml",
        }
    }
}

/// ` at line L, column C`, or nothing.
fn at(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    }
}

/// Reads a values file's text (as `helm get values` prints it) as YAML; an empty file is no
/// values (`null`).
pub fn read(text: &str) -> Result<Value, ValuesError> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_saphyr::from_str::<Value>(text).map_err(|error| ValuesError::Yaml {
        line: error.location().map(|l| l.line()),
        column: error.location().map(|l| l.column()),
        cause: YamlCause::of(&error),
    })
}

/// A setting moved to rollsafe's chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mapped {
    /// Reloader's setting (`reloader.ignoreNamespaces`).
    pub setting: String,
    /// Its value in the file.
    pub value: Value,
    /// rollsafe's value it becomes (`controller.ignoreNamespaces`).
    pub to: &'static str,
    /// What else to know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A setting not moved, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unmapped {
    /// Reloader's setting.
    pub setting: String,
    /// Its value in the file.
    pub value: Value,
    /// Why it is not moved.
    pub reason: String,
}

/// What the chart values leave out of what `rollsafe watch` watches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// `controller.namespaces`; empty: every namespace.
    pub namespaces: BTreeSet<String>,
    /// `controller.ignoreNamespaces`.
    pub ignore_namespaces: BTreeSet<String>,
    /// `controller.ignoreKinds`.
    pub ignore_kinds: BTreeSet<TargetKind>,
}

impl Scope {
    /// Whether a workload in `namespace` is watched (`None`: a manifest that names none, which
    /// lands wherever it is applied).
    pub fn watches_namespace(&self, namespace: Option<&str>) -> bool {
        let Some(namespace) = namespace else {
            return true;
        };
        (self.namespaces.is_empty() || self.namespaces.contains(namespace))
            && !self.ignore_namespaces.contains(namespace)
    }
}

/// The migration of a values file.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    /// rollsafe's chart values: `{controller: {enabled: true, reloaderCompat: true, …}}`.
    pub values: Value,
    /// The settings moved.
    pub mapped: Vec<Mapped>,
    /// The settings not moved.
    pub unmapped: Vec<Unmapped>,
    /// What the moved settings leave out.
    pub scope: Scope,
}

/// Reloader's settings read here (under `reloader`); any other key there is listed as not moved.
const KNOWN: &[&str] = &[
    "watchGlobally",
    "namespaces",
    "namespaceSelector",
    "ignoreNamespaces",
    "resourceLabelSelector",
    "ignoreSecrets",
    "ignoreConfigMaps",
    "autoReloadAll",
    "enableHA",
    "deployment",
    "logLevel",
    "reloadStrategy",
    "reloadOnCreate",
    "syncAfterRestart",
    "reloadOnDelete",
    "isArgoRollouts",
    "isOpenshift",
    "ignoreJobs",
    "ignoreCronJobs",
    "enableCSIIntegration",
    "webhookUrl",
    "custom_annotations",
    "logFormat",
    "enableMetricsByNamespace",
    "enablePProf",
    "pprofAddr",
    "readOnlyRootFileSystem",
];

/// Reloader's pod placement settings (`reloader.deployment.*`), moved as they are.
const PLACEMENT: &[(&str, &str)] = &[
    ("nodeSelector", "controller.nodeSelector"),
    ("tolerations", "controller.tolerations"),
    ("affinity", "controller.affinity"),
    (
        "topologySpreadConstraints",
        "controller.topologySpreadConstraints",
    ),
    ("priorityClassName", "controller.priorityClassName"),
];

/// The settings under `reloader.deployment` read here.
const KNOWN_DEPLOYMENT: &[&str] = &[
    "replicas",
    "nodeSelector",
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "priorityClassName",
    "pod",
    "resources",
    "env",
];

/// Why Reloader's packaging settings (its image, RBAC, ServiceAccount, Service, monitors …)
/// are not moved.
const PACKAGING: &str = "Reloader's own packaging (image, RBAC, ServiceAccount, Service, \
    monitors, probes …): rollsafe's chart has its own settings for its controller \
    (docs/install.md)";

/// Why a setting this migration does not know is not moved.
const UNKNOWN: &str = "not a Reloader setting this migration knows: check it by hand";

/// Why a behaviour setting is not needed: rollsafe always behaves so.
const ALWAYS: &str = "always so in rollsafe: a change made while it was down rolls once after \
    it starts, and its restart rolls nothing; nothing to set";

/// The migration of Reloader's values (`None`: no file, Reloader's chart defaults).
pub fn migrate(values: Option<&Value>) -> Result<Migration, ValuesError> {
    let empty = Map::new();
    let root = match values {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(ValuesError::NotAMapping("the values document")),
    };
    let root = Section {
        path: String::new(),
        map: root,
    };
    let reloader = root.mapping("reloader")?.unwrap_or(Section {
        path: "reloader".to_owned(),
        map: &empty,
    });
    let mut out = Builder::default();
    out.namespaces(&root, &reloader)?;
    out.sources(&reloader)?;
    out.replicas(&reloader)?;
    out.log_level(&reloader)?;
    out.behaviour(&reloader)?;
    out.deployment(&reloader)?;
    out.the_rest(&root, &reloader);
    Ok(out.finish())
}

/// A mapping of the values file and its path (`reloader.deployment`), for settings' names.
struct Section<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Section<'a> {
    /// The path of `key` in the file.
    fn setting(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// `key`'s value, unless absent or null.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// `key`'s value, unless it says nothing ([`is_empty`]).
    fn given(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !is_empty(v))
    }

    fn wrong(&self, key: &str, expected: &'static str) -> ValuesError {
        ValuesError::Type {
            setting: self.setting(key),
            expected,
        }
    }

    fn boolean(&self, key: &str, default: bool) -> Result<bool, ValuesError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.wrong(key, "true or false")),
        }
    }

    fn string(&self, key: &str, default: &'a str) -> Result<&'a str, ValuesError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::String(s)) => Ok(s.trim()),
            Some(_) => Err(self.wrong(key, "a string")),
        }
    }

    /// The mapping under `key`.
    fn mapping(&self, key: &str) -> Result<Option<Section<'a>>, ValuesError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Section {
                path: self.setting(key),
                map,
            })),
            Some(_) => Err(self.wrong(key, "a mapping")),
        }
    }

    /// A namespace list: a YAML list, or a comma-separated string (Reloader's chart takes
    /// both), deduplicated in order.
    fn namespaces(&self, key: &str) -> Result<Vec<String>, ValuesError> {
        let entries: Vec<&str> = match self.get(key) {
            None => Vec::new(),
            Some(Value::String(s)) => s.split(',').collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .ok_or_else(|| self.wrong(key, "a list of namespace names"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(self.wrong(key, "a list or a comma-separated string")),
        };
        let mut out: Vec<String> = Vec::new();
        for entry in entries.into_iter().map(str::trim).filter(|e| !e.is_empty()) {
            let name = namespace_name(&self.setting(key), entry)?;
            if !out.contains(&name) {
                out.push(name);
            }
        }
        Ok(out)
    }
}

/// The migration as it is built.
#[derive(Debug, Default)]
struct Builder {
    controller: Map<String, Value>,
    mapped: Vec<Mapped>,
    unmapped: Vec<Unmapped>,
    scope: Scope,
}

impl Builder {
    /// Moves `setting` (its `value` in the file) to `to` as `moved`.
    fn map(
        &mut self,
        setting: &str,
        value: &Value,
        to: &'static str,
        moved: Value,
        note: Option<String>,
    ) {
        let key = to.trim_start_matches("controller.");
        self.controller.insert(key.to_owned(), moved);
        self.mapped.push(Mapped {
            setting: setting.to_owned(),
            value: value.clone(),
            to,
            note,
        });
    }

    /// Lists `setting` as not moved, and why.
    fn skip(&mut self, setting: &str, value: &Value, reason: impl Into<String>) {
        self.unmapped.push(Unmapped {
            setting: setting.to_owned(),
            value: value.clone(),
            reason: reason.into(),
        });
    }

    /// `watchGlobally`, `namespaces`, `namespaceSelector`, `ignoreNamespaces`.
    fn namespaces(
        &mut self,
        root: &Section<'_>,
        reloader: &Section<'_>,
    ) -> Result<(), ValuesError> {
        let globally = reloader.boolean("watchGlobally", true)?;
        // Reloader's chart runs in `namespace` when set, else the release's, which a values
        // file does not name.
        let release = match root.string("namespace", "")? {
            "" => None,
            name => Some(namespace_name("namespace", name)?),
        };
        let listed = reloader.namespaces("namespaces")?;
        if let Some(value) = reloader.get("namespaces").filter(|_| !listed.is_empty()) {
            let mut namespaces: BTreeSet<String> = listed.into_iter().collect();
            let note = match &release {
                Some(release) => {
                    namespaces.insert(release.clone());
                    Some(format!("with {release}, where Reloader ran (namespace)"))
                }
                None => Some(
                    "Reloader's chart also watched the namespace it was installed in: add it if \
                     workloads there need rolling"
                        .to_owned(),
                ),
            };
            self.map(
                "reloader.namespaces",
                value,
                "controller.namespaces",
                json!(namespaces),
                note,
            );
            self.scope.namespaces = namespaces;
        } else if !globally {
            match release {
                Some(release) => {
                    self.map(
                        "reloader.watchGlobally",
                        &Value::Bool(false),
                        "controller.namespaces",
                        json!([release]),
                        Some("the namespace Reloader ran in (namespace)".to_owned()),
                    );
                    self.scope.namespaces = BTreeSet::from([release]);
                }
                None => self.skip(
                    "reloader.watchGlobally",
                    &Value::Bool(false),
                    "Reloader then watched only the namespace it was installed in, which the \
                     values file does not name: set controller.namespaces to it",
                ),
            }
        }
        let selector = reloader.string("namespaceSelector", "")?;
        if !selector.is_empty() {
            if globally {
                self.map(
                    "reloader.namespaceSelector",
                    &json!(selector),
                    "controller.namespaceSelector",
                    json!(selector),
                    Some(
                        "followed as namespaces gain and lose the labels; the chart grants list \
                         and watch on namespaces"
                            .to_owned(),
                    ),
                );
            } else {
                self.skip(
                    "reloader.namespaceSelector",
                    &json!(selector),
                    "Reloader's chart uses it only with watchGlobally: true; nothing to move",
                );
            }
        }
        let ignored = reloader.namespaces("ignoreNamespaces")?;
        if let Some(value) = reloader
            .get("ignoreNamespaces")
            .filter(|_| !ignored.is_empty())
        {
            if globally {
                self.map(
                    "reloader.ignoreNamespaces",
                    value,
                    "controller.ignoreNamespaces",
                    json!(ignored),
                    None,
                );
                self.scope.ignore_namespaces = ignored.into_iter().collect();
            } else {
                self.skip(
                    "reloader.ignoreNamespaces",
                    value,
                    "Reloader's chart uses it only with watchGlobally: true; nothing to move",
                );
            }
        }
        Ok(())
    }

    /// `resourceLabelSelector`, `ignoreSecrets`, `ignoreConfigMaps`, `isArgoRollouts`,
    /// `autoReloadAll`.
    fn sources(&mut self, reloader: &Section<'_>) -> Result<(), ValuesError> {
        let selector = reloader.string("resourceLabelSelector", "")?;
        if !selector.is_empty() {
            // Reloader reads `key=*` as "has the label key".
            let moved = selector
                .split(',')
                .map(str::trim)
                .map(|term| term.strip_suffix("=*").unwrap_or(term))
                .collect::<Vec<_>>()
                .join(",");
            let note = (moved != selector).then(|| {
                "Reloader's key=* (any value) is written as the selector key (has the label)"
                    .to_owned()
            });
            self.map(
                "reloader.resourceLabelSelector",
                &json!(selector),
                "controller.sourceSelector",
                json!(moved),
                note,
            );
        }
        let mut kinds = Vec::new();
        let mut settings = Vec::new();
        for (key, kind) in [
            ("ignoreSecrets", TargetKind::Secret),
            ("ignoreConfigMaps", TargetKind::ConfigMap),
        ] {
            if reloader.boolean(key, false)? {
                kinds.push(kind);
                settings.push(reloader.setting(key));
            }
        }
        if !kinds.is_empty() {
            let note = (kinds.len() == 2)
                .then(|| "both kinds: rollsafe watch then watches no source at all".to_owned());
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            self.map(
                &settings.join(", "),
                &Value::Bool(true),
                "controller.ignoreKinds",
                json!(names),
                note,
            );
            self.scope.ignore_kinds = kinds.into_iter().collect();
        }
        if reloader.boolean("isArgoRollouts", false)? {
            self.map(
                "reloader.isArgoRollouts",
                &Value::Bool(true),
                "controller.argoRollouts",
                Value::Bool(true),
                Some(
                    "Rollouts are rolled through their pod template (Reloader's default rollout \
                     strategy); the chart grants list, watch and patch on rollouts.argoproj.io"
                        .to_owned(),
                ),
            );
        }
        if reloader.boolean("autoReloadAll", false)? {
            self.map(
                "reloader.autoReloadAll",
                &Value::Bool(true),
                "controller.all",
                Value::Bool(true),
                Some(
                    "a workload's own reloader.stakater.com/auto: \"false\" or rollsafe.dev/watch: \
                     \"false\" still opts it out"
                        .to_owned(),
                ),
            );
        }
        Ok(())
    }

    /// `enableHA` and `deployment.replicas`: rollsafe's controller always elects a leader.
    fn replicas(&mut self, reloader: &Section<'_>) -> Result<(), ValuesError> {
        let ha = reloader.boolean("enableHA", false)?;
        let deployment = reloader.mapping("deployment")?;
        let replicas = match deployment.as_ref().and_then(|d| d.get("replicas")) {
            None => 1,
            Some(value) => value.as_u64().ok_or_else(|| ValuesError::Type {
                setting: "reloader.deployment.replicas".to_owned(),
                expected: "a whole number",
            })?,
        };
        if ha || replicas > 1 {
            let setting = if ha {
                "reloader.enableHA, reloader.deployment.replicas"
            } else {
                "reloader.deployment.replicas"
            };
            self.map(
                setting,
                &json!({"enableHA": ha, "replicas": replicas}),
                "controller.replicas",
                json!(replicas),
                Some(
                    "rollsafe's controller always runs with --leader-elect: one replica holds \
                     the Lease and patches, the others stand by"
                        .to_owned(),
                ),
            );
        }
        Ok(())
    }

    /// `logLevel`, as a `RUST_LOG` level.
    fn log_level(&mut self, reloader: &Section<'_>) -> Result<(), ValuesError> {
        let level = reloader.string("logLevel", "info")?;
        if level.is_empty() || level == "info" {
            return Ok(());
        }
        let moved = match level {
            "trace" => "trace",
            "debug" => "debug",
            "warning" | "warn" => "warn",
            "error" | "fatal" | "panic" => "error",
            _ => {
                self.skip(
                    "reloader.logLevel",
                    &json!(level),
                    "not a level rollsafe knows (trace, debug, info, warn, error)",
                );
                return Ok(());
            }
        };
        self.map(
            "reloader.logLevel",
            &json!(level),
            "controller.logLevel",
            json!(moved),
            None,
        );
        Ok(())
    }

    /// The behaviour settings without a rollsafe value, each with why.
    fn behaviour(&mut self, reloader: &Section<'_>) -> Result<(), ValuesError> {
        for (key, default, reason) in TEXT_SETTINGS {
            let value = reloader.string(key, default)?;
            if !value.is_empty() && value != *default {
                self.skip(&reloader.setting(key), &json!(value), *reason);
            }
        }
        for (key, reason) in FLAG_SETTINGS {
            if reloader.boolean(key, false)? {
                self.skip(&reloader.setting(key), &Value::Bool(true), *reason);
            }
        }
        if let Some(custom) = reloader.given("custom_annotations") {
            self.skip(
                "reloader.custom_annotations",
                custom,
                "rollsafe watch --reloader-compat reads Reloader's default annotation names \
                 only: workloads annotated with custom names need rollsafe.dev/watch",
            );
        }
        Ok(())
    }

    /// `deployment.*`: placement and the pod's annotations moved as they are; resources and
    /// env not.
    fn deployment(&mut self, reloader: &Section<'_>) -> Result<(), ValuesError> {
        let Some(deployment) = reloader.mapping("deployment")? else {
            return Ok(());
        };
        for (key, to) in PLACEMENT {
            if let Some(value) = deployment.given(key) {
                self.map(&deployment.setting(key), value, to, value.clone(), None);
            }
        }
        if let Some(value) = deployment
            .mapping("pod")?
            .and_then(|pod| pod.given("annotations"))
        {
            self.map(
                "reloader.deployment.pod.annotations",
                value,
                "controller.podAnnotations",
                value.clone(),
                None,
            );
        }
        if let Some(value) = deployment.given("resources") {
            self.skip(
                "reloader.deployment.resources",
                value,
                "rollsafe's controller.resources are sized from its memory benchmark (it keeps \
                 digests, not objects): Reloader's sizing does not carry over",
            );
        }
        if let Some(value) = deployment.given("env") {
            self.skip(
                "reloader.deployment.env",
                value,
                "Reloader's extra environment (its ALERT_* alerts and others) means nothing to \
                 rollsafe; controller.extraEnv sets variables of rollsafe's own container",
            );
        }
        Ok(())
    }

    /// Every other key with a value: Reloader's packaging, or unknown here.
    fn the_rest(&mut self, root: &Section<'_>, reloader: &Section<'_>) {
        for (key, value) in root.map {
            if key != "reloader" && key != "namespace" && !is_empty(value) {
                self.skip(key, value, PACKAGING);
            }
        }
        for (key, value) in reloader.map {
            if KNOWN.contains(&key.as_str()) || is_empty(value) {
                continue;
            }
            let reason = if PACKAGING_KEYS.contains(&key.as_str()) {
                PACKAGING
            } else {
                UNKNOWN
            };
            self.skip(&reloader.setting(key), value, reason);
        }
        let deployment = reloader.map.get("deployment").and_then(Value::as_object);
        for (key, value) in deployment.into_iter().flatten() {
            if !KNOWN_DEPLOYMENT.contains(&key.as_str()) && !is_empty(value) {
                self.skip(&format!("reloader.deployment.{key}"), value, PACKAGING);
            }
        }
    }

    fn finish(self) -> Migration {
        let mut controller = Map::new();
        controller.insert("enabled".to_owned(), Value::Bool(true));
        controller.insert("reloaderCompat".to_owned(), Value::Bool(true));
        controller.extend(self.controller);
        Migration {
            values: json!({ "controller": controller }),
            mapped: self.mapped,
            unmapped: self.unmapped,
            scope: self.scope,
        }
    }
}

/// Reloader's string settings without a rollsafe value: key, Reloader's default, why.
const TEXT_SETTINGS: &[(&str, &str, &str)] = &[
    (
        "reloadStrategy",
        "default",
        "rollsafe always rolls by one pod-template annotation (rollsafe.dev/config-hash), never \
         env vars; nothing to set",
    ),
    (
        "webhookUrl",
        "",
        "rollsafe rolls the workloads; it does not call a webhook instead (its Events and \
         metrics report each roll)",
    ),
    (
        "logFormat",
        "",
        "rollsafe watch logs JSON lines by default (--log-format, ROLLSAFE_LOG_FORMAT)",
    ),
    (
        "pprofAddr",
        ":6060",
        "rollsafe's controller has no profiling endpoint",
    ),
];

/// Reloader's switches (default off) without a rollsafe value: key, why.
const FLAG_SETTINGS: &[(&str, &str)] = &[
    ("reloadOnCreate", ALWAYS),
    ("syncAfterRestart", ALWAYS),
    (
        "reloadOnDelete",
        "rollsafe never rolls for a deletion (new pods could not start without the object); its \
         recreation rolls once",
    ),
    (
        "isOpenshift",
        "DeploymentConfigs are not rolled by rollsafe watch",
    ),
    (
        "ignoreJobs",
        "rollsafe watch never rolls Jobs (a Job's pod template cannot change): nothing to ignore",
    ),
    (
        "ignoreCronJobs",
        "rollsafe watch rolls a CronJob only when it opts in: remove its Reloader annotations \
         (or set rollsafe.dev/watch: \"false\") to keep it as Reloader left it",
    ),
    (
        "enableCSIIntegration",
        "SecretProviderClasses (CSI) are not watched by rollsafe",
    ),
    (
        "enableMetricsByNamespace",
        "rollsafe's metrics carry static labels only, never a namespace",
    ),
    (
        "enablePProf",
        "rollsafe's controller has no profiling endpoint",
    ),
    (
        "readOnlyRootFileSystem",
        "rollsafe's controller always runs with a read-only root filesystem \
         (controller.securityContext)",
    ),
];

/// Reloader's packaging keys under `reloader`.
const PACKAGING_KEYS: &[&str] = &[
    "labels",
    "image",
    "legacy",
    "matchLabels",
    "service",
    "rbac",
    "serviceAccount",
    "serviceMonitor",
    "podMonitor",
    "podDisruptionBudget",
    "netpol",
    "verticalPodAutoscaler",
    "volumeMounts",
    "volumes",
];

/// Whether a value says nothing: null, `""`, `false`, `[]`, `{}`.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

fn namespace_name(setting: &str, value: &str) -> Result<String, ValuesError> {
    value
        .parse::<Namespace>()
        .map(Namespace::into_string)
        .map_err(|_| ValuesError::Namespace {
            setting: setting.to_owned(),
            value: value.chars().filter(|c| !c.is_control()).take(64).collect(),
        })
}

#[cfg(test)]
mod tests;
