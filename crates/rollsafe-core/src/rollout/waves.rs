//! The order of a progressive restart: waves of workloads, each rolled and followed to the end
//! before the next starts.
//!
//! Workloads annotated `rollsafe.dev/rollout-wave: "N"` roll in ascending `N` (one wave per
//! distinct `N`), unannotated workloads last. Without any annotation, one workload rolls first
//! — the canary, the first in result order (kind, then name) — then all the rest. A value that
//! is not a small non-negative integer (`0` to [`MAX_WAVE`], decimal digits only) is reported
//! and its workload goes last, with the unannotated ones.

use serde::{Deserialize, Serialize};

use crate::contract::WorkloadName;

/// The largest wave number.
pub const MAX_WAVE: u32 = 1000;

/// Why a wave annotation was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaveError {
    /// Not decimal digits.
    #[error("the wave is not a non-negative integer")]
    NotANumber,
    /// Beyond [`MAX_WAVE`].
    #[error("the wave is larger than 1000")]
    TooLarge,
}

impl WaveError {
    /// A static code for logs, JSON and metrics.
    pub fn code(self) -> &'static str {
        match self {
            WaveError::NotANumber => "wave_not_a_number",
            WaveError::TooLarge => "wave_too_large",
        }
    }
}

/// Parses a `rollsafe.dev/rollout-wave` value.
pub fn parse_wave(value: &str) -> Result<u32, WaveError> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(WaveError::NotANumber);
    }
    match value.parse::<u32>() {
        Ok(n) if n <= MAX_WAVE => Ok(n),
        _ => Err(WaveError::TooLarge),
    }
}

/// Which wave this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "number")]
pub enum WaveLabel {
    /// The workloads annotated with this wave number.
    Annotated(u32),
    /// The one workload rolled first when none is annotated.
    Canary,
    /// Everything after the canary, or the unannotated workloads after the annotated waves.
    Rest,
}

impl std::fmt::Display for WaveLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaveLabel::Annotated(n) => write!(f, "wave {n}"),
            WaveLabel::Canary => f.write_str("canary"),
            WaveLabel::Rest => f.write_str("the rest"),
        }
    }
}

/// One wave. `N` names a workload: the API's [`WorkloadName`], or the controller's key (which
/// names the wider set of kinds it rolls); their order is result order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wave<N = WorkloadName> {
    /// Which wave.
    pub label: WaveLabel,
    /// Its workloads, in result order.
    pub workloads: Vec<N>,
}

/// A workload whose wave annotation was not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidWave<N = WorkloadName> {
    /// The workload (it goes last).
    pub workload: N,
    /// Why.
    pub error: WaveError,
}

/// The waves of one progressive restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WavePlan<N = WorkloadName> {
    /// In the order they roll. No wave is empty.
    pub waves: Vec<Wave<N>>,
    /// The annotations that were not used.
    pub invalid: Vec<InvalidWave<N>>,
}

impl<N> Default for WavePlan<N> {
    fn default() -> Self {
        Self {
            waves: Vec::new(),
            invalid: Vec::new(),
        }
    }
}

impl<N: Ord + Clone> WavePlan<N> {
    /// Plans `workloads`, each with its `rollsafe.dev/rollout-wave` value if it has one.
    pub fn new(workloads: impl IntoIterator<Item = (N, Option<String>)>) -> Self {
        let mut annotated: Vec<(u32, N)> = Vec::new();
        let mut rest: Vec<N> = Vec::new();
        let mut invalid = Vec::new();
        for (workload, value) in workloads {
            match value.as_deref().map(parse_wave) {
                Some(Ok(n)) => annotated.push((n, workload)),
                Some(Err(error)) => {
                    invalid.push(InvalidWave {
                        workload: workload.clone(),
                        error,
                    });
                    rest.push(workload);
                }
                None => rest.push(workload),
            }
        }
        annotated.sort();
        rest.sort();
        let mut waves: Vec<Wave<N>> = Vec::new();
        if annotated.is_empty() {
            if !rest.is_empty() {
                waves.push(Wave {
                    label: WaveLabel::Canary,
                    workloads: vec![rest.remove(0)],
                });
            }
            if !rest.is_empty() {
                waves.push(Wave {
                    label: WaveLabel::Rest,
                    workloads: rest,
                });
            }
        } else {
            for (n, workload) in annotated {
                match waves.last_mut() {
                    Some(wave) if wave.label == WaveLabel::Annotated(n) => {
                        wave.workloads.push(workload);
                    }
                    _ => waves.push(Wave {
                        label: WaveLabel::Annotated(n),
                        workloads: vec![workload],
                    }),
                }
            }
            if !rest.is_empty() {
                waves.push(Wave {
                    label: WaveLabel::Rest,
                    workloads: rest,
                });
            }
        }
        invalid.sort_by(|a: &InvalidWave<N>, b| a.workload.cmp(&b.workload));
        Self { waves, invalid }
    }

    /// Without annotations, makes the canary the first workload (by kind, then name) that
    /// `rolls` says rolls now, if the first does not: a canary that accepts the patch but rolls
    /// no pod (paused, `OnDelete`, a full partition) would prove nothing about the change.
    pub fn prefer_canary(mut self, rolls: impl Fn(&N) -> bool) -> Self {
        let [canary, rest] = self.waves.as_mut_slice() else {
            return self;
        };
        if canary.label != WaveLabel::Canary || canary.workloads.iter().any(&rolls) {
            return self;
        }
        if let Some(index) = rest.workloads.iter().position(&rolls) {
            let chosen = rest.workloads.remove(index);
            let deferred = std::mem::replace(&mut canary.workloads, vec![chosen]);
            rest.workloads.extend(deferred);
            rest.workloads.sort();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadKind;

    fn w(kind: WorkloadKind, name: &str) -> WorkloadName {
        WorkloadName {
            kind,
            name: name.into(),
        }
    }

    #[test]
    fn wave_values_table() {
        let cases = [
            ("0", Ok(0)),
            ("7", Ok(7)),
            (" 3 ", Ok(3)),
            ("1000", Ok(1000)),
            ("1001", Err(WaveError::TooLarge)),
            ("99999999999", Err(WaveError::TooLarge)),
            ("-1", Err(WaveError::NotANumber)),
            ("+1", Err(WaveError::NotANumber)),
            ("1.5", Err(WaveError::NotANumber)),
            ("", Err(WaveError::NotANumber)),
            ("first", Err(WaveError::NotANumber)),
        ];
        for (value, want) in cases {
            assert_eq!(parse_wave(value), want, "{value:?}");
        }
    }

    #[test]
    fn without_annotations_one_canary_then_the_rest() {
        use WorkloadKind::*;
        let plan = WavePlan::new([
            (w(DaemonSet, "agent"), None),
            (w(Deployment, "web"), None),
            (w(Deployment, "api"), None),
        ]);
        assert_eq!(
            plan.waves,
            vec![
                Wave {
                    label: WaveLabel::Canary,
                    workloads: vec![w(Deployment, "api")]
                },
                Wave {
                    label: WaveLabel::Rest,
                    workloads: vec![w(Deployment, "web"), w(DaemonSet, "agent")]
                },
            ]
        );
        assert!(WavePlan::new([(w(Deployment, "solo"), None)]).waves.len() == 1);
        assert!(WavePlan::<WorkloadName>::new([]).waves.is_empty());
        // A canary that would not roll now gives its place to the first that does.
        let plan = WavePlan::new([
            (w(Deployment, "a-paused"), None),
            (w(Deployment, "b"), None),
            (w(Deployment, "c"), None),
        ])
        .prefer_canary(|workload| workload.name != "a-paused");
        assert_eq!(plan.waves[0].workloads, [w(Deployment, "b")]);
        assert_eq!(
            plan.waves[1].workloads,
            [w(Deployment, "a-paused"), w(Deployment, "c")]
        );
    }

    #[test]
    fn annotated_waves_ascend_and_the_unannotated_and_invalid_go_last() {
        use WorkloadKind::*;
        let plan = WavePlan::new([
            (w(Deployment, "web"), Some("2".into())),
            (w(StatefulSet, "db"), Some("0".into())),
            (w(Deployment, "api"), Some("2".into())),
            (w(DaemonSet, "agent"), None),
            (w(Deployment, "odd"), Some("soon".into())),
        ]);
        let labels: Vec<WaveLabel> = plan.waves.iter().map(|w| w.label).collect();
        assert_eq!(
            labels,
            vec![
                WaveLabel::Annotated(0),
                WaveLabel::Annotated(2),
                WaveLabel::Rest
            ]
        );
        assert_eq!(
            plan.waves[1].workloads,
            vec![w(Deployment, "api"), w(Deployment, "web")]
        );
        assert_eq!(
            plan.waves[2].workloads,
            vec![w(Deployment, "odd"), w(DaemonSet, "agent")]
        );
        assert_eq!(
            plan.invalid,
            vec![InvalidWave {
                workload: w(Deployment, "odd"),
                error: WaveError::NotANumber
            }]
        );
    }
}
