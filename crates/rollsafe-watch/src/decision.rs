//! The decision for one workload, and the JSON Patch that carries it out.
//!
//! Pure: the inputs are the few facts kept per workload ([`Facts`]) and the digest of what it
//! consumes now; the output is a [`RollDecision`]. [`Plan::document`] builds the patch from the
//! core's restart patch builder (the `test` of uid and resourceVersion, then the pod-template
//! annotation) and appends the metadata record.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use rollsafe_core::name::AnnotationKey;
use rollsafe_core::patch::{InspectError, RestartPatch};
use rollsafe_core::workload::{Deferral, WatchedKind};
use serde_json::{Map, Value};

use crate::digest::parse_record;
use rollsafe_core::annotations::{
    APPROVED, CHANGE_CAUSE, CONFIG_HASH, CONFIG_RECORD, CONFIG_VERSIONS, EVICTING, HALTED, PENDING,
    ROLLED_AT,
};

/// What the decision needs to know of a workload besides its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Whether it is opted in (a malformed opt-in is `false`).
    pub watched: bool,
    /// `rollsafe.dev/config-record` on its metadata.
    pub record: Option<String>,
    /// `rollsafe.dev/halted` is present.
    pub halted: bool,
    /// Why it would not roll now, if so.
    pub deferral: Option<Deferral>,
}

/// What to do with one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollDecision {
    /// Not opted in: nothing.
    NotWatched,
    /// Halted by the flap stop: nothing until the annotation is removed.
    Halted,
    /// The record matches what it consumes: nothing.
    Unchanged,
    /// First sight (no record), or only the set of recorded objects changed: write the record,
    /// do not roll.
    Adopt {
        /// The digest to record.
        digest: String,
    },
    /// What it consumes changed: set the pod-template annotation and the record. With a
    /// deferral, the patch is sent but the pods do not roll now.
    Roll {
        /// The new digest.
        digest: String,
        /// Why the pods will not roll now, if so.
        deferred: Option<Deferral>,
    },
}

impl RollDecision {
    /// A static label for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            RollDecision::NotWatched => "not_watched",
            RollDecision::Halted => "halted",
            RollDecision::Unchanged => "unchanged",
            RollDecision::Adopt { .. } => "adopt",
            RollDecision::Roll { deferred: None, .. } => "roll",
            RollDecision::Roll {
                deferred: Some(_), ..
            } => "deferred",
        }
    }
}

/// Decides for one workload given the record of what it consumes now
/// ([`crate::Fingerprinter::record`]).
///
/// A record that differs rolls only when an object recorded on both sides changed (its content,
/// uid, or existence). An object joining the record (its opt-out removed, a new reference) or
/// leaving it (opted out, no longer referenced) changes the record, not the pods: the new
/// record is written without a roll. A record without per-object entries (written before they
/// existed) is compared by its digest alone.
pub fn decide(facts: &Facts, digest: &str) -> RollDecision {
    if !facts.watched {
        return RollDecision::NotWatched;
    }
    if facts.halted {
        return RollDecision::Halted;
    }
    match facts.record.as_deref() {
        None => RollDecision::Adopt {
            digest: digest.to_owned(),
        },
        Some(record) if record == digest => RollDecision::Unchanged,
        Some(record) => {
            let (was, recorded) = parse_record(record);
            let (now, current) = parse_record(digest);
            let changed = match (recorded, current) {
                (Some(recorded), Some(current)) => current
                    .iter()
                    .any(|(id, state)| recorded.get(id).is_some_and(|was| was != state)),
                // A record from before per-object entries: its digest decides; an equal one
                // is kept as it is (an upgrade writes nothing).
                _ if was == now => return RollDecision::Unchanged,
                _ => true,
            };
            if changed {
                RollDecision::Roll {
                    digest: digest.to_owned(),
                    deferred: facts.deferral,
                }
            } else {
                RollDecision::Adopt {
                    digest: digest.to_owned(),
                }
            }
        }
    }
}

/// What a workload needs for its patch: the core's inspected restart patch (preconditions and
/// template shape) and the shape of its own metadata annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    restart: RestartPatch,
    metadata_annotations: bool,
    /// It carries a `rollsafe.dev/pending` mark, which every other write removes.
    pending: bool,
    /// It carries a `rollsafe.dev/approved`, which a roll or an adoption removes (it approved
    /// that roll only).
    approved: bool,
    /// It carries `rollsafe.dev/rolled-at`, which a halt removes (resuming starts afresh).
    rolled_at: bool,
}

impl Plan {
    /// Inspects a Deployment, StatefulSet or DaemonSet.
    pub fn inspect(object: &Value) -> Result<Self, InspectError> {
        Self::inspect_at(object, WatchedKind::Deployment)
    }

    /// Inspects an object of `kind`: its pod template is where the kind keeps it (a CronJob's
    /// under `spec.jobTemplate.spec`).
    pub fn inspect_at(object: &Value, kind: WatchedKind) -> Result<Self, InspectError> {
        let restart = RestartPatch::inspect_at(object, kind.template_path())?;
        let annotations = object.pointer("/metadata/annotations");
        let metadata_annotations = annotations.is_some_and(Value::is_object);
        let pending = annotations.and_then(|a| a.get(PENDING)).is_some();
        let approved = annotations.and_then(|a| a.get(APPROVED)).is_some();
        let rolled_at = annotations.and_then(|a| a.get(ROLLED_AT)).is_some();
        Ok(Self {
            restart,
            metadata_annotations,
            pending,
            approved,
            rolled_at,
        })
    }

    /// The uid the patch tests.
    pub fn uid(&self) -> &str {
        self.restart.preconditions().uid()
    }

    /// The resourceVersion the patch tests.
    pub fn resource_version(&self) -> &str {
        self.restart.preconditions().resource_version()
    }

    /// The patch: `test` uid, `test` resourceVersion, then (for a roll) the pod-template
    /// `rollsafe.dev/config-hash`, then the metadata `rollsafe.dev/config-record`, both set to
    /// `digest`, the metadata `rollsafe.dev/config-versions` set to `versions` (the
    /// resourceVersions the record was read from), and (for a roll) `kubernetes.io/change-cause`
    /// set to `cause`, and (for a roll) `rollsafe.dev/rolled-at` set to `rolled_at` (the
    /// recent roll times the brakes read back after a failover), `cause` being what the
    /// workload's controller copies to the new ReplicaSet or ControllerRevision, where
    /// `kubectl rollout history` reads it. `None` when `decision` writes nothing.
    pub fn document(
        &self,
        decision: &RollDecision,
        versions: &str,
        cause: &str,
        rolled_at: &str,
    ) -> Option<Patch> {
        let (digest, roll) = match decision {
            RollDecision::Adopt { digest } => (digest, false),
            RollDecision::Roll { digest, .. } => (digest, true),
            _ => return None,
        };
        let template_key: AnnotationKey = CONFIG_HASH.parse().ok()?;
        // The pod template carries the workload digest; the record adds the per-object part.
        let (template_value, _) = parse_record(digest);
        let Patch(mut operations) = self.restart.document(&template_key, template_value);
        if roll {
            operations.extend(self.metadata_adds(&[
                (CONFIG_RECORD, digest),
                (CONFIG_VERSIONS, versions),
                (CHANGE_CAUSE, cause),
                (ROLLED_AT, rolled_at),
            ]));
            operations.extend(self.pending_removal());
            operations.extend(self.approved_removal());
        } else {
            // Keep the two tests only: the record alone, no pod-template change.
            operations.truncate(2);
            operations.extend(
                self.metadata_adds(&[(CONFIG_RECORD, digest), (CONFIG_VERSIONS, versions)]),
            );
            operations.extend(self.pending_removal());
            operations.extend(self.approved_removal());
        }
        Some(Patch(operations))
    }

    /// The patch of a roll by eviction (`rollsafe.dev/strategy: evict`): the two tests, then the
    /// record, its versions, the roll times and the `rollsafe.dev/evicting` mark (`since`, the
    /// instant the run restarts pods for) on the metadata; a pending mark and an approval are
    /// settled as a roll settles them. The pod template is not touched: the run evicts the
    /// pods. `None` unless `decision` rolls.
    pub fn evict_document(
        &self,
        decision: &RollDecision,
        versions: &str,
        rolled_at: &str,
        since: &str,
    ) -> Option<Patch> {
        let RollDecision::Roll { digest, .. } = decision else {
            return None;
        };
        let mut operations = self.tests()?;
        operations.extend(self.metadata_adds(&[
            (CONFIG_RECORD, digest),
            (CONFIG_VERSIONS, versions),
            (ROLLED_AT, rolled_at),
            (EVICTING, since),
        ]));
        operations.extend(self.pending_removal());
        operations.extend(self.approved_removal());
        Some(Patch(operations))
    }

    /// The patch that marks a roll held by a restart window: the two tests, then the metadata
    /// annotation `rollsafe.dev/pending` set to `mark`. The pod template is not touched.
    pub fn pend_document(&self, mark: &str) -> Option<Patch> {
        let mut operations = self.tests()?;
        operations.extend(self.metadata_adds(&[(PENDING, mark)]));
        Some(Patch(operations))
    }

    /// The patch that removes a `rollsafe.dev/pending` mark no roll is due for any more (the
    /// change was undone while held): the two tests, then its removal; `None` without a mark.
    pub fn unpend_document(&self) -> Option<Patch> {
        if !self.pending {
            return None;
        }
        let mut operations = self.tests()?;
        operations.extend(self.pending_removal());
        Some(Patch(operations))
    }

    /// Whether it carries a `rollsafe.dev/pending` mark.
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// The `test`s of uid and resourceVersion alone.
    fn tests(&self) -> Option<Vec<PatchOperation>> {
        let template_key: AnnotationKey = CONFIG_HASH.parse().ok()?;
        let Patch(mut operations) = self.restart.document(&template_key, "");
        operations.truncate(2);
        Some(operations)
    }

    /// The removal of `rollsafe.dev/approved`, when there is one.
    fn approved_removal(&self) -> Option<PatchOperation> {
        self.approved.then(|| {
            PatchOperation::Remove(RemoveOperation {
                path: PointerBuf::from_tokens(["metadata", "annotations", APPROVED]),
            })
        })
    }

    /// The removal of the `rollsafe.dev/pending` mark, when there is one.
    fn pending_removal(&self) -> Option<PatchOperation> {
        self.pending.then(|| {
            PatchOperation::Remove(RemoveOperation {
                path: PointerBuf::from_tokens(["metadata", "annotations", PENDING]),
            })
        })
    }

    /// The patch that halts the workload: the two tests, then the metadata annotation
    /// `rollsafe.dev/halted` set to `reason`. The pod template is not touched.
    pub fn halt_document(&self, reason: &str) -> Option<Patch> {
        let mut operations = self.tests()?;
        operations.extend(self.metadata_adds(&[(HALTED, reason)]));
        operations.extend(self.pending_removal());
        // The roll history that halted it: resuming is a fresh start.
        if self.rolled_at {
            operations.push(PatchOperation::Remove(RemoveOperation {
                path: PointerBuf::from_tokens(["metadata", "annotations", ROLLED_AT]),
            }));
        }
        Some(Patch(operations))
    }

    /// Sets metadata annotations: one `add` per key when the object has an annotations map,
    /// else one `add` of the map holding them all (a second `add` of the map would replace the
    /// first).
    fn metadata_adds(&self, entries: &[(&str, &str)]) -> Vec<PatchOperation> {
        let add = |path, value| PatchOperation::Add(AddOperation { path, value });
        if self.metadata_annotations {
            entries
                .iter()
                .map(|(key, value)| {
                    add(
                        PointerBuf::from_tokens(["metadata", "annotations", key]),
                        Value::String((*value).to_owned()),
                    )
                })
                .collect()
        } else {
            let map = entries
                .iter()
                .map(|(key, value)| ((*key).to_owned(), Value::String((*value).to_owned())))
                .collect::<Map<_, _>>();
            vec![add(
                PointerBuf::from_tokens(["metadata", "annotations"]),
                Value::Object(map),
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decision_table() {
        let facts = |watched, record: Option<&str>, halted, deferral| Facts {
            watched,
            record: record.map(str::to_owned),
            halted,
            deferral,
        };
        let roll = |deferred| RollDecision::Roll {
            digest: "v1:b".into(),
            deferred,
        };
        let cases = [
            (
                facts(false, Some("v1:a"), false, None),
                RollDecision::NotWatched,
            ),
            (facts(true, Some("v1:a"), true, None), RollDecision::Halted),
            (
                facts(true, None, false, None),
                RollDecision::Adopt {
                    digest: "v1:b".into(),
                },
            ),
            (
                facts(true, Some("v1:b"), false, None),
                RollDecision::Unchanged,
            ),
            (facts(true, Some("v1:a"), false, None), roll(None)),
            (
                facts(true, Some("v1:a"), false, Some(Deferral::Paused)),
                roll(Some(Deferral::Paused)),
            ),
            (
                facts(true, Some("v1:b"), false, Some(Deferral::OnDelete)),
                RollDecision::Unchanged,
            ),
        ];
        for (facts, expected) in cases {
            assert_eq!(decide(&facts, "v1:b"), expected, "{facts:?}");
        }
    }

    #[test]
    fn per_object_records_tell_a_change_from_an_object_joining_or_leaving() {
        let facts = |record: &str| Facts {
            watched: true,
            record: Some(record.to_owned()),
            halted: false,
            deferral: None,
        };
        let adopt = |now: &str| RollDecision::Adopt { digest: now.into() };
        let roll = |now: &str| RollDecision::Roll {
            digest: now.into(),
            deferred: None,
        };
        // (recorded, now, expected)
        let cases = [
            (
                "v1:a;11=aa,22=bb",
                "v1:a;11=aa,22=bb",
                RollDecision::Unchanged,
            ),
            // 22 opted out (left the record): no roll, the new record is written.
            ("v1:a;11=aa,22=bb", "v1:b;11=aa", adopt("v1:b;11=aa")),
            // 22's opt-out removed (joined the record), whatever it holds now: no roll.
            ("v1:b;11=aa", "v1:c;11=aa,22=cc", adopt("v1:c;11=aa,22=cc")),
            // 11 changed while 22 joined: a roll.
            ("v1:b;11=aa", "v1:d;11=ab,22=cc", roll("v1:d;11=ab,22=cc")),
            (
                "v1:a;11=aa,22=bb",
                "v1:e;11=aa,22=bc",
                roll("v1:e;11=aa,22=bc"),
            ),
            // Every object opted out.
            ("v1:a;11=aa", "v1:f;", adopt("v1:f;")),
            // A record from before per-object entries: its digest decides.
            ("v1:a", "v1:a;11=aa", RollDecision::Unchanged),
            ("v1:z", "v1:a;11=aa", roll("v1:a;11=aa")),
        ];
        for (recorded, now, expected) in cases {
            assert_eq!(
                decide(&facts(recorded), now),
                expected,
                "{recorded} → {now}"
            );
        }
    }

    fn workload(metadata_annotations: Option<Value>) -> Value {
        let mut metadata = json!({"name": "web", "uid": "u-1", "resourceVersion": "7"});
        if let Some(a) = metadata_annotations {
            metadata["annotations"] = a;
        }
        json!({"metadata": metadata, "spec": {"template": {"metadata": {"annotations": {}}}}})
    }

    #[test]
    fn roll_and_adopt_documents() {
        let roll = RollDecision::Roll {
            digest: "v1:d;11=aa".into(),
            deferred: None,
        };
        let adopt = RollDecision::Adopt {
            digest: "v1:d;11=aa".into(),
        };
        let with = Plan::inspect(&workload(Some(json!({"a": "b"})))).unwrap();
        assert_eq!(
            serde_json::to_value(
                with.document(&roll, "11=5", "cause", "2026-12-04T10:00:00Z")
                    .unwrap()
            )
            .unwrap(),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/spec/template/metadata/annotations/rollsafe.dev~1config-hash", "value": "v1:d"},
                {"op": "add", "path": "/metadata/annotations/rollsafe.dev~1config-record", "value": "v1:d;11=aa"},
                {"op": "add", "path": "/metadata/annotations/rollsafe.dev~1config-versions", "value": "11=5"},
                {"op": "add", "path": "/metadata/annotations/kubernetes.io~1change-cause", "value": "cause"},
                {"op": "add", "path": "/metadata/annotations/rollsafe.dev~1rolled-at", "value": "2026-12-04T10:00:00Z"}
            ])
        );
        let cron = json!({"metadata": {"uid": "u", "resourceVersion": "7"},
            "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {}}}}}}});
        let plan = Plan::inspect_at(&cron, WatchedKind::CronJob).unwrap();
        let patch = plan.document(&roll, "v", "c", "t").unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap()[2],
            json!({"op": "add", "path": "/spec/jobTemplate/spec/template/metadata/annotations",
                   "value": {"rollsafe.dev/config-hash": "v1:d"}})
        );
        assert!(Plan::inspect_at(&cron, WatchedKind::Deployment).is_err());
        let without = Plan::inspect(&workload(None)).unwrap();
        assert_eq!(
            serde_json::to_value(without.document(&adopt, "11=5", "cause", "t").unwrap()).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/annotations", "value": {"rollsafe.dev/config-record": "v1:d;11=aa", "rollsafe.dev/config-versions": "11=5"}}
            ])
        );
        // Without an annotations map, the record and the cause go in one map.
        let mut object = workload(None);
        json_patch::patch(
            &mut object,
            &without
                .document(&roll, "11=5", "cause", "2026-12-04T10:00:00Z")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            object["metadata"]["annotations"],
            json!({CONFIG_RECORD: "v1:d;11=aa", CONFIG_VERSIONS: "11=5", CHANGE_CAUSE: "cause",
                ROLLED_AT: "2026-12-04T10:00:00Z"})
        );
        assert!(
            with.document(&RollDecision::Unchanged, "", "", "")
                .is_none()
        );
        assert_eq!(
            serde_json::to_value(with.halt_document("flapping").unwrap()).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/annotations/rollsafe.dev~1halted", "value": "flapping"}
            ])
        );
        // Applied to the object, the adoption leaves the pod template alone.
        let mut object = workload(Some(json!({"a": "b"})));
        let before = object["spec"].clone();
        json_patch::patch(
            &mut object,
            &with.document(&adopt, "11=5", "", "t").unwrap(),
        )
        .unwrap();
        assert_eq!(object["spec"], before);
        assert_eq!(
            object["metadata"]["annotations"][CONFIG_RECORD],
            "v1:d;11=aa"
        );
    }
}
