//! Table-driven controller scenarios on the emulator: each row seeds objects, runs a controller
//! with its settings, makes its changes step by step and checks what rolled and what was
//! patched. Every failure names the row.

use rollsafe_testing::{Source, TestCluster, Workload};
use rollsafe_watch::{Controller, ControllerSettings, Status};
use serde_json::Value;

use super::Running;

/// The namespace the scenarios' objects are in.
pub const NS: &str = "shop";

/// One row: a name (in every failure message), the objects seeded, the controller's settings,
/// the changes (with checks between them) and what holds at the end.
pub struct Scenario {
    pub name: &'static str,
    pub seeds: Vec<Value>,
    pub settings: ControllerSettings,
    pub change: Vec<Step>,
    pub expect: Expect,
}

/// One step of a scenario's change.
pub enum Step {
    /// Creates or replaces an object.
    Put(Value),
    /// Deletes `name` of `resource` (plural) in [`NS`].
    Delete(&'static str, &'static str),
    /// Waits (with a deadline) until the published status satisfies the condition.
    Until(&'static str, fn(&Status) -> bool),
    /// Waits until every event so far has been handled (a roll of the barrier workload).
    Barrier,
    /// Waits until synced with nothing pending, then checks the status.
    Settled(&'static str, fn(&Status) -> bool),
    /// Checks which Deployments (namespace, name) carry a config record now.
    Records(&'static [(&'static str, &'static str, bool)]),
    /// Checks the rollouts counted so far per workload.
    Rollouts(&'static [(&'static str, usize)]),
}

/// What holds after the last step and a final barrier.
#[derive(Default)]
pub struct Expect {
    /// Rollouts per workload.
    pub rollouts: &'static [(&'static str, usize)],
    /// Patches per Deployment (the adoption's included).
    pub patches: &'static [(&'static str, usize)],
    /// Deployments whose config record starts with their template's config hash.
    pub hashed: &'static [&'static str],
    /// Deployments (namespace, name) that carry a config record (adopted) or not.
    pub records: &'static [(&'static str, &'static str, bool)],
}

/// `web` reads `db`'s `password`; `api` reads all of `other`.
pub fn two_workloads() -> Vec<Value> {
    vec![
        Source::secret(NS, "db")
            .data(&[("password", "hunter2"), ("user", "app")])
            .build(),
        Source::secret(NS, "other").data(&[("k", "1")]).build(),
        opted_in("web")
            .env_secret_key("P", "db", "password")
            .build(),
        opted_in("api").env_from_secret("other").build(),
    ]
}

/// Deployment `name` in [`NS`] with one replica, opted in.
pub fn opted_in(name: &str) -> Workload {
    Workload::deployment(name)
        .namespace(NS)
        .with_replicas()
        .watch("true")
}

/// The barrier: Deployment `barrier` reading all of Secret `barrier`, seeded with every row.
/// It carries label `team=a`, so that a row selecting workloads by `team=a` keeps it.
fn barrier_seeds() -> Vec<Value> {
    vec![
        Source::secret(NS, "barrier").data(&[("k", "0")]).build(),
        opted_in("barrier")
            .label("team", "a")
            .env_from_secret("barrier")
            .build(),
    ]
}

/// Runs the rows one after the other.
pub async fn run(rows: Vec<Scenario>) {
    for row in rows {
        row.run().await;
    }
}

impl Scenario {
    async fn run(self) {
        let Scenario {
            name,
            mut seeds,
            settings,
            change,
            expect,
        } = self;
        seeds.extend(barrier_seeds());
        let cluster = TestCluster::start(seeds).await;
        let mut running =
            Running::spawn(Controller::new(cluster.connection.client(None), settings));
        let mut barriers = 0;
        for step in change {
            match step {
                Step::Put(object) => {
                    cluster.emu.put_object(object).unwrap();
                }
                Step::Delete(resource, object) => {
                    cluster
                        .emu
                        .delete_object(resource, Some(NS), object)
                        .unwrap();
                }
                Step::Until(what, done) => {
                    running.until(&format!("{name}: {what}"), done).await;
                }
                Step::Settled(what, check) => {
                    let status = running.settled().await;
                    assert!(check(&status), "{name}: {what}: {status:?}");
                }
                Step::Barrier => barrier(&cluster, &mut running, name, &mut barriers).await,
                Step::Records(expected) => check_records(&cluster, name, expected),
                Step::Rollouts(expected) => check_rollouts(&cluster, name, expected),
            }
        }
        barrier(&cluster, &mut running, name, &mut barriers).await;
        check_rollouts(&cluster, name, expect.rollouts);
        for (workload, expected) in expect.patches {
            let patches = cluster
                .emu
                .requests_for("patch", "deployments")
                .into_iter()
                .filter(|r| r.name.as_deref() == Some(*workload))
                .count();
            assert_eq!(patches, *expected, "{name}: patches of {workload}");
        }
        check_records(&cluster, name, expect.records);
        for workload in expect.hashed {
            let object = cluster
                .emu
                .get_object("deployments", Some(NS), workload)
                .unwrap();
            let hash = object
                .pointer("/spec/template/metadata/annotations/rollsafe.dev~1config-hash")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{name}: {workload} has no config hash"));
            let record = object
                .pointer("/metadata/annotations/rollsafe.dev~1config-record")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{name}: {workload} has no config record"));
            assert!(
                record.starts_with(&format!("{hash};")),
                "{name}: the record starts with the template's digest: {record}"
            );
        }
        running.stop().await;
    }
}

/// Changes the barrier Secret, then waits until the barrier workload rolled (and nothing is
/// pending): every event before it has been handled.
async fn barrier(cluster: &TestCluster, running: &mut Running, name: &str, count: &mut usize) {
    *count += 1;
    let value = count.to_string();
    cluster
        .emu
        .put_object(Source::secret(NS, "barrier").data(&[("k", &value)]).build())
        .unwrap();
    let wanted = *count;
    let rolls = running.status.borrow().rolls;
    let emu = &cluster.emu;
    running
        .until(&format!("{name}: barrier roll {wanted}"), |s| {
            s.rolls > rolls && s.pending == 0 && rollouts(emu, "barrier") >= wanted
        })
        .await;
}

fn rollouts(emu: &rollsafe_emulator::RunningEmulator, workload: &str) -> usize {
    emu.rollouts().iter().filter(|r| r.name == workload).count()
}

fn check_rollouts(cluster: &TestCluster, name: &str, expected: &[(&str, usize)]) {
    for (workload, count) in expected {
        assert_eq!(
            rollouts(&cluster.emu, workload),
            *count,
            "{name}: rollouts of {workload}"
        );
    }
}

fn check_records(cluster: &TestCluster, name: &str, expected: &[(&str, &str, bool)]) {
    for (namespace, workload, recorded) in expected {
        let record = cluster
            .emu
            .get_object("deployments", Some(namespace), workload)
            .unwrap()
            .pointer("/metadata/annotations/rollsafe.dev~1config-record")
            .is_some();
        assert_eq!(
            record, *recorded,
            "{name}: a config record on {namespace}/{workload}"
        );
    }
}
