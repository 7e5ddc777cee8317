//! `cargo xtask test` — the README's test command: runs every suite on both substrates.
//!
//! It starts the real control plane once (`rollsafe-testing`'s `control-plane`, which builds
//! it from Go modules on first use), hands its description to the suites in
//! `ROLLSAFE_CONTROL_PLANE`, runs `cargo test` (the whole workspace unless cargo arguments are
//! given), and stops the control plane, whatever the tests did. Each both-substrate test is
//! generated twice, `…::on_emulator` and `…::on_real`.
//!
//! ```text
//! cargo xtask test [--substrate both|emulator|real] [CARGO_TEST_ARGS…] [-- TEST_ARGS…]
//! ```
//!
//! `--substrate emulator` skips the real-substrate tests (and starts nothing); `real` runs only
//! them. Exit codes: cargo test's, or 1 when the control plane could not be started (one line
//! on stderr saying why), 2 for a usage error.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, ExitCode, Stdio};

const USAGE: &str = "usage: cargo xtask test [--substrate both|emulator|real] [CARGO_TEST_ARGS...] [-- TEST_ARGS...]";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Substrates {
    Both,
    Emulator,
    Real,
}

struct TestArgs {
    substrates: Substrates,
    cargo: Vec<String>,
    harness: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<TestArgs, String> {
    match args.next().as_deref() {
        Some("test") => {}
        Some(other) => return Err(format!("unknown command {other:?}\n{USAGE}")),
        None => return Err(USAGE.to_owned()),
    }
    let mut parsed = TestArgs {
        substrates: Substrates::Both,
        cargo: Vec::new(),
        harness: Vec::new(),
    };
    let mut after_dashes = false;
    while let Some(arg) = args.next() {
        if after_dashes {
            parsed.harness.push(arg);
        } else if arg == "--" {
            after_dashes = true;
        } else if arg == "--substrate" || arg.starts_with("--substrate=") {
            let value = match arg.split_once('=') {
                Some((_, v)) => v.to_owned(),
                None => args.next().ok_or_else(|| USAGE.to_owned())?,
            };
            parsed.substrates = match value.as_str() {
                "both" => Substrates::Both,
                "emulator" => Substrates::Emulator,
                "real" => Substrates::Real,
                _ => return Err(format!("--substrate takes both, emulator or real\n{USAGE}")),
            };
        } else {
            parsed.cargo.push(arg);
        }
    }
    Ok(parsed)
}

/// The real control plane, started by `control-plane --watch-stdin`: it stops every process
/// it started when its standard input closes — when this is dropped, or when this process
/// ends in any way.
struct ControlPlane {
    child: std::process::Child,
    line: String,
}

impl ControlPlane {
    fn start() -> Result<Self, String> {
        let mut child = Command::new(env!("CARGO"))
            .args([
                "run",
                "-q",
                "--locked",
                "-p",
                "rollsafe-testing",
                "--bin",
                "control-plane",
                "--",
                "--watch-stdin",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|_| "cannot run cargo to start the control plane".to_owned())?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| "the control plane's output is not readable".to_owned())?;
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        if read.is_err() || line.trim().is_empty() {
            let _ = child.wait();
            return Err("the real control plane did not start (see above)".to_owned());
        }
        Ok(Self {
            child,
            line: line.trim().to_owned(),
        })
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let plane = if args.substrates == Substrates::Emulator {
        None
    } else {
        match ControlPlane::start() {
            Ok(plane) => {
                eprintln!("xtask: real control plane ready: {}", plane.line);
                Some(plane)
            }
            Err(message) => {
                eprintln!("xtask: {message}");
                return ExitCode::from(1);
            }
        }
    };
    let mut command = Command::new(env!("CARGO"));
    command.arg("test");
    if args.cargo.is_empty() {
        command.args(["--workspace", "--locked"]);
    }
    command.args(&args.cargo);
    command.arg("--");
    command.args(&args.harness);
    match args.substrates {
        Substrates::Both => {}
        Substrates::Emulator => {
            command.args(["--skip", "on_real"]);
        }
        Substrates::Real => {
            command.arg("on_real");
        }
    }
    if let Some(plane) = &plane {
        command.env("ROLLSAFE_CONTROL_PLANE", &plane.line);
    }
    let status = command.status();
    drop(plane);
    match status {
        Ok(status) => status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .map_or(ExitCode::FAILURE, ExitCode::from),
        Err(_) => {
            eprintln!("xtask: cannot run cargo test");
            ExitCode::FAILURE
        }
    }
}
