//! The patches in flight: a small pool the controller's loop fills and drains, so that a slow
//! API server holds neither the watches nor the next workload's roll.
//!
//! - At most [`PATCH_CONCURRENCY`] patches are in flight, and never two for one workload: a
//!   workload that comes due while its patch is in flight is evaluated again once it is
//!   answered, from the cache as it then is ([`PatchPool::finish`]).
//! - Rolls go ahead of adoptions: adoptions (a first record, nothing rolled) take at most
//!   [`ADOPTION_CONCURRENCY`] of the slots, so a roll always finds one, and they are paced by
//!   their own budget (`--max-adoptions-per-second`), so that installing rollsafe on a cluster
//!   of 20,000 workloads is not a burst of 20,000 writes. An adoption that cannot go now waits
//!   in a queue of workload keys (nothing else is held: it is evaluated again when its turn
//!   comes).
//!
//! Each patch is sent once, with its own deadline (never retried here); its answer comes back
//! to the loop as a [`Sent`], which carries out everything that follows.

use std::collections::{HashMap, HashSet, VecDeque};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

use crate::annotations::FIELD_MANAGER;
use crate::cache::WorkloadKey;
use crate::limits::TokenBucket;
use crate::outcome::{Purpose, Write};
use rollsafe_kube::read::workload_resource;

/// Patches in flight at once.
pub const PATCH_CONCURRENCY: usize = 8;
/// Of those, how many may be adoptions; the rest are kept for rolls.
pub const ADOPTION_CONCURRENCY: usize = 4;

/// A patch's answer, with what the loop needs to carry it out.
pub struct Sent {
    /// The workload.
    pub key: WorkloadKey,
    /// What it did.
    pub purpose: Purpose,
    /// The rest of the write: its Event, its retry interval.
    pub write: Write,
    /// The resourceVersion the patch tested (the acknowledged object replaces the cached one
    /// only while the cache still holds this one: a later watch event is newer).
    pub tested: String,
    /// The answer.
    pub result: Result<DynamicObject, Unsent>,
}

/// What comes back from the pool.
pub enum Answer {
    /// A patch was answered (or timed out).
    Sent(Box<Sent>),
    /// The task sending it ended without an answer (it panicked): whether the patch was
    /// applied is unknown, so the workload is evaluated again later from what is observed.
    Lost {
        /// The workload.
        key: WorkloadKey,
        /// What it did.
        purpose: Purpose,
    },
}

/// Why a patch was not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsent {
    /// 409 or 422: a concurrent change.
    Refused(u16),
    /// Another failure (the HTTP status, or 0).
    Failed(u16),
    /// It did not end by its deadline.
    TimedOut,
}

impl Unsent {
    /// The answer of a patch request.
    fn of(sent: Result<Result<DynamicObject, kube::Error>, tokio::time::error::Elapsed>) -> Self {
        match sent {
            Ok(Ok(_)) => Unsent::Failed(0),
            Ok(Err(kube::Error::Api(status))) if matches!(status.code, 409 | 422) => {
                Unsent::Refused(status.code)
            }
            Ok(Err(kube::Error::Api(status))) => Unsent::Failed(status.code),
            Ok(Err(_)) => Unsent::Failed(0),
            Err(_) => Unsent::TimedOut,
        }
    }
}

/// The patches in flight and the adoptions waiting for their pace.
pub struct PatchPool {
    /// One task per patch in flight (dropping the pool aborts them).
    in_flight: JoinSet<Sent>,
    /// The workloads with a patch in flight, by task.
    tasks: HashMap<Id, (WorkloadKey, Purpose)>,
    busy: HashSet<WorkloadKey>,
    /// How many of those are adoptions.
    adopting: usize,
    /// Workloads that came due while their patch was in flight.
    again: HashSet<WorkloadKey>,
    /// Adoptions waiting for the pace or a slot, oldest first; `queued` holds the same keys.
    adoptions: VecDeque<WorkloadKey>,
    queued: HashSet<WorkloadKey>,
    pace: TokenBucket,
}

impl PatchPool {
    /// An empty pool pacing adoptions at `per_second` (0: unpaced).
    pub fn new(adoptions_per_second: u32, now: Instant) -> Self {
        let per_minute = adoptions_per_second.saturating_mul(60);
        Self {
            in_flight: JoinSet::new(),
            tasks: HashMap::new(),
            busy: HashSet::new(),
            adopting: 0,
            again: HashSet::new(),
            adoptions: VecDeque::new(),
            queued: HashSet::new(),
            // A second's worth at once, then the rate.
            pace: TokenBucket::new(per_minute, adoptions_per_second.max(1), now),
        }
    }

    /// Patches in flight.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// Whether none is in flight.
    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Whether another patch may start.
    pub fn has_room(&self) -> bool {
        self.in_flight.len() < PATCH_CONCURRENCY
    }

    /// Whether `key` has a patch in flight; if so, it is evaluated again once that is
    /// answered.
    pub fn defer_if_busy(&mut self, key: &WorkloadKey) -> bool {
        if self.busy.contains(key) {
            self.again.insert(key.clone());
            return true;
        }
        false
    }

    /// Whether an adoption may start now: a slot for adoptions and a token of the pace.
    pub fn may_adopt(&mut self, now: Instant) -> bool {
        self.has_room() && self.adopting < ADOPTION_CONCURRENCY && self.pace.wait(now).is_zero()
    }

    /// Queues an adoption that may not start now (once per workload).
    pub fn queue_adoption(&mut self, key: &WorkloadKey) {
        if self.queued.insert(key.clone()) {
            self.adoptions.push_back(key.clone());
        }
    }

    /// Adoptions waiting.
    pub fn adoptions_queued(&self) -> usize {
        self.adoptions.len()
    }

    /// When the next queued adoption may be taken: `None` while none waits or no adoption
    /// slot is free (an answer frees one).
    pub fn next_adoption_at(&mut self, now: Instant) -> Option<Instant> {
        if self.adoptions.is_empty() || !self.has_room() || self.adopting >= ADOPTION_CONCURRENCY {
            return None;
        }
        Some(now + self.pace.wait(now))
    }

    /// The oldest queued adoption, to evaluate again now.
    pub fn next_adoption(&mut self) -> Option<WorkloadKey> {
        let key = self.adoptions.pop_front()?;
        self.queued.remove(&key);
        if self.adoptions.is_empty() && self.adoptions.capacity() > SPARE_CAPACITY {
            self.adoptions = VecDeque::new();
            self.queued = HashSet::new();
        }
        Some(key)
    }

    /// Sends `write` for `key` through `client`: once, by its deadline. An adoption takes a
    /// token of the pace ([`PatchPool::may_adopt`] said one is there).
    pub fn start(
        &mut self,
        client: &kube::Client,
        key: &WorkloadKey,
        write: Write,
        tested: String,
    ) {
        let adoption = write.purpose == Purpose::Adopt;
        if adoption {
            self.adopting += 1;
            // Cannot fail after `may_adopt`; an unpaced pool always has one.
            let _ = self.pace.take(Instant::now());
        }
        self.busy.insert(key.clone());
        let client = client.clone();
        let task_key = key.clone();
        let purpose = write.purpose;
        let task = self.in_flight.spawn(async move {
            let result = send(client, &task_key, write.document.clone(), write.deadline).await;
            Sent {
                purpose: write.purpose,
                key: task_key,
                write,
                tested,
                result,
            }
        });
        self.tasks.insert(task.id(), (key.clone(), purpose));
    }

    /// The next answer; pending while none is in flight.
    pub async fn answered(&mut self) -> Answer {
        loop {
            let answer = match self.in_flight.join_next_with_id().await {
                None => return std::future::pending().await,
                Some(Ok((id, sent))) => {
                    self.tasks.remove(&id);
                    Answer::Sent(Box::new(sent))
                }
                Some(Err(error)) => match self.tasks.remove(&error.id()) {
                    Some((key, purpose)) => Answer::Lost { key, purpose },
                    None => continue,
                },
            };
            return answer;
        }
    }

    /// Frees the slot of an answered patch; returns whether the workload came due meanwhile.
    pub fn finish(&mut self, key: &WorkloadKey, purpose: Purpose) -> bool {
        self.busy.remove(key);
        if purpose == Purpose::Adopt {
            self.adopting = self.adopting.saturating_sub(1);
        }
        let again = self.again.remove(key);
        if self.busy.is_empty() && self.busy.capacity() > SPARE_CAPACITY {
            self.busy = HashSet::new();
        }
        again
    }

    /// Forgets a queued adoption of a workload that is gone.
    pub fn forget(&mut self, key: &WorkloadKey) {
        if self.queued.remove(key) {
            self.adoptions.retain(|queued| queued != key);
        }
    }
}

/// The capacity an empty table of the pool may keep.
const SPARE_CAPACITY: usize = 1024;

/// Sends one patch, once, to end by `deadline`.
async fn send(
    client: kube::Client,
    key: &WorkloadKey,
    document: json_patch::Patch,
    deadline: Instant,
) -> Result<DynamicObject, Unsent> {
    let resource = workload_resource(key.kind);
    let api: Api<DynamicObject> = Api::namespaced_with(client, &key.namespace, &resource);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let sent = tokio::time::timeout_at(
        deadline,
        api.patch(&key.name, &params, &Patch::Json::<()>(document)),
    )
    .await;
    match sent {
        Ok(Ok(object)) => Ok(object),
        other => Err(Unsent::of(other)),
    }
}
