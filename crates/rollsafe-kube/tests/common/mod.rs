//! Shared set-up for the integration tests: a [`TestCluster`] seeded with the Secret of the
//! suite, and the suite's workload builders over `rollsafe-testing`'s.

#![allow(dead_code, reason = "shared by several test crates; each uses a part")]
#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

use std::collections::HashMap;

use jiff::Timestamp;
use rollsafe_core::annotations::RESTART_ANNOTATION;
use rollsafe_core::contract::RestartResult;
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_emulator::RequestLogEntry;
use rollsafe_kube::{Impersonation, RestartEngine, RestartRequest};
use rollsafe_testing::{TestCluster, Workload};
use serde_json::Value;

pub const NS: &str = "shop";
pub const SECRET: &str = "db-creds";
pub const NOW: &str = "2026-11-29T18:00:00.123Z";

/// A [`TestCluster`] seeded with [`SECRET`] in [`NS`].
pub struct Env(TestCluster);

impl std::ops::Deref for Env {
    type Target = TestCluster;

    fn deref(&self) -> &TestCluster {
        &self.0
    }
}

impl Env {
    pub async fn start(seeds: Vec<Value>) -> Env {
        let mut all = vec![secret(SECRET)];
        all.extend(seeds);
        Env(TestCluster::start(all).await)
    }

    pub fn engine(&self) -> RestartEngine {
        RestartEngine::new(&self.connection)
    }

    pub async fn run(&self) -> RestartResult {
        self.run_as(None).await
    }

    pub async fn run_as(&self, identity: Option<&Impersonation>) -> RestartResult {
        self.engine()
            .run(&request().acting_as(identity.cloned()))
            .await
    }

    /// The restart annotation on a workload's pod template, as stored.
    pub fn annotation(&self, resource: &str, name: &str) -> Option<String> {
        self.emu
            .get_object(resource, Some(NS), name)?
            .pointer("/spec/template/metadata/annotations")?
            .get(RESTART_ANNOTATION)?
            .as_str()
            .map(str::to_owned)
    }

    /// Patch requests, per workload name.
    pub fn patches(&self) -> Vec<RequestLogEntry> {
        self.emu
            .requests()
            .into_iter()
            .filter(|r| r.verb.as_deref() == Some("patch"))
            .collect()
    }

    pub fn patched_names(&self, resource: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .emu
            .requests_for("patch", resource)
            .into_iter()
            .filter_map(|r| r.name)
            .collect();
        names.sort();
        names
    }

    /// Asserts that no request was sent twice: at most one patch per workload, and no list
    /// page requested twice with the same continue token.
    pub fn assert_nothing_sent_twice(&self) {
        let mut seen: HashMap<(String, String, String, String), usize> = HashMap::new();
        for entry in self.emu.requests() {
            let key = (
                entry.verb.clone().unwrap_or_default(),
                entry.resource.clone().unwrap_or_default(),
                entry.name.clone().unwrap_or_default(),
                entry.query_param("continue").unwrap_or_default(),
            );
            if key.0 == "get" {
                continue;
            }
            *seen.entry(key).or_default() += 1;
        }
        for (key, count) in seen {
            assert_eq!(count, 1, "sent {count} times: {key:?}");
        }
    }
}

pub fn now() -> Timestamp {
    NOW.parse().unwrap()
}

pub fn ns() -> Namespace {
    NS.parse().unwrap()
}

pub fn secret_name() -> SecretName {
    SECRET.parse().unwrap()
}

/// A request for the consumers of [`SECRET`] in [`NS`] at [`NOW`], as the server itself.
pub fn request() -> RestartRequest {
    RestartRequest::new(ns(), secret_name()).at(now())
}

pub fn secret(name: &str) -> Value {
    rollsafe_testing::secret(NS, name, "not-a-real-password")
}

fn workload(workload: Workload, secret: Option<&str>) -> Value {
    let workload = workload.namespace(NS).with_replicas();
    match secret {
        Some(secret) => workload.consuming_secret_via_volume(secret).build(),
        None => workload.build(),
    }
}

/// A Deployment; consumes `secret` through a Secret volume when given.
pub fn deployment(name: &str, secret: Option<&str>) -> Value {
    workload(Workload::deployment(name), secret)
}

/// A StatefulSet; consumes `secret` through a Secret volume when given.
pub fn stateful_set(name: &str, secret: Option<&str>) -> Value {
    workload(Workload::stateful_set(name), secret)
}

/// A DaemonSet; consumes `secret` through a Secret volume when given.
pub fn daemon_set(name: &str, secret: Option<&str>) -> Value {
    workload(Workload::daemon_set(name), secret)
}

/// Role and RoleBinding letting group `group` list and patch the three kinds in [`NS`].
pub fn rbac_for_group(group: &str) -> Vec<Value> {
    rollsafe_testing::rbac_for_group(NS, group, false)
}

/// The most requests in `entries` that overlapped in time (from the server's start/end).
pub fn peak_overlap(entries: &[RequestLogEntry]) -> usize {
    let mut events: Vec<(u64, i32)> = Vec::new();
    for e in entries {
        events.push((e.start_micros, 1));
        events.push((e.end_micros, -1));
    }
    // Ends sort before starts at the same instant.
    events.sort();
    let mut current = 0i32;
    let mut peak = 0i32;
    for (_, delta) in events {
        current += delta;
        peak = peak.max(current);
    }
    usize::try_from(peak).unwrap_or(0)
}

pub fn result_json(result: &RestartResult) -> Value {
    serde_json::to_value(result).unwrap()
}
