//! `rollsafe watch` reads the kubeconfig and context variables every other command reads
//! (`ROLLSAFE_KUBECONFIG`, `ROLLSAFE_CONTEXT`) as well as its own: the flag wins, then
//! `ROLLSAFE_WATCH_*`, then the shared variable. Seen through the binary: the kubeconfig it
//! could not read is the one it names.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// Runs `rollsafe watch` with only `env` (and `PATH`) set; returns (exit code, stdout, stderr).
fn watch(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .args([
            "watch",
            "--admin-listen",
            "127.0.0.1:0",
            "--log-format",
            "text",
        ])
        .args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Flags, environment, and what the error must name.
type Case<'a> = (&'a [&'a str], Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn the_kubeconfig_comes_from_the_flag_then_its_own_variable_then_the_shared_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (flag, own, shared) = (path("flag.yaml"), path("own.yaml"), path("shared.yaml"));
    let cases: [Case<'_>; 4] = [
        (
            &[],
            vec![("ROLLSAFE_KUBECONFIG", shared.as_str())],
            "shared.yaml",
        ),
        (
            &[],
            vec![
                ("ROLLSAFE_KUBECONFIG", shared.as_str()),
                ("ROLLSAFE_WATCH_KUBECONFIG", own.as_str()),
            ],
            "own.yaml",
        ),
        (
            &["--kubeconfig", flag.as_str()],
            vec![
                ("ROLLSAFE_KUBECONFIG", shared.as_str()),
                ("ROLLSAFE_WATCH_KUBECONFIG", own.as_str()),
            ],
            "flag.yaml",
        ),
        // An empty shared variable is unset, as every other variable: the configuration is
        // inferred (no kubeconfig here, and not in a pod).
        (
            &[],
            vec![("ROLLSAFE_KUBECONFIG", "")],
            "cannot find a Kubernetes configuration",
        ),
    ];
    for (args, env, named) in cases {
        let (code, stdout, stderr) = watch(args, &env);
        assert_eq!(code, Some(1), "{env:?}: {stderr}");
        assert_eq!(stdout, "", "{env:?}");
        assert!(
            stderr.starts_with("rollsafe: cannot connect to Kubernetes"),
            "{stderr}"
        );
        assert!(
            stderr.contains(named),
            "{env:?} should name {named}: {stderr}"
        );
        assert!(
            stderr.matches("(os error 2)").count() <= 1,
            "a cause said twice: {stderr}"
        );
        for other in ["flag.yaml", "own.yaml", "shared.yaml"] {
            if other != named {
                assert!(!stderr.contains(other), "{env:?} named {other}: {stderr}");
            }
        }
    }
}

/// Bad selection input is a usage error, exit 2, one line that names the flag — before any
/// watch starts; the API server's own words are not repeated.
#[test]
fn bad_selection_input_is_refused_at_startup_with_exit_2() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cluster = runtime.block_on(rollsafe_testing::TestCluster::start(Vec::new()));
    let kubeconfig = cluster.kubeconfig.to_string_lossy().into_owned();
    let cases: [(&[&str], &str); 6] = [
        (
            &["--selector", "a b c"],
            "rollsafe: --selector \"a b c\" is not a label selector the API server accepts",
        ),
        (
            &["--source-selector", "tier in (a"],
            "rollsafe: --source-selector \"tier in (a\" is not a label selector the API server accepts",
        ),
        (
            &["--ignore-kind", "Pod"],
            "a kind of source: Secret or ConfigMap",
        ),
        (
            &["--ignore-namespace", "Not_A_Namespace"],
            "--ignore-namespace",
        ),
        (
            &["--source-selector", "app=web,,x"],
            "rollsafe: --source-selector \"app=web,,x\" is not a label selector",
        ),
        (
            &["--namespace-selector", "team notin a"],
            "rollsafe: --namespace-selector \"team notin a\" is not a label selector",
        ),
    ];
    for (args, named) in cases {
        let (code, stdout, stderr) = watch(
            &[&["--kubeconfig", kubeconfig.as_str()][..], args].concat(),
            &[],
        );
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        if named.starts_with("rollsafe: --") {
            assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
            for debug in ["Status {", "Some(", "ApiError:"] {
                assert!(!stderr.contains(debug), "{args:?}: {stderr}");
            }
        }
    }
    let watches = cluster
        .emu
        .requests()
        .iter()
        .filter(|r| r.query.contains("watch=true"))
        .count();
    assert_eq!(watches, 0, "no watch started");
}

/// A bad webhook is a usage error (exit 2), one line naming the flag and a code — and never
/// the URL, which carries a token.
#[test]
fn a_bad_webhook_is_refused_without_repeating_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("webhooks");
    std::fs::write(
        &file,
        "# the team's channel\nhttps://hooks.example.com/services/T0KEN-ONE\nftp://hooks.example.com/T0KEN-TWO\n",
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--notify-webhook", "ftp://hooks.example.com/T0KEN-TWO"],
            "rollsafe: --notify-webhook (entry 1): the webhook URL's scheme is neither http nor https (",
        ),
        (
            &[
                "--notify-webhook",
                "https://hooks.example.com/T0KEN-ONE,https://user:T0KEN-TWO@hooks.example.com/x",
            ],
            "rollsafe: --notify-webhook (entry 2): the webhook URL carries user information",
        ),
        (
            &["--notify-webhook-file", file.as_str()],
            "rollsafe: --notify-webhook-file: line 3 of the webhook file:",
        ),
    ];
    for (args, expected) in cases {
        let (code, stdout, stderr) = watch(args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stdout, "");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains("T0KEN"), "the URL was repeated: {stderr}");
    }
}

/// `--streaming-lists`: against a server that serves streaming lists, `auto` (the default)
/// starts every watch with one and says so; `off` pages; against one that does not (1.33's
/// default), `auto` says so and pages. Seen in the log the user reads and in the requests the
/// server received; a value that is not a mode is a usage error.
#[test]
fn streaming_lists_are_used_where_served_and_said_so() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    for (gate, args, streamed, said) in [
        (
            true,
            &[][..],
            true,
            "the API server serves streaming lists: each watch starts with one",
        ),
        (false, &[][..], false, "does not serve streaming lists"),
        (true, &["--streaming-lists", "off"][..], false, ""),
    ] {
        let cluster = runtime.block_on(rollsafe_testing::TestCluster::start_with(
            rollsafe_emulator::Emulator::builder().watch_list(gate),
        ));
        let kubeconfig = cluster.kubeconfig.to_string_lossy().into_owned();
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", "/nonexistent")
            .args([
                "watch",
                "--admin-listen",
                "127.0.0.1:0",
                "--log-format",
                "text",
            ])
            .args(["--kubeconfig", kubeconfig.as_str()])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Until every kind is watched (after its list, or streamed from the start).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let watched = |resource: &str| {
            cluster.emu.requests_for("watch", resource).iter().any(|r| {
                !r.query.contains("rollsafe-streaming-list-check")
                    && r.query_param("timeoutSeconds").is_some()
            })
        };
        while !["secrets", "configmaps", "deployments"]
            .iter()
            .all(|r| watched(r))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the watches never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(said), "{args:?} gate {gate}: {stderr}");
        for resource in ["secrets", "configmaps", "deployments"] {
            let streamed_watch = cluster.emu.requests_for("watch", resource).iter().any(|r| {
                r.query_param("sendInitialEvents").as_deref() == Some("true")
                    && !r.query.contains("rollsafe-streaming-list-check")
            });
            let paged = !cluster.emu.requests_for("list", resource).is_empty();
            assert_eq!(
                (streamed_watch, paged),
                (streamed, !streamed),
                "{resource}, {args:?}, gate {gate}"
            );
        }
        let checks = cluster
            .emu
            .requests()
            .iter()
            .filter(|r| r.query.contains("rollsafe-streaming-list-check"))
            .count();
        assert_eq!(
            checks,
            usize::from(args.is_empty()),
            "one check, only for auto"
        );
        runtime.block_on(cluster.emu.shutdown());
    }
    let (code, stdout, stderr) = watch(&["--streaming-lists", "always"], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stdout, "");
    assert!(stderr.contains("--streaming-lists"), "{stderr}");
}
