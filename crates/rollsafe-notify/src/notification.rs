//! What a notification says: an outcome of the controller on one workload, with the names of
//! what caused it. Names and key names only: the type has no place for a value.

use std::fmt;

/// The outcome announced. Each is a Kubernetes Event the controller publishes on the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The workload was rolled (`Rolled`).
    Rolled,
    /// The patch was written but the pods roll later: paused, `OnDelete`, a partition, a
    /// CronJob's next run (`RolloutDeferred`).
    Deferred,
    /// The flap stop halted the workload (`Halted`).
    Halted,
    /// A roll waits for a restart window or an approval (`Pending`).
    Pending,
    /// A followed rollout completed (`RolloutComplete`).
    RolloutComplete,
    /// A followed rollout stalled (`RolloutStalled`).
    RolloutStalled,
    /// A progressive roll is held at a stalled earlier wave (`RolloutHeld`).
    RolloutHeld,
    /// Another writer removed or changed rollsafe's template annotation before the rollout
    /// completed (`Reverted`): not rolled again for that content.
    Reverted,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 8] = [
        Outcome::Rolled,
        Outcome::Deferred,
        Outcome::Halted,
        Outcome::Pending,
        Outcome::RolloutComplete,
        Outcome::RolloutStalled,
        Outcome::RolloutHeld,
        Outcome::Reverted,
    ];

    /// The machine name: `rolled`, `deferred`, `halted`, `pending`, `rollout_complete`,
    /// `rollout_stalled`, `rollout_held` or `reverted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Rolled => "rolled",
            Outcome::Deferred => "deferred",
            Outcome::Halted => "halted",
            Outcome::Pending => "pending",
            Outcome::RolloutComplete => "rollout_complete",
            Outcome::RolloutStalled => "rollout_stalled",
            Outcome::RolloutHeld => "rollout_held",
            Outcome::Reverted => "reverted",
        }
    }

    /// The human title of a message.
    pub fn title(self) -> &'static str {
        match self {
            Outcome::Rolled => "Rolled",
            Outcome::Deferred => "Roll deferred",
            Outcome::Halted => "Halted",
            Outcome::Pending => "Roll pending",
            Outcome::RolloutComplete => "Rollout complete",
            Outcome::RolloutStalled => "Rollout stalled",
            Outcome::RolloutHeld => "Progressive rollout held",
            Outcome::Reverted => "Roll reverted by another writer",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object whose change caused the outcome: its kind, its name and key names — the keys of
/// it the workload consumes (empty: the object as a whole). Never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `Secret` or `ConfigMap`.
    pub kind: String,
    /// The object's name (in the workload's namespace).
    pub name: String,
    /// Key names (never values); empty: the whole object.
    pub keys: Vec<String>,
}

impl fmt::Display for Cause {
    /// `Secret/db (password, user)`, or `Secret/db` without keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)?;
        if !self.keys.is_empty() {
            write!(f, " ({})", self.keys.join(", "))?;
        }
        Ok(())
    }
}

/// One outcome on one workload, as sent to every sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// What happened.
    pub outcome: Outcome,
    /// The cluster's name (`--cluster-name`), when set.
    pub cluster: Option<String>,
    /// The workload's namespace.
    pub namespace: String,
    /// The workload's kind, e.g. `Deployment`.
    pub workload_kind: String,
    /// The workload's name.
    pub workload: String,
    /// The objects whose change caused it.
    pub causes: Vec<Cause>,
    /// The note of the Kubernetes Event, e.g. `Rolled for changes to Secret/db`.
    pub summary: String,
    /// The page of the workload (`--page-url`), when set.
    pub link: Option<String>,
    /// When the outcome happened.
    pub at: jiff::Timestamp,
}

impl Notification {
    /// The command that shows the workload and its Events, e.g.
    /// `kubectl describe -n shop deployment/web`.
    pub fn describe_command(&self) -> String {
        format!(
            "kubectl describe -n {} {}/{}",
            self.namespace,
            self.workload_kind.to_ascii_lowercase(),
            self.workload
        )
    }

    /// `Deployment shop/web`.
    pub(crate) fn workload_label(&self) -> String {
        format!(
            "{} {}/{}",
            self.workload_kind, self.namespace, self.workload
        )
    }

    /// The causes as `Secret/db (password), ConfigMap/settings`.
    pub(crate) fn causes_label(&self) -> String {
        self.causes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_and_labels() {
        let n = Notification {
            outcome: Outcome::Rolled,
            cluster: None,
            namespace: "shop".into(),
            workload_kind: "StatefulSet".into(),
            workload: "db".into(),
            causes: vec![
                Cause {
                    kind: "Secret".into(),
                    name: "db".into(),
                    keys: vec!["password".into(), "user".into()],
                },
                Cause {
                    kind: "ConfigMap".into(),
                    name: "settings".into(),
                    keys: vec![],
                },
            ],
            summary: String::new(),
            link: None,
            at: jiff::Timestamp::UNIX_EPOCH,
        };
        assert_eq!(
            n.describe_command(),
            "kubectl describe -n shop statefulset/db"
        );
        assert_eq!(n.workload_label(), "StatefulSet shop/db");
        assert_eq!(
            n.causes_label(),
            "Secret/db (password, user), ConfigMap/settings"
        );
    }

    #[test]
    fn names_and_titles() {
        let names: Vec<_> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            names,
            [
                "rolled",
                "deferred",
                "halted",
                "pending",
                "rollout_complete",
                "rollout_stalled",
                "rollout_held",
                "reverted"
            ]
        );
        let titles: Vec<_> = Outcome::ALL.iter().map(|o| o.title()).collect();
        assert_eq!(
            titles,
            [
                "Rolled",
                "Roll deferred",
                "Halted",
                "Roll pending",
                "Rollout complete",
                "Rollout stalled",
                "Progressive rollout held",
                "Roll reverted by another writer"
            ]
        );
    }
}
