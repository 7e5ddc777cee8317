//! One component's process: its output to a log file of its own, stopped by PID.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::ControlPlaneError;

/// A started component.
pub(super) struct Process {
    component: &'static str,
    child: Child,
}

impl Process {
    /// Starts `program` with `args` and `env`, stdout and stderr to `logs/<component>.log`.
    pub(super) fn spawn(
        component: &'static str,
        program: &Path,
        args: &[String],
        env: &[(&str, &Path)],
        logs: &Path,
    ) -> Result<Self, ControlPlaneError> {
        let spawn_error = || ControlPlaneError::Spawn { component };
        let log = std::fs::File::create(logs.join(format!("{component}.log")))
            .map_err(|_| spawn_error())?;
        let err = log.try_clone().map_err(|_| spawn_error())?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().map_err(|_| spawn_error())?;
        Ok(Self { component, child })
    }

    /// The component's name.
    pub(super) fn component(&self) -> &'static str {
        self.component
    }

    /// Whether the process has exited.
    pub(super) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the process by its PID and reaps it.
    pub(super) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}
