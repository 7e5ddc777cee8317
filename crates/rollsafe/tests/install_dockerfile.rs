//! The Dockerfile's build step is exactly `cargo build --release --locked` for the target it
//! names, and that command works here.
//!
//! No container engine runs on these machines, so the test reads the `RUN cargo build …` line
//! from the Dockerfile (the file and the test cannot drift) and runs it:
//! - always: the command line's shape, that the named target is installed, and
//!   `cargo tree` with the same `--locked --target -p` arguments (the lock file is current,
//!   the package and binary exist for that target);
//! - `ROLLSAFE_DOCKERFILE_BUILD=check` (what `.ci/run` sets): `cargo check` with the very same
//!   arguments in `.ci/cache/dockerfile-target` — a release check of the whole dependency
//!   graph, about 3 minutes on 2 cores;
//! - `ROLLSAFE_DOCKERFILE_BUILD=build`: the exact `cargo build` (about 6 minutes on 2 cores),
//!   and the binary it makes answers `--version`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_common;

use std::process::Command;

use install_common::repo;

/// The arguments after `cargo` of the Dockerfile's build step.
fn dockerfile_cargo_args() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    // Join continuation lines, then find the RUN that invokes cargo.
    let joined = text.replace("\\\n", " ");
    let run = joined
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("RUN cargo "))
        .expect("the Dockerfile has a `RUN cargo …` build step");
    let command = run
        .trim_start_matches("RUN ")
        .split("&&")
        .next()
        .unwrap()
        .trim();
    let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    assert_eq!(words[0], "cargo");
    words[1..].to_vec()
}

fn target_of(args: &[String]) -> String {
    let at = args.iter().position(|a| a == "--target").unwrap();
    args[at + 1].clone()
}

#[test]
fn the_build_step_is_a_locked_release_build_for_a_named_target() {
    let args = dockerfile_cargo_args();
    assert_eq!(args[..3], ["build", "--release", "--locked"], "{args:?}");
    let target = target_of(&args);
    assert!(target.contains("linux"), "{target}");
    assert!(args.windows(2).any(|w| w == ["-p", "rollsafe"]), "{args:?}");
    // The runtime image copies exactly what that build writes.
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    assert!(text.contains(&format!("target/{target}/release/rollsafe")));
    let instructions: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .collect();
    assert!(
        !instructions.iter().any(|l| l.starts_with("HEALTHCHECK")),
        "Kubernetes probes do the health checks"
    );
    assert!(instructions.contains(&"USER 65532:65532"));
    assert!(
        instructions.contains(&"ENV MIMALLOC_ALLOW_THP=0"),
        "the allocator keeps no huge pages on nodes that use them for every process"
    );
    let runtime = instructions
        .iter()
        .rev()
        .find(|l| l.starts_with("FROM "))
        .unwrap();
    assert!(runtime.contains("distroless"), "{runtime}");
}

#[test]
fn the_build_step_runs_here() {
    let args = dockerfile_cargo_args();
    let target = target_of(&args);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let sysroot = Command::new("rustc")
        .args(["--print", "target-libdir", "--target", &target])
        .output()
        .unwrap();
    assert!(
        sysroot.status.success()
            && std::path::Path::new(String::from_utf8_lossy(&sysroot.stdout).trim()).is_dir(),
        "the Dockerfile's target {target} is not installed"
    );
    // The same arguments, resolved: lock file current, package and binary present.
    let mut tree: Vec<String> = vec![
        "tree".into(),
        "--locked".into(),
        "--target".into(),
        target.clone(),
    ];
    let package = args.iter().position(|a| a == "-p").unwrap();
    tree.extend(args[package..package + 2].iter().cloned());
    let output = Command::new(&cargo)
        .args(&tree)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {tree:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mode = std::env::var("ROLLSAFE_DOCKERFILE_BUILD").unwrap_or_default();
    let mut run = args.clone();
    match mode.as_str() {
        "build" => {}
        "check" => run[0] = "check".into(),
        _ => {
            eprintln!(
                "skipping the release build itself: set ROLLSAFE_DOCKERFILE_BUILD=check or =build (.ci/run sets check)"
            );
            return;
        }
    }
    let target_dir = repo().join(".ci/cache/dockerfile-target");
    let output = Command::new(&cargo)
        .args(&run)
        .current_dir(repo())
        .env("CARGO_TARGET_DIR", &target_dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {run:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    if mode == "build" {
        let binary = target_dir.join(&target).join("release/rollsafe");
        let version = Command::new(binary).arg("--version").output().unwrap();
        assert!(version.status.success());
    }
}
