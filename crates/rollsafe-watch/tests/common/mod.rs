//! Shared by the controller suites: a controller running on a task of its own, its published
//! status waited on with a deadline.

#![allow(dead_code, reason = "shared by several test crates; each uses a part")]
#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

use std::time::Duration;

use rollsafe_watch::{Controller, Status};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How long a suite waits for a published status (generous: the real control plane shares two
/// cores with the tests).
pub const DEADLINE: Duration = Duration::from_secs(90);

pub struct Running {
    pub status: watch::Receiver<Status>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Running {
    /// Runs `controller` on its own task until `stop` is called.
    pub fn spawn(controller: Controller) -> Running {
        let status = controller.status();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            controller
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Running { status, stop, task }
    }

    /// Waits (polling the published status, with a deadline) until `done` holds.
    pub async fn until(&mut self, what: &str, done: impl Fn(&Status) -> bool) -> Status {
        let waited = tokio::time::timeout(DEADLINE, self.status.wait_for(|s| done(s)))
            .await
            .map(|status| status.map(|s| s.clone()));
        match waited {
            Ok(Ok(status)) => status,
            _ => panic!("timed out waiting for {what}: {:?}", *self.status.borrow()),
        }
    }

    /// Synced, and nothing pending.
    pub async fn settled(&mut self) -> Status {
        self.until("synced and idle", |s| s.synced && s.pending == 0)
            .await
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}
