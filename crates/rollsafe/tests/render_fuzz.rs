//! Property and mutation tests of `refs` and `render` over the real manifests in
//! `tests/fixtures/real-manifests`: mutated windows of real streams must never panic, an error
//! must never echo input text, and rendering an output again must give the same output.
//!
//! Bounded, on stable Rust, inside `cargo test`: each case takes a window of at most
//! [`MAX_WINDOW`] bytes of whole documents from one fixture and applies at most
//! [`MAX_MUTATIONS`] text mutations (and possibly one structural one); the case counts are fixed.
//! The in-process properties run the library code the command runs (`ManifestSet`, the render
//! step, the reference extraction); a smaller property runs the binary itself.
//!
//! A case that ever failed is kept as a file in `tests/render/fuzz-regressions/` and checked
//! by `regression_cases` with the same checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use rollsafe_core::annotations::RESTART_ON_CHANGE as RESTART_ON_CHANGE_ANNOTATION;
use rollsafe_core::reference;
use rollsafe_core::render::{self, RenderSettings, WorkloadType};
use rollsafe_core::workload::WorkloadKind;
use rollsafe_manifest::{Manifest, ManifestSet};
use serde_json::{Value, json};

/// The largest window of a fixture one case reads.
const MAX_WINDOW: usize = 24 * 1024;
/// The most text mutations of one case.
const MAX_MUTATIONS: usize = 6;
/// A string no fixture holds: where it lands in the input, it must not come out in an error.
const CANARY: &str = "qz7canary9xj";

fn fixtures() -> &'static [(String, String)] {
    static FIXTURES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    FIXTURES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-manifests");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(!text.contains(CANARY));
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    text,
                )
            })
            .collect()
    })
}

/// Whole documents of `text` from the `start`-th, up to [`MAX_WINDOW`] bytes (at least one).
fn window(text: &str, start: usize) -> String {
    let mut documents: Vec<&str> = Vec::new();
    let mut begin = 0;
    for (offset, _) in text.match_indices("\n---") {
        documents.push(&text[begin..=offset]);
        begin = offset + 1;
    }
    documents.push(&text[begin..]);
    let start = start % documents.len();
    let mut out = String::new();
    for document in &documents[start..] {
        if !out.is_empty() && out.len() + document.len() > MAX_WINDOW {
            break;
        }
        out.push_str(document);
    }
    if out.len() > MAX_WINDOW {
        let mut end = MAX_WINDOW;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// One text mutation; positions are taken modulo the text's length.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Duplicate(usize, usize),
    Insert(usize, &'static str),
    SwapLines(usize, usize),
    Indent(usize, bool),
    Truncate(usize),
    Canary(usize),
}

const TOKENS: &[&str] = &[
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "\t",
    "\n",
    "\n---\n",
    "\n...\n",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!binary ",
    "!!str ",
    "? ",
    "|\n",
    ">-\n",
    "null",
    "~",
    "0644",
    "1e400",
    "-.inf",
    "100000000000000000000000000000000000000000000",
    "kind: List\nitems:\n- ",
    "kind: Deployment\n",
    "kind: StatefulSet\n",
    "spec: {}\n",
    "template: null\n",
    "openchoreo.dev/restart-on-change: yes\n",
    "\u{feff}",
    "é",
    "\u{0}",
];

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..64usize).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), 1..256usize).prop_map(|(a, n)| Mutation::Duplicate(a, n)),
        (any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(a, t)| Mutation::Insert(a, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<usize>(), any::<bool>()).prop_map(|(a, b)| Mutation::Indent(a, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        any::<usize>().prop_map(Mutation::Canary),
    ]
}

fn boundary(text: &str, at: usize) -> usize {
    let mut at = if text.is_empty() {
        0
    } else {
        at % (text.len() + 1)
    };
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(text: &mut String, mutation: &Mutation) {
    match *mutation {
        Mutation::Delete(at, len) => {
            let start = boundary(text, at);
            let end = boundary(text, start.saturating_add(len).min(text.len()));
            text.replace_range(start..end.max(start), "");
        }
        Mutation::Duplicate(at, len) => {
            let start = boundary(text, at);
            let end = boundary(text, start.saturating_add(len).min(text.len())).max(start);
            let piece = text[start..end].to_owned();
            text.insert_str(end, &piece);
        }
        Mutation::Insert(at, token) => {
            let at = boundary(text, at);
            text.insert_str(at, token);
        }
        Mutation::SwapLines(a, b) => {
            let mut lines: Vec<&str> = text.split('\n').collect();
            let (a, b) = (a % lines.len(), b % lines.len());
            lines.swap(a, b);
            *text = lines.join("\n");
        }
        Mutation::Indent(line, deeper) => {
            let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
            let line = line % lines.len();
            if deeper {
                lines[line].insert_str(0, "  ");
            } else if let Some(rest) = lines[line].strip_prefix("  ") {
                lines[line] = rest.to_owned();
            }
            *text = lines.join("\n");
        }
        Mutation::Truncate(at) => {
            let at = boundary(text, at);
            text.truncate(at);
        }
        Mutation::Canary(at) => {
            let at = boundary(text, at);
            text.insert_str(at, CANARY);
        }
    }
}

/// A structural mutation of a parsed stream: the kinds and shapes the engine cares about.
#[derive(Debug, Clone)]
enum Shape {
    None,
    Kind(usize, &'static str),
    DropTemplate(usize),
    NullField(usize, &'static str),
    WrapInList(usize),
    Mark(usize, Value),
    SecretValue(usize),
    /// A workload of the other kind, without a pod template, beside the others.
    OtherKindWithoutTemplate(usize),
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        3 => Just(Shape::None),
        1 => (any::<usize>(), prop::sample::select(&["Deployment", "StatefulSet", "List", "DaemonSet", "ConfigMap"][..]))
            .prop_map(|(i, k)| Shape::Kind(i, k)),
        1 => any::<usize>().prop_map(Shape::DropTemplate),
        1 => (any::<usize>(), prop::sample::select(&["/metadata", "/spec", "/spec/template", "/spec/template/metadata", "/metadata/annotations"][..]))
            .prop_map(|(i, p)| Shape::NullField(i, p)),
        1 => any::<usize>().prop_map(Shape::WrapInList),
        1 => (any::<usize>(), prop::sample::select(vec![json!("true"), json!("false"), json!(true), json!(CANARY), json!(1)]))
            .prop_map(|(i, v)| Shape::Mark(i, v)),
        1 => any::<usize>().prop_map(Shape::SecretValue),
        2 => any::<usize>().prop_map(Shape::OtherKindWithoutTemplate),
    ]
}

/// Applies a structural mutation to the text, when it parses; the result is written back as
/// JSON documents (also YAML).
fn reshape(text: &str, shape: &Shape) -> String {
    if matches!(shape, Shape::None) {
        return text.to_owned();
    }
    let Ok(manifest) = Manifest::parse(text) else {
        return text.to_owned();
    };
    let mut objects: Vec<Value> = manifest.objects().map(|(_, o)| o.clone()).collect();
    if objects.is_empty() {
        return text.to_owned();
    }
    let n = objects.len();
    match shape {
        Shape::None => {}
        Shape::Kind(i, kind) => {
            objects[i % n]["kind"] = json!(kind);
            if *kind == "List" {
                objects[i % n]["items"] = json!([objects[(i + 1) % n].clone()]);
            }
        }
        Shape::DropTemplate(i) => {
            if let Some(spec) = objects[i % n]
                .get_mut("spec")
                .and_then(Value::as_object_mut)
            {
                spec.shift_remove("template");
            }
        }
        Shape::NullField(i, pointer) => {
            if let Some(field) = objects[i % n].pointer_mut(pointer) {
                *field = Value::Null;
            }
        }
        Shape::WrapInList(i) => {
            let inner = objects[i % n].clone();
            objects[i % n] = json!({"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": [inner]}]});
        }
        Shape::Mark(i, value) => {
            let object = &mut objects[i % n];
            if object.get("metadata").is_some_and(Value::is_object) {
                object["metadata"]["annotations"] =
                    json!({ RESTART_ON_CHANGE_ANNOTATION: value.clone() });
            }
        }
        Shape::SecretValue(i) => {
            objects[i % n]["data"] = json!({"password": CANARY});
        }
        Shape::OtherKindWithoutTemplate(i) => {
            let is_workload =
                |o: &Value| matches!(o["kind"].as_str(), Some("Deployment" | "StatefulSet"));
            let workload = (0..n)
                .map(|k| (i + k) % n)
                .find(|&j| is_workload(&objects[j]));
            let source = match workload {
                Some(j) => objects[j].clone(),
                None => {
                    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "added"},
                        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}});
                    objects.push(deployment.clone());
                    deployment
                }
            };
            let mut other = source;
            let kind = match other.get("kind").and_then(Value::as_str) {
                Some("Deployment") => "StatefulSet",
                _ => "Deployment",
            };
            other["kind"] = json!(kind);
            match other.get_mut("spec").and_then(Value::as_object_mut) {
                Some(spec) => {
                    spec.shift_remove("template");
                }
                None => other["spec"] = json!({}),
            }
            objects.push(other);
        }
    }
    objects
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Text an error may repeat: the kind, namespace and name of objects (messages name the
/// resource) and `restart-on-change` values (its message shows the bad value).
fn allowed_echoes(text: &str) -> BTreeSet<String> {
    let mut allowed = BTreeSet::new();
    let Ok(manifest) = Manifest::parse(text) else {
        return allowed;
    };
    for (_, object) in manifest.objects() {
        for pointer in ["/kind", "/metadata/name", "/metadata/namespace"] {
            if let Some(text) = object.pointer(pointer).and_then(Value::as_str) {
                allowed.insert(text.to_owned());
            }
        }
        if let Some(value) = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(RESTART_ON_CHANGE_ANNOTATION))
        {
            allowed.insert(value.to_string());
        }
    }
    allowed
}

fn assert_no_echo(text: &str, message: &str) {
    if !message.contains(CANARY) {
        return;
    }
    let allowed = allowed_echoes(text);
    assert!(
        allowed.iter().any(|a| a.contains(CANARY)),
        "an error echoed input text: {message}"
    );
}

/// `rollsafe refs` on `text`, in process: the same library calls the command makes.
fn check_refs(text: &str) {
    let mut set = ManifestSet::new();
    match set.parse_input("<stdin>", text) {
        Err(error) => assert_no_echo(text, &error.to_string()),
        Ok(()) => {
            for object in set.objects() {
                if WorkloadKind::of_object(object).is_some() {
                    let template = reference::pod_template(object).unwrap_or(&Value::Null);
                    let references = reference::extract(template);
                    let _ = reference::referenced_config(template);
                    serde_json::to_string(&references).unwrap();
                }
            }
        }
    }
}

fn settings(which: u8) -> (RenderSettings, bool) {
    let workload_type = match which % 3 {
        0 => None,
        1 => Some(WorkloadType::Deployment),
        _ => Some(WorkloadType::StatefulSet),
    };
    let referenced = which / 3 % 2 == 1;
    let stateful = which / 6 % 2 == 1;
    (
        RenderSettings {
            workload_type,
            referenced_config_rollout: referenced,
            fingerprint_key: None,
            release_namespace: Some("default".to_owned()),
        },
        stateful,
    )
}

/// `rollsafe render` on `text`, in process, and again on its output.
fn check_render(text: &str, which: u8) {
    let (settings, stateful) = settings(which);
    let mut set = ManifestSet::new();
    // As the command reads its inputs: a document at a time.
    if let Err(error) = set.read_input("<stdin>", text.as_bytes(), u64::MAX) {
        assert_no_echo(text, &error.to_string());
        return;
    }
    let empty: Vec<&Value> = Vec::new();
    let previous = stateful.then_some(empty.as_slice());
    // The command's default-mode pipeline (hashing beside the writing) must write exactly what
    // planning and applying in one step and then writing gives, or fail with the same message.
    let pipelined = (!settings.referenced_config_rollout).then(|| {
        rollsafe_render::render_default(set.clone(), settings.workload_type)
            .map(|stream| stream.concat())
            .map_err(|error| error.to_string())
    });
    if let Err(error) = render::render(&mut set.objects_mut(), previous, &settings) {
        let message = match set.locate(error.index()) {
            Some(origin) => format!("{origin}: {error}"),
            None => error.to_string(),
        };
        assert_no_echo(text, &message);
        if let Some(pipelined) = pipelined {
            assert_eq!(pipelined, Err(message), "the pipeline failed otherwise");
        }
        return;
    }
    let once = match set.clone().into_yaml() {
        Ok(once) => once,
        Err(error) => {
            assert_no_echo(text, &error.to_string());
            if let Some(pipelined) = pipelined {
                assert_eq!(
                    pipelined,
                    Err(error.to_string()),
                    "the pipeline failed otherwise"
                );
            }
            return;
        }
    };
    if let Some(pipelined) = pipelined {
        assert_eq!(
            pipelined.as_ref(),
            Ok(&once),
            "the pipeline wrote another output"
        );
    }
    // The output reads back as the same objects, and renders to itself.
    let mut again = ManifestSet::new();
    again
        .parse_input("<output>", &once)
        .unwrap_or_else(|e| panic!("the output does not parse: {e}\n{once}"));
    assert_eq!(
        again.objects(),
        set.objects(),
        "the output reads back as other values:\n{once}"
    );
    let previous_objects = set.objects();
    let previous = stateful.then_some(previous_objects.as_slice());
    render::render(&mut again.objects_mut(), previous, &settings)
        .unwrap_or_else(|e| panic!("the output does not render: {e}"));
    let twice = again.into_yaml().unwrap();
    assert_eq!(twice, once, "rendering the output again changed it");
}

fn case_text(fixture: usize, start: usize, mutations: &[Mutation], shape: &Shape) -> String {
    let (_, text) = &fixtures()[fixture % fixtures().len()];
    let mut text = window(text, start);
    for mutation in mutations {
        mutate(&mut text, mutation);
    }
    reshape(&text, shape)
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn refs_and_render_hold_on_mutated_real_manifests(
        fixture in any::<usize>(),
        start in any::<usize>(),
        mutations in prop::collection::vec(arb_mutation(), 0..=MAX_MUTATIONS),
        shape in arb_shape(),
        which in any::<u8>(),
    ) {
        let text = case_text(fixture, start, &mutations, &shape);
        check_refs(&text);
        check_render(&text, which);
    }
}

#[test]
fn every_real_manifest_renders_to_a_fixed_point() {
    for (name, text) in fixtures() {
        for which in 0..12 {
            let text = window(text, 0);
            check_render(&text, which);
            let _ = name;
        }
    }
}

/// Every case that once failed, with the same checks.
#[test]
fn regression_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/render/fuzz-regressions");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        check_refs(&text);
        for which in 0..12 {
            check_render(&text, which);
        }
        count += 1;
    }
    assert!(count > 0);
}

// ---- the binary ------------------------------------------------------------------------------

fn rollsafe(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(args)
        .env_remove("REFERENCED_CONFIG_ROLLOUT")
        .env_remove("HELM_NAMESPACE")
        .env("KUBECONFIG", "/nonexistent/rollsafe-test-kubeconfig")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A write error means the command stopped reading early: its exit status says why.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn the_binary_never_panics_nor_echoes(
        fixture in any::<usize>(),
        start in any::<usize>(),
        mutations in prop::collection::vec(arb_mutation(), 0..=MAX_MUTATIONS),
        shape in arb_shape(),
        referenced in any::<bool>(),
    ) {
        let text = case_text(fixture, start, &mutations, &shape);
        let mut render_args = vec!["render"];
        if referenced {
            render_args.extend(["--referenced-config-rollout", "--previous", "/dev/null"]);
        }
        for args in [vec!["refs"], render_args] {
            let output = rollsafe(&args, &text);
            let code = output.status.code();
            prop_assert!(matches!(code, Some(0 | 1)), "{args:?}: exit {code:?}: {}", String::from_utf8_lossy(&output.stderr));
            if code == Some(1) {
                prop_assert!(output.stdout.is_empty());
                assert_no_echo(&text, &String::from_utf8_lossy(&output.stderr));
            }
        }
    }
}
