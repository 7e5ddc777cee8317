//! `rollsafe render` end to end: golden transcripts (exit code, stdout, stderr) of the binary
//! over the input files in `tests/render/`, pinned as snapshots in `tests/render/snapshots/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const HASH: &str = "openchoreo.dev/dp-resource-hash";
const STATE: &str = "rollsafe.dev/referenced-config-state";

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/render")
}

fn rollsafe() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
    command
        .current_dir(data_dir())
        .env_remove("REFERENCED_CONFIG_ROLLOUT")
        .env_remove("HELM_NAMESPACE")
        .env_remove("KUBERNETES_SERVICE_HOST")
        // No kubeconfig of the machine running the tests is read for a release namespace.
        .env("KUBECONFIG", "/nonexistent/rollsafe-test-kubeconfig");
    command
}

fn run(args: &[&str]) -> Output {
    rollsafe().arg("render").args(args).output().unwrap()
}

fn run_env(args: &[&str], env: &str) -> Output {
    rollsafe()
        .arg("render")
        .args(args)
        .env("REFERENCED_CONFIG_ROLLOUT", env)
        .output()
        .unwrap()
}

fn run_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = rollsafe()
        .arg("render")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn transcript(output: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        output.status.code().unwrap_or(-1),
        text(&output.stdout),
        text(&output.stderr)
    )
}

macro_rules! golden {
    ($name:expr, $output:expr) => {
        insta::with_settings!({snapshot_path => "render/snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!($name, transcript(&$output));
        })
    };
}

fn read(name: &str) -> String {
    std::fs::read_to_string(data_dir().join(name)).unwrap()
}

/// The value of `key: value` lines in YAML output.
fn annotation_values(yaml: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}: ");
    yaml.lines()
        .filter_map(|line| line.trim().strip_prefix(&prefix))
        .map(|v| v.trim_matches('"').to_owned())
        .collect()
}

// ---- golden transcripts -----------------------------------------------------------------------

#[test]
fn openchoreo_fixtures_upstream_mode() {
    for name in [
        "rendered-resources.yaml",
        "rendered-resources-with-config-helpers.yaml",
    ] {
        let output = run(&["--workload-type", "deployment", name]);
        assert_eq!(output.status.code(), Some(0));
        let stdout = text(&output.stdout);
        let hashes = annotation_values(&stdout, HASH);
        assert_eq!(hashes.len(), 1, "{name}");
        assert!(!hashes[0].is_empty());
        // Stable: the same input gives the same output, and rendering the output again too.
        assert_eq!(
            run(&["--workload-type", "deployment", name]).stdout,
            output.stdout
        );
        let again = run_stdin(&["--workload-type", "deployment"], &stdout);
        assert_eq!(text(&again.stdout), stdout);
        // Without a workload type, the single Deployment gets the same value.
        assert_eq!(run(&[name]).stdout, output.stdout);
        golden!(name.trim_end_matches(".yaml"), output);
    }
}

#[test]
fn shapes_and_types_are_kept() {
    let output = run(&["shapes.yaml"]);
    golden!("shapes", output);
    let upstream = run(&["--workload-type", "statefulset", "shapes.yaml"]);
    golden!("shapes-statefulset", upstream);
}

#[test]
fn stdin_as_a_helm_post_renderer() {
    let input = read("shapes.yaml");
    let from_file = run(&["shapes.yaml"]);
    assert_eq!(run_stdin(&[], &input).stdout, from_file.stdout);
    assert_eq!(run_stdin(&["-"], &input).stdout, from_file.stdout);
}

#[test]
fn several_files_are_one_render() {
    let output = run(&["settings-deployment.yaml", "shapes.yaml"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    assert_eq!(stdout.matches("kind: Deployment").count(), 2);
    // Both Deployments see the resources of both files.
    let hashes = annotation_values(&stdout, HASH);
    assert_eq!(hashes.len(), 3);
    assert_eq!(hashes[0], hashes[1]);
}

#[test]
fn invalid_yaml_names_file_and_document_and_prints_nothing() {
    let output = run(&["shapes.yaml", "invalid-yaml.yaml"]);
    assert!(output.stdout.is_empty());
    assert!(!text(&output.stderr).contains("do-not-print-me"));
    golden!("invalid-yaml", output);
}

#[test]
fn invalid_restart_on_change_names_the_resource() {
    let output = run(&[
        "--referenced-config-rollout",
        "invalid-restart-on-change.yaml",
    ]);
    assert!(output.stdout.is_empty());
    golden!("invalid-restart-on-change", output);
    // Not validated while the setting is off.
    let off = run(&["invalid-restart-on-change.yaml"]);
    assert_eq!(off.status.code(), Some(0));
}

#[test]
fn missing_spec_is_a_render_error() {
    let output = run(&["missing-spec.yaml"]);
    assert!(output.stdout.is_empty());
    golden!("missing-spec", output);
}

#[test]
fn the_seed_trait_example_as_written() {
    let output = run(&[
        "--referenced-config-rollout=true",
        "--previous",
        "/dev/null",
        "--patches",
        "no-restart-trait.yaml",
        "rendered-resources.yaml",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    // Every ConfigMap, Secret and ExternalSecret got "false"; the label-only maps got
    // an annotations map created.
    assert_eq!(
        annotation_values(&stdout, "openchoreo.dev/restart-on-change"),
        vec!["false"; 6]
    );
    golden!("trait-patches", output);
}

#[test]
fn usage_errors_exit_2() {
    for (name, args) in [
        (
            "bad-workload-type",
            vec!["--workload-type", "cronjob", "shapes.yaml"],
        ),
        (
            "bad-flag-value",
            vec!["--referenced-config-rollout=yes", "shapes.yaml"],
        ),
        (
            "empty-flag-value",
            vec!["--referenced-config-rollout=", "shapes.yaml"],
        ),
        (
            "missing-previous",
            vec!["--previous", "no-such-file.yaml", "shapes.yaml"],
        ),
        (
            "missing-patches",
            vec!["--patches", "no-such-file.yaml", "shapes.yaml"],
        ),
        (
            "bad-patches",
            vec!["--patches", "shapes.yaml", "shapes.yaml"],
        ),
        (
            "empty-key",
            vec!["--fingerprint-key-file", "/dev/null", "shapes.yaml"],
        ),
    ] {
        let output = run(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{name}: {}",
            transcript(&output)
        );
        assert!(output.stdout.is_empty(), "{name}");
        if !name.starts_with("bad-workload") && !name.contains("flag-value") {
            golden!(format!("usage-{name}"), output);
        }
    }
}

// ---- the setting --------------------------------------------------------------------------------

fn mode_is_on(output: &Output) -> bool {
    assert_eq!(output.status.code(), Some(0), "{}", transcript(output));
    text(&output.stdout).contains(STATE)
}

#[test]
fn setting_parse_table() {
    let file = ["--previous", "/dev/null", "shapes.yaml"];
    for value in ["1", "t", "T", "TRUE", "true", "True"] {
        assert!(mode_is_on(&run_env(&file, value)), "env {value}");
        let flag = format!("--referenced-config-rollout={value}");
        assert!(
            mode_is_on(&run(&[&flag, file[0], file[1], file[2]])),
            "flag {value}"
        );
    }
    for value in ["0", "f", "F", "FALSE", "false", "False"] {
        assert!(!mode_is_on(&run_env(&file, value)), "env {value}");
        let flag = format!("--referenced-config-rollout={value}");
        assert!(
            !mode_is_on(&run(&[&flag, file[0], file[1], file[2]])),
            "flag {value}"
        );
    }
    // Unset or empty: off. A bare flag: on. The flag wins over a valid env value.
    assert!(!mode_is_on(&run(&file)));
    assert!(!mode_is_on(&run_env(&file, "")));
    assert!(mode_is_on(&run(&[
        "--referenced-config-rollout",
        file[0],
        file[1],
        file[2]
    ])));
    assert!(!mode_is_on(&run_env(
        &[
            "--referenced-config-rollout=false",
            file[0],
            file[1],
            file[2]
        ],
        "true"
    )));
    assert!(mode_is_on(&run_env(
        &["--referenced-config-rollout=1", file[0], file[1], file[2]],
        "0"
    )));
    // As in Go, `--flag false` is the bare flag followed by a file named "false".
    let output = run(&["--referenced-config-rollout", "false"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("false: cannot open"),
        "{}",
        transcript(&output)
    );
    // Flag values outside the table are usage errors.
    for value in ["yes", "on", " true", "", "2"] {
        let flag = format!("--referenced-config-rollout={value}");
        assert_eq!(
            run(&[&flag, "shapes.yaml"]).status.code(),
            Some(2),
            "{value:?}"
        );
    }
}

#[test]
fn invalid_env_value_stops_even_with_the_flag() {
    for value in ["yes", "on", " true", "tRuE", "2"] {
        for flag in [
            None,
            Some("--referenced-config-rollout"),
            Some("--referenced-config-rollout=false"),
        ] {
            let mut args = Vec::from_iter(flag);
            args.push("shapes.yaml");
            let output = run_env(&args, value);
            assert_eq!(output.status.code(), Some(2), "{value:?} {flag:?}");
            assert!(output.stdout.is_empty());
            let stderr = text(&output.stderr);
            assert!(stderr.contains("REFERENCED_CONFIG_ROLLOUT"), "{stderr}");
            assert!(stderr.contains(&format!("{value:?}")), "{stderr}");
        }
    }
    golden!(
        "env-invalid-with-flag",
        run_env(&["--referenced-config-rollout=true", "shapes.yaml"], "yes")
    );
}

// ---- a sequence of renders through files ------------------------------------------------------

struct Workdir(PathBuf);

impl Workdir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("rollsafe-render-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    fn write(&self, name: &str, content: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, content).unwrap();
        path
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Renders `input` with the previous output, stores the new output, returns the Deployment hash.
fn step(dir: &Workdir, input: &str, extra: &[&str]) -> String {
    let input_path = dir.write("input.yaml", input);
    let previous = dir.path("last.yaml");
    if !Path::new(&previous).exists() {
        std::fs::write(&previous, "").unwrap();
    }
    let mut args: Vec<&str> = vec!["--previous", &previous];
    args.extend_from_slice(extra);
    args.push(&input_path);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let stdout = text(&output.stdout);
    std::fs::write(&previous, &stdout).unwrap();
    annotation_values(&stdout, HASH).pop().unwrap_or_default()
}

#[test]
fn promises_through_the_cli() {
    let dir = Workdir::new("promises");
    let base = read("rendered-resources.yaml");
    let on = ["--referenced-config-rollout"];
    let h0 = step(&dir, &base, &[]);
    // 1. Turning the setting on restarts nothing.
    assert_eq!(step(&dir, &base, &on), h0);
    // A change to the ExternalSecret the pods use restarts (spec.target.name).
    let changed = base.replace("key: prod/db", "key: prod/db2");
    let h1 = step(&dir, &changed, &on);
    assert_ne!(h1, h0);
    // 2. Attaching the opt-out trait restarts nothing, and changes are then ignored.
    let trait_args = [
        "--referenced-config-rollout",
        "--patches",
        "no-restart-trait.yaml",
    ];
    let trait_path = data_dir()
        .join("no-restart-trait.yaml")
        .display()
        .to_string();
    let trait_args = [trait_args[0], trait_args[1], trait_path.as_str()];
    assert_eq!(step(&dir, &changed, &trait_args), h1);
    let changed_again = changed.replace("LOG_LEVEL: error", "LOG_LEVEL: debug");
    assert_eq!(step(&dir, &changed_again, &trait_args), h1);
    // Removing the trait restarts nothing either.
    assert_eq!(step(&dir, &changed_again, &on), h1);
    // 4. Removing a referenced ConfigMap restarts.
    let start = changed_again.find("- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: test-component-dev-12345678-config-app-properties").unwrap();
    let end = changed_again[start + 1..].find("- apiVersion").unwrap() + start + 1;
    let removed = format!("{}{}", &changed_again[..start], &changed_again[end..]);
    let h2 = step(&dir, &removed, &on);
    assert_ne!(h2, h1);
    // 3. Turning the setting off restarts once (something changed while it was on).
    let h3 = step(&dir, &removed, &[]);
    assert_ne!(h3, h2);
    assert_eq!(step(&dir, &removed, &[]), h3);
    // The default-mode value is the upstream one, whatever happened before.
    let fresh = run_stdin(&["--workload-type", "deployment"], &removed);
    assert_eq!(annotation_values(&text(&fresh.stdout), HASH), vec![h3]);
}

#[test]
fn fingerprint_key_keeps_digests_keyed() {
    let dir = Workdir::new("key");
    let key = dir.write("key", "a long random key\n");
    let out = run(&[
        "--referenced-config-rollout",
        "--previous",
        "/dev/null",
        "--fingerprint-key-file",
        &key,
        "shapes.yaml",
    ]);
    let keyed = annotation_values(&text(&out.stdout), STATE);
    let out = run(&[
        "--referenced-config-rollout",
        "--previous",
        "/dev/null",
        "shapes.yaml",
    ]);
    let unkeyed = annotation_values(&text(&out.stdout), STATE);
    assert_eq!(keyed.len(), 2);
    assert_eq!(unkeyed.len(), 2);
    for (keyed, unkeyed) in keyed.iter().zip(&unkeyed) {
        assert!(!keyed.contains("key=none"), "{keyed}");
        assert!(unkeyed.contains("key=none"), "{unkeyed}");
        let digest = unkeyed.rsplit(':').next().unwrap();
        assert!(!keyed.contains(digest));
    }
}

// ---- values the renderer does not own -------------------------------------------------------

#[test]
fn integers_beyond_64_bits_are_written_as_the_input_wrote_them() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\nspec:\n  huge: 100000000000000000000000000000000000000000000\n  negative: -123456789012345678901234567890\n  list: [340282366920938463463374607431768211457, 7]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:1\n        args: [12345678901234567890123456789]\n";
    for args in [
        &[][..],
        &["--referenced-config-rollout", "--previous", "/dev/null"][..],
    ] {
        let output = run_stdin(args, input);
        assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
        let stdout = text(&output.stdout);
        for literal in [
            "huge: 100000000000000000000000000000000000000000000",
            "negative: -123456789012345678901234567890",
            "- 340282366920938463463374607431768211457",
            "- 12345678901234567890123456789",
        ] {
            assert!(stdout.contains(literal), "{literal}: {stdout}");
        }
        assert!(!stdout.contains("e+"), "{stdout}");
        // And again: the output is a fixed point.
        let again = run_stdin(args, &stdout);
        assert_eq!(text(&again.stdout), stdout);
    }
}

#[test]
fn a_workload_without_a_template_beside_another_kind_renders_to_a_fixed_point() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"1\"\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers: [{name: app, envFrom: [{configMapRef: {name: cfg}}]}]\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  replicas: 1\n";
    let once = run_stdin(&[], input);
    assert_eq!(once.status.code(), Some(0), "{}", transcript(&once));
    let twice = run_stdin(&[], &text(&once.stdout));
    assert_eq!(text(&twice.stdout), text(&once.stdout));
}

// ---- DaemonSets and CronJobs --------------------------------------------------------------------

fn daemon_set_input(creds: &str, unrelated: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: env\ndata:\n  a: \"1\"\n\
---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unrelated\ndata:\n  a: \"{unrelated}\"\n\
---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\ndata:\n  p: {creds}\n\
---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers: [{{name: app, envFrom: [{{configMapRef: {{name: env}}}}]}}]\n\
---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  updateStrategy:\n    type: OnDelete\n  template:\n    metadata:\n      annotations: {{}}\n    spec:\n      containers: [{{name: agent}}]\n      volumes: [{{name: creds, secret: {{secretName: creds}}}}]\n\
---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: report\nspec:\n  schedule: \"@daily\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{{name: job, envFrom: [{{configMapRef: {{name: env}}}}]}}]\n"
    )
}

/// The hash annotation of the object of `kind` in a render's output, from its pod template.
fn stamp(yaml: &str, kind: &str) -> Option<String> {
    let manifest = rollsafe_manifest::Manifest::parse(yaml).unwrap();
    let pointer = match kind {
        "CronJob" => "/spec/jobTemplate/spec/template/metadata/annotations",
        _ => "/spec/template/metadata/annotations",
    };
    manifest
        .objects()
        .find(|(_, o)| o["kind"] == kind)
        .and_then(|(_, o)| o.pointer(pointer)?.get(HASH)?.as_str().map(str::to_owned))
}

#[test]
fn daemon_sets_and_cron_jobs_are_annotated_and_deployments_keep_their_value() {
    let input = daemon_set_input("c2VjcmV0", "u");
    let output = run_stdin(&["-n", "shop"], &input);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let stdout = text(&output.stdout);
    let agent = stamp(&stdout, "DaemonSet");
    let report = stamp(&stdout, "CronJob");
    assert!(agent.is_some() && report.is_some(), "{stdout}");
    assert!(
        stdout.contains("rollsafe.dev/pod-template-stamp"),
        "{stdout}"
    );
    // The Deployment's value is the one upstream's one-workload mode gives, which leaves the
    // DaemonSet and CronJob as they are.
    let upstream = run_stdin(&["--workload-type", "deployment"], &input);
    assert_eq!(upstream.status.code(), Some(0), "{}", transcript(&upstream));
    let upstream_stdout = text(&upstream.stdout);
    assert_eq!(
        stamp(&stdout, "Deployment"),
        stamp(&upstream_stdout, "Deployment")
    );
    assert_eq!(stamp(&upstream_stdout, "DaemonSet"), None);
    assert_eq!(stamp(&upstream_stdout, "CronJob"), None);
    assert!(upstream.stderr.is_empty(), "{}", transcript(&upstream));
    // A render of the output gives the output.
    let again = run_stdin(&["-n", "shop"], &stdout);
    assert_eq!(text(&again.stdout), stdout);
    // The DaemonSet rolls only as its pods are deleted: said once on stderr, for people.
    assert_eq!(
        text(&output.stderr),
        "rollsafe: warning: DaemonSet shop/agent has updateStrategy OnDelete: its pod template's \
         annotation is written, but its pods are replaced only as they are deleted\n"
    );
    // For programs, when asked: the JSON object alone, once.
    let json = run_stdin(&["-n", "shop", "--log-format", "json"], &input);
    let stderr = text(&json.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stderr).unwrap(),
        serde_json::json!({"warning": "rollsOnDelete", "kind": "DaemonSet", "namespace": "shop", "name": "agent"})
    );
    assert_eq!(json.stdout, output.stdout);
    // Without a release namespace, the namespace is unknown.
    let bare = run_stdin(&["--log-format", "json"], &input);
    assert!(
        text(&bare.stderr).contains(r#""namespace":null"#),
        "{}",
        transcript(&bare)
    );
    assert_eq!(bare.stdout, output.stdout);
}

#[test]
fn referenced_mode_rolls_a_daemon_set_with_the_secret_it_mounts() {
    let dir = tempfile::tempdir().unwrap();
    let previous = dir.path().join("previous.yaml");
    let render = |input: &str, previous_output: &str| {
        std::fs::write(&previous, previous_output).unwrap();
        let output = run_stdin(
            &[
                "--referenced-config-rollout",
                "--previous",
                previous.to_str().unwrap(),
                "-n",
                "shop",
            ],
            input,
        );
        assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
        assert!(
            !text(&output.stderr).contains("has no previous copy"),
            "{}",
            transcript(&output)
        );
        text(&output.stdout)
    };
    let installed = text(&run_stdin(&[], &daemon_set_input("c2VjcmV0", "u")).stdout);
    let on = render(&daemon_set_input("c2VjcmV0", "u"), &installed);
    for kind in ["Deployment", "DaemonSet", "CronJob"] {
        assert_eq!(
            stamp(&on, kind),
            stamp(&installed, kind),
            "{kind}: turning it on"
        );
    }
    let unrelated = render(&daemon_set_input("c2VjcmV0", "v"), &on);
    for kind in ["Deployment", "DaemonSet", "CronJob"] {
        assert_eq!(
            stamp(&unrelated, kind),
            stamp(&on, kind),
            "{kind}: an unrelated change"
        );
    }
    let rotated = render(&daemon_set_input("bmV3", "v"), &unrelated);
    assert_ne!(stamp(&rotated, "DaemonSet"), stamp(&unrelated, "DaemonSet"));
    assert_eq!(
        stamp(&rotated, "Deployment"),
        stamp(&unrelated, "Deployment")
    );
    assert_eq!(stamp(&rotated, "CronJob"), stamp(&unrelated, "CronJob"));
    // The output renders to itself against itself.
    assert_eq!(render(&rotated, &rotated), rotated);
}
