//! What the migration reads: the workloads (Deployments, StatefulSets, DaemonSets and
//! CronJobs), keeping only those with Reloader's annotations, and the marks of the Secrets and
//! ConfigMaps beside them — Reloader's `ignore` and `match`, rollsafe's own opt-outs. Never a
//! value: of a Secret or ConfigMap only its annotations are looked at.

use std::collections::{BTreeMap, BTreeSet};

use rollsafe_core::annotations::{RESTART_ON_CHANGE, WATCH};
use rollsafe_core::object::{annotations, metadata_text};
use rollsafe_core::opt_in::reloader::{self, CONFIGMAP_RELOAD, SECRET_RELOAD};
use rollsafe_core::opt_in::source_opted_out;
use rollsafe_core::reference::{self, TargetKind};
use rollsafe_core::workload::WatchedKind;
use rollsafe_manifest::{Manifest, ManifestError};
use serde_json::{Map, Value};

pub use rollsafe_core::opt_in::reloader::MATCH;
/// Written by Reloader on the pod template (its `annotations` strategy): its output, not an
/// instruction.
pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// Whether `key` is one of Reloader's annotations: the domains `rollsafe watch` reads
/// ([`reloader::is_reloader_annotation`]) and their other subdomains, which Reloader uses too
/// (`secrets.exclude.reloader.stakater.com/reload`, `deployment.reloader.stakater.com/pause-period`,
/// `secretproviderclass.reloader.stakater.com/auto`).
pub fn is_reloaders(key: &str) -> bool {
    reloader::is_reloader_annotation(key)
}

/// A kind of workload Reloader restarts, in report order: the kinds `rollsafe watch` rolls.
pub type Kind = WatchedKind;

/// What one Secret's or ConfigMap's annotations say to the migration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// `reloader.stakater.com/ignore: "true"`: neither Reloader nor `rollsafe watch
    /// --reloader-compat` rolls for it.
    pub ignore: bool,
    /// `reloader.stakater.com/match: "true"`: Reloader's `search` rolled for it.
    pub matched: bool,
    /// `rollsafe.dev/watch` or `openchoreo.dev/restart-on-change` is `"false"` on it.
    pub opted_out_by: Option<&'static str>,
}

impl Marks {
    /// The marks of an object's annotations, read with the core's functions the controller's
    /// cache reads them with (`rollsafe_watch::cache::SourceEntry`).
    pub fn of(annotations: Option<&Map<String, Value>>) -> Self {
        let text = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
        Self {
            ignore: reloader::reloader_ignored(annotations),
            matched: reloader::reloader_matched(annotations),
            opted_out_by: [WATCH, RESTART_ON_CHANGE]
                .into_iter()
                .find(|key| source_opted_out(text(key), None)),
        }
    }
}

/// A Secret or ConfigMap: its namespace (empty when a manifest names none), kind and name.
pub type SourceId = (String, TargetKind, String);

/// What was read.
#[derive(Debug, Default)]
pub struct Inventory {
    /// How many workloads were read, with Reloader's annotations or not.
    pub read: usize,
    /// The workloads with Reloader's annotations, as read.
    pub workloads: Vec<(Kind, Value)>,
    /// The Secrets and ConfigMaps read, with their marks (default: none).
    pub sources: BTreeMap<SourceId, Marks>,
}

impl Inventory {
    /// Counts one workload and keeps it when it carries Reloader's annotations.
    pub fn add_workload(&mut self, kind: Kind, object: Value) {
        self.read += 1;
        if has_reloader_annotations(kind, &object) {
            self.workloads.push((kind, object));
        }
    }

    /// Notes a Secret's or ConfigMap's annotations.
    pub fn add_source(
        &mut self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
        annotations: Option<&Map<String, Value>>,
    ) {
        // Every object is kept, marked or not: a regular-expression reload entry consumes
        // whichever of them its pattern matches.
        self.sources.insert(
            (namespace.to_owned(), kind, name.to_owned()),
            Marks::of(annotations),
        );
    }

    /// Adds every object of a manifest stream (multi-document YAML, a YAML list or a `kind:
    /// List`), parsing one document at a time; the first document that is not YAML stops it.
    pub fn add_manifest(&mut self, text: &str) -> Result<(), ManifestError> {
        for document in Manifest::documents(text) {
            for (_, object) in document?.objects() {
                self.add_object(object);
            }
        }
        Ok(())
    }

    /// Adds one manifest object: a workload, a Secret or a ConfigMap (anything else is not
    /// looked at).
    pub fn add_object(&mut self, object: &Value) {
        if let Some(kind) = Kind::of_object(object) {
            self.add_workload(kind, object.clone());
            return;
        }
        let kind = match object.get("kind").and_then(Value::as_str) {
            Some("Secret") => TargetKind::Secret,
            Some("ConfigMap") => TargetKind::ConfigMap,
            _ => return,
        };
        if object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v != "v1")
        {
            return;
        }
        self.add_source(
            metadata_text(object, "namespace"),
            kind,
            metadata_text(object, "name"),
            annotations(object),
        );
    }

    /// The namespaces whose Secrets' and ConfigMaps' marks the kept workloads need: those of
    /// the workloads `rollsafe watch` rolls that reference an object or name one.
    pub fn namespaces_needing_sources(&self) -> BTreeSet<String> {
        self.workloads
            .iter()
            .filter(|(kind, object)| names_sources(*kind, object))
            .filter_map(|(_, object)| object.pointer("/metadata/namespace")?.as_str())
            .map(str::to_owned)
            .collect()
    }
}

/// Whether the workload's metadata, or its pod template, carries one of Reloader's annotations
/// (other than the one Reloader writes on the template).
pub fn has_reloader_annotations(kind: Kind, object: &Value) -> bool {
    let keys = |annotations: Option<&Value>| {
        annotations.and_then(Value::as_object).is_some_and(|map| {
            map.keys()
                .any(|key| is_reloaders(key) && key != LAST_RELOADED_FROM)
        })
    };
    keys(object.pointer("/metadata/annotations"))
        || keys(
            kind.template(object)
                .and_then(|t| t.pointer("/metadata/annotations")),
        )
}

/// Whether the workload's pod template references a Secret or ConfigMap, or its reload
/// annotations name one.
fn names_sources(kind: Kind, object: &Value) -> bool {
    let annotations = object.pointer("/metadata/annotations");
    let lists = [SECRET_RELOAD, CONFIGMAP_RELOAD]
        .into_iter()
        .any(|key| annotations.and_then(|a| a.get(key)).is_some());
    lists
        || kind
            .template(object)
            .is_some_and(|template| !reference::extract(template).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reloaders_annotations_include_its_other_subdomains() {
        for (key, expected) in [
            ("reloader.stakater.com/auto", true),
            ("secret.reloader.stakater.com/reload", true),
            ("secrets.exclude.reloader.stakater.com/reload", true),
            ("deployment.reloader.stakater.com/pause-period", true),
            ("secretproviderclass.reloader.stakater.com/auto", true),
            ("rollsafe.dev/watch", false),
            ("notreloader.stakater.com/auto", false),
            ("example.com/reloader.stakater.com", false),
        ] {
            assert_eq!(is_reloaders(key), expected, "{key}");
        }
    }

    #[test]
    fn kinds_of_manifest_objects() {
        for (object, expected) in [
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
                Some(Kind::Deployment),
            ),
            (
                json!({"apiVersion": "batch/v1", "kind": "CronJob"}),
                Some(Kind::CronJob),
            ),
            (json!({"kind": "CronJob"}), Some(Kind::CronJob)),
            (
                json!({"apiVersion": "example.com/v1", "kind": "CronJob"}),
                None,
            ),
            (json!({"apiVersion": "batch/v1", "kind": "Job"}), None),
        ] {
            assert_eq!(Kind::of_object(&object), expected, "{object}");
        }
    }

    #[test]
    fn only_annotated_workloads_are_kept_and_every_source_with_its_marks() {
        let mut inventory = Inventory::default();
        let deployment = |annotations: Value, template: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "a", "namespace": "shop", "annotations": annotations},
                   "spec": {"template": {"metadata": {"annotations": template},
                   "spec": {"containers": [{"name": "app",
                     "envFrom": [{"secretRef": {"name": "db"}}]}]}}}})
        };
        inventory.add_object(&deployment(
            json!({"reloader.stakater.com/auto": "true"}),
            json!({}),
        ));
        inventory.add_object(&deployment(
            json!({}),
            json!({"reloader.stakater.com/auto": "true"}),
        ));
        // Reloader's own output is not an annotation of the user's.
        inventory.add_object(&deployment(json!({}), json!({LAST_RELOADED_FROM: "{}"})));
        inventory.add_object(&deployment(json!({"team": "a"}), json!({})));
        inventory.add_object(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "shop",
                         "annotations": {"reloader.stakater.com/ignore": "true"}},
            "data": {"password": "aHVudGVyMg=="}}));
        inventory.add_object(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "plain", "namespace": "shop"}}));
        assert_eq!(inventory.read, 4);
        assert_eq!(inventory.workloads.len(), 2);
        assert_eq!(
            inventory.sources,
            BTreeMap::from([
                (
                    ("shop".to_owned(), TargetKind::Secret, "db".to_owned()),
                    Marks {
                        ignore: true,
                        ..Marks::default()
                    }
                ),
                (
                    ("shop".to_owned(), TargetKind::ConfigMap, "plain".to_owned()),
                    Marks::default()
                ),
            ])
        );
        assert_eq!(
            inventory.namespaces_needing_sources(),
            BTreeSet::from(["shop".to_owned()])
        );
    }

    #[test]
    fn marks_read_every_opt_out() {
        let marks = |annotations: Value| Marks::of(annotations.as_object());
        assert_eq!(marks(json!({})), Marks::default());
        assert_eq!(
            marks(json!({MATCH: "true", RESTART_ON_CHANGE: "false"})),
            Marks {
                ignore: false,
                matched: true,
                opted_out_by: Some(RESTART_ON_CHANGE),
            }
        );
    }
}
