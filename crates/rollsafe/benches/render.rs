//! Render benchmark: `cargo bench -p rollsafe --bench render`.
//!
//! Generates a ~10 MB stream of ~2,000 resources (200 components: a Deployment, four
//! ConfigMaps, a Secret, an ExternalSecret, a Service, an HTTPRoute and a NetworkPolicy each) and
//! measures, in the same run:
//!
//! - baseline: parse the stream and write it back, without hashing;
//! - default mode: parse, plan and apply the annotations, write back;
//! - referenced mode: the same plus parsing the previous output (`--previous`);
//! - the hash alone: the Go-compatible dump into FNV-1a, FNV-1a over the dumped bytes, and
//!   SHA-256 over the same bytes.
//!
//! - peak memory: the release binary's peak RSS (`/usr/bin/time -f %M`) for `refs`, default
//!   `render` and referenced `render` on a generated stream of `ROLLSAFE_BENCH_RSS_MB` MB
//!   (default 200), printed against the input size.
//!
//! Prints medians and the ratios against the baseline; the baseline and the two render modes
//! are measured in interleaved rounds. No assertions: figures only.

// The stream is generated here, so a failure to parse or render it is a bug in this file.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use rollsafe_core::render::{self, RenderSettings, dump, hash};

use rollsafe_manifest::{Manifest, ManifestSet};
use serde_json::Value;
use sha2::{Digest, Sha256};

const COMPONENTS: usize = 200;
const RUNS: usize = 5;
/// Rounds of the interleaved comparison against the baseline.
const ROUNDS: usize = 11;

fn generate() -> String {
    generate_components(COMPONENTS)
}

fn generate_components(components: usize) -> String {
    let mut out = String::new();
    let filler = |seed: usize, len: usize| -> String {
        let mut text = String::with_capacity(len);
        let mut state = seed as u64 * 2_654_435_761 + 1;
        while text.len() < len {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            text.push_str(&format!("key{:x}=value{:x}\n", state >> 40, state >> 20));
        }
        text
    };
    for c in 0..components {
        let ns = format!("team-{}", c % 10);
        for i in 0..4 {
            out.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-{c}-config-{i}\n  namespace: {ns}\n  labels:\n    app: app-{c}\ndata:\n  app.properties: |\n"
            ));
            for line in filler(c * 10 + i, 10_000).lines() {
                out.push_str("    ");
                out.push_str(line);
                out.push('\n');
            }
            out.push_str("  replicas: \"3\"\n  enabled: \"true\"\n");
        }
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: app-{c}-creds\n  namespace: {ns}\ntype: Opaque\ndata:\n  password: {}\n",
            "c2VjcmV0".repeat(100)
        ));
        out.push_str(&format!(
            "---\napiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n  name: app-{c}-es\n  namespace: {ns}\nspec:\n  refreshInterval: 15s\n  secretStoreRef:\n    name: vault\n    kind: ClusterSecretStore\n  target:\n    name: app-{c}-remote\n  data:\n  - secretKey: token\n    remoteRef:\n      key: apps/{c}\n      property: token\n"
        ));
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app-{c}\n  namespace: {ns}\nspec:\n  selector:\n    app: app-{c}\n  ports:\n  - port: 80\n    targetPort: 8080\n    protocol: TCP\n"
        ));
        out.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: app-{c}\n  namespace: {ns}\nspec:\n  hostnames: [\"app-{c}.example.com\"]\n  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: /}}\n    backendRefs:\n    - name: app-{c}\n      port: 80\n      weight: 1.5\n"
        ));
        out.push_str(&format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: app-{c}\n  namespace: {ns}\nspec:\n  podSelector:\n    matchLabels:\n      app: app-{c}\n  ingress:\n  - ports:\n    - port: 8080\n"
        ));
        out.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{c}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: app-{c}\n  template:\n    metadata:\n      labels:\n        app: app-{c}\n    spec:\n      initContainers:\n      - name: proxy\n        image: proxy:1\n        restartPolicy: Always\n        envFrom:\n        - configMapRef:\n            name: app-{c}-config-0\n      containers:\n      - name: main\n        image: app:{c}\n        resources:\n          requests:\n            cpu: 100m\n            memory: 128Mi\n        env:\n        - name: TOKEN\n          valueFrom:\n            secretKeyRef:\n              name: app-{c}-remote\n              key: token\n        envFrom:\n        - configMapRef:\n            name: app-{c}-config-1\n        volumeMounts:\n        - name: creds\n          mountPath: /etc/creds\n      volumes:\n      - name: creds\n        secret:\n          secretName: app-{c}-creds\n"
        ));
    }
    out
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn measure(mut f: impl FnMut()) -> Duration {
    f(); // warm-up
    median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// Runs each of `runs` once to warm up, then [`ROUNDS`] rounds of each in turn, each round
/// starting one later; the median of each.
fn measure_interleaved<const N: usize>(mut runs: [&mut dyn FnMut(); N]) -> [Duration; N] {
    for run in runs.iter_mut() {
        run();
    }
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(ROUNDS));
    for round in 0..ROUNDS {
        for step in 0..N {
            let index = (round + step) % N;
            let start = Instant::now();
            runs[index]();
            samples[index].push(start.elapsed());
        }
    }
    samples.map(median)
}

/// The command's pipeline: parse the inputs into a set, render it, write it back (in default
/// mode through `render::pipeline`, threaded as the command does): the stream's pieces in
/// default mode, its documents in referenced mode.
fn render_stream(text: &str, previous: Option<&str>, settings: &RenderSettings) -> Vec<String> {
    let mut set = ManifestSet::new();
    set.read_input("<bench>", text.as_bytes(), u64::MAX)
        .expect("generated stream parses");
    if !settings.referenced_config_rollout {
        // As the command does: the hash beside the writing.
        return rollsafe_render::render_default(set, settings.workload_type)
            .expect("render succeeds");
    }
    let previous = previous.map(|p| {
        let mut previous = ManifestSet::new();
        previous
            .read_input("<previous>", p.as_bytes(), u64::MAX)
            .expect("previous parses");
        previous
    });
    let previous: Option<Vec<&Value>> = previous.as_ref().map(ManifestSet::objects);
    render::render(&mut set.objects_mut(), previous.as_deref(), settings).expect("render succeeds");
    drop(previous);
    set.into_yaml_documents().expect("emits")
}

/// Peak RSS in bytes of the binary run with `args` (stdout discarded), or why not.
fn peak_rss(args: &[&str]) -> Result<u64, String> {
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        return Err("/usr/bin/time is missing".to_owned());
    }
    let output = std::process::Command::new(time)
        .args(["-f", "%M", env!("CARGO_BIN_EXE_rollsafe")])
        .args(args)
        .env_remove("REFERENCED_CONFIG_ROLLOUT")
        .env("KUBECONFIG", "/nonexistent")
        .stdout(std::process::Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("exit {:?}", output.status.code()));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let kilobytes: u64 = stderr
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| "no figure from /usr/bin/time".to_owned())?;
    Ok(kilobytes * 1024)
}

fn memory() {
    let megabytes: usize = std::env::var("ROLLSAFE_BENCH_RSS_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // ~49.5 kB per component.
    let text = generate_components(megabytes * 1_000_000 / 49_500);
    let dir = std::env::temp_dir().join(format!("rollsafe-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let input = dir.join("input.yaml");
    std::fs::write(&input, &text).expect("write input");
    let previous = dir.join("previous.yaml");
    let rendered = std::process::Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args([
            "render",
            "--referenced-config-rollout",
            "--previous",
            "/dev/null",
        ])
        .arg(&input)
        .env_remove("REFERENCED_CONFIG_ROLLOUT")
        .env("KUBECONFIG", "/nonexistent")
        .stderr(std::process::Stdio::null())
        .output()
        .expect("render runs");
    std::fs::write(&previous, &rendered.stdout).expect("write previous");
    let input_bytes = text.len() as u64;
    drop(text);
    let input = input.to_str().expect("utf-8 path");
    let previous = previous.to_str().expect("utf-8 path");
    println!(
        "peak RSS against an input of {:.1} MB:",
        input_bytes as f64 / 1e6
    );
    for (name, args) in [
        ("refs", vec!["refs", input]),
        ("render (default mode)", vec!["render", input]),
        (
            "render (referenced, --previous of the same size)",
            vec![
                "render",
                "--referenced-config-rollout",
                "--previous",
                previous,
                input,
            ],
        ),
    ] {
        match peak_rss(&args) {
            Ok(bytes) => println!(
                "  {name:<50} {:>8.1} MB  ratio {:.2}",
                bytes as f64 / 1e6,
                bytes as f64 / input_bytes as f64
            ),
            Err(why) => println!("  {name:<50} skipped: {why}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}

fn main() {
    let text = generate();
    let manifest = Manifest::parse(&text).expect("generated stream parses");
    let resources = manifest.objects().count();
    println!(
        "stream: {:.1} MB, {resources} resources, {COMPONENTS} Deployments",
        text.len() as f64 / 1e6
    );

    let default = RenderSettings::default();
    let referenced = RenderSettings {
        referenced_config_rollout: true,
        ..RenderSettings::default()
    };
    let previous = render_stream(&text, Some(""), &referenced).join("---\n");

    // Interleaved rounds: drift in the machine's speed falls on the three alike.
    let [baseline, default_time, referenced_time] = measure_interleaved([
        &mut || {
            // Written as the command writes: document by document, each dropped once written.
            let manifest = Manifest::read(black_box(text.as_bytes()), u64::MAX).expect("parses");
            let written: Vec<String> = manifest
                .documents
                .into_iter()
                .filter_map(|document| document.to_yaml().expect("emits"))
                .collect();
            black_box(written);
        },
        &mut || {
            black_box(render_stream(black_box(&text), None, &default));
        },
        &mut || {
            black_box(render_stream(
                black_box(&text),
                Some(&previous),
                &referenced,
            ));
        },
    ]);

    println!("baseline parse + emit:            {baseline:>10.2?}");
    println!(
        "default mode render:              {default_time:>10.2?}  ratio {:.3}",
        default_time.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "referenced mode render (+previous): {referenced_time:>8.2?}  ratio {:.3}",
        referenced_time.as_secs_f64() / baseline.as_secs_f64()
    );

    // The engine alone (plan + apply on already parsed streams), against the same baseline.
    let parsed_previous = Manifest::parse(&previous).expect("previous parses");
    let engine = |settings: &RenderSettings, previous: Option<&Manifest>| {
        let mut manifest = manifest.clone();
        let previous: Option<Vec<&Value>> = previous.map(|m| m.objects().map(|(_, o)| o).collect());
        let mut objects: Vec<&mut Value> = manifest.objects_mut().map(|(_, o)| o).collect();
        render::render(&mut objects, previous.as_deref(), settings).expect("render succeeds");
        black_box(manifest);
    };
    let clone_only = measure(|| {
        black_box(manifest.clone());
    });
    let engine_default = measure(|| engine(&default, None));
    let engine_referenced = measure(|| engine(&referenced, Some(&parsed_previous)));
    println!(
        "engine only, default (plan + apply):    {:>8.2?}  ratio {:.4}",
        engine_default.saturating_sub(clone_only),
        engine_default.saturating_sub(clone_only).as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "engine only, referenced (plan + apply): {:>8.2?}  ratio {:.4}",
        engine_referenced.saturating_sub(clone_only),
        engine_referenced.saturating_sub(clone_only).as_secs_f64() / baseline.as_secs_f64()
    );

    // The hash alone, over every resource of the stream.
    let objects: Vec<_> = manifest
        .objects()
        .filter_map(|(_, o)| o.as_object())
        .map(|o| (o, dump::Strip::Metadata))
        .collect();
    let mut dumped = Vec::new();
    dump::write_list(
        &mut dumped,
        objects.iter().copied(),
        dump::NumberType::Float64,
    );
    let dump_and_fnv = measure(|| {
        black_box(hash::hash_objects(
            objects.iter().copied(),
            dump::NumberType::Float64,
        ));
    });
    let fnv = measure(|| {
        black_box(hash::Fnv32a::hash(black_box(&dumped)));
    });
    let sha = measure(|| {
        black_box(Sha256::digest(black_box(&dumped)));
    });
    let bytes = dumped.len();
    println!("hash input (Go dump): {:.1} MB", bytes as f64 / 1e6);
    println!(
        "dump + FNV-1a:  {dump_and_fnv:>10.2?}  {:>8.0} MB/s",
        mb_per_s(bytes, dump_and_fnv)
    );
    println!(
        "FNV-1a 32:      {fnv:>10.2?}  {:>8.0} MB/s",
        mb_per_s(bytes, fnv)
    );
    println!(
        "SHA-256:        {sha:>10.2?}  {:>8.0} MB/s",
        mb_per_s(bytes, sha)
    );
    println!(
        "FNV-1a / SHA-256 throughput ratio: {:.2}",
        sha.as_secs_f64() / fnv.as_secs_f64()
    );

    memory();
}
