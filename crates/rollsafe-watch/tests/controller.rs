//! The controller against the in-process emulator, over real watches.

#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rollsafe_emulator::{Fault, FaultAction, RunningEmulator};
use rollsafe_kube::Connection;
use rollsafe_testing::{Source, TestCluster, Workload, secret_key_ref};
use rollsafe_watch::windows::WallClock;
use rollsafe_watch::{Controller, ControllerSettings, Fingerprinter};

mod common;
use common::Running;
use common::scenario::{Expect, Scenario, Step, opted_in, two_workloads};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const NS: &str = "shop";
const DEADLINE: Duration = Duration::from_secs(60);

struct Env {
    emu: RunningEmulator,
    connection: Connection,
    kubeconfig: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn start(seeds: Vec<Value>) -> Env {
        let TestCluster {
            emu,
            connection,
            kubeconfig,
            dir,
        } = TestCluster::start(seeds).await;
        Env {
            emu,
            connection,
            kubeconfig,
            _dir: dir,
        }
    }

    fn controller(&self, settings: ControllerSettings) -> Running {
        Running::spawn(Controller::new(self.connection.client(None), settings))
    }

    fn patches(&self, resource: &str, name: &str) -> Vec<rollsafe_emulator::RequestLogEntry> {
        self.emu
            .requests_for("patch", resource)
            .into_iter()
            .filter(|r| r.name.as_deref() == Some(name))
            .collect()
    }

    fn rollouts(&self, name: &str) -> usize {
        self.emu
            .rollouts()
            .iter()
            .filter(|r| r.name == name)
            .count()
    }

    fn put(&self, object: impl Into<Value>) {
        self.emu.put_object(object.into()).unwrap();
    }

    fn workload(&self, resource: &str, name: &str) -> Value {
        self.emu.get_object(resource, Some(NS), name).unwrap()
    }
}

fn settings() -> ControllerSettings {
    ControllerSettings {
        debounce: Duration::from_millis(50),
        ..ControllerSettings::default()
    }
}

/// Changes `other`, then waits until `api` rolled: every event before it has been handled.
async fn barrier(env: &Env, running: &mut Running, value: &str) {
    let rolls = running.status.borrow().rolls;
    env.put(Source::secret(NS, "other").data(&[("k", value)]));
    running
        .until("the barrier roll", |s| s.rolls > rolls && s.pending == 0)
        .await;
}

#[tokio::test]
async fn adoption_writes_the_record_and_rolls_nothing() {
    let mut seeds = two_workloads();
    seeds.push(
        Workload::stateful_set("db-sts")
            .namespace(NS)
            .with_replicas()
            .watch("true")
            .env_secret_key("P", "db", "password")
            .build(),
    );
    let env = Env::start(seeds).await;
    let mut running = env.controller(settings());
    let status = running
        .until("three adoptions", |s| s.adoptions == 3 && s.pending == 0)
        .await;
    assert_eq!(status.rolls, 0);
    assert!(env.emu.rollouts().is_empty(), "{:?}", env.emu.rollouts());
    let web = env.workload("deployments", "web");
    let record = web["metadata"]["annotations"]["rollsafe.dev/config-record"]
        .as_str()
        .unwrap();
    assert!(record.starts_with("v1:"), "{record}");
    assert!(
        web.pointer("/spec/template/metadata/annotations/rollsafe.dev~1config-hash")
            .is_none()
    );
    let patch = &env.patches("deployments", "web")[0];
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    assert_eq!(
        patch.query_param("fieldManager").as_deref(),
        Some("rollsafe-watch")
    );
    assert_eq!(env.patches("statefulsets", "db-sts").len(), 1);
    running.stop().await;
}

/// A Secret `name` (key `k`) opted out by `annotation` = `false`, and Deployment `quiet-app`
/// reading it.
fn opted_out(name: &str, annotation: &str) -> Vec<Value> {
    vec![
        Source::secret(NS, name)
            .data(&[("k", "1")])
            .annotate(annotation, "false")
            .build(),
        opted_in("quiet-app").env_from_secret(name).build(),
    ]
}

/// `db` with `password` and `user` as [`two_workloads`] seeds it, `annotations` on it.
fn db(password: &str, user: &str, annotations: Value) -> Value {
    Source::secret(NS, "db")
        .data(&[("password", password), ("user", user)])
        .annotations(annotations)
        .build()
}

fn adopted(s: &rollsafe_watch::Status) -> bool {
    s.adoptions == 3 && s.pending == 0
}

/// What rolls (once) and what does not: one row per kind of change.
#[tokio::test]
async fn changes_roll_once_or_not_at_all() {
    use Step::{Delete, Put, Rollouts, Until};
    let quiet = Source::secret(NS, "quiet").annotate("rollsafe.dev/watch", "false");
    let choreo = Source::secret(NS, "choreo").annotate("openchoreo.dev/restart-on-change", "false");
    let mut all_opted_out = two_workloads();
    all_opted_out.push(quiet.clone().data(&[("k", "1")]).build());
    all_opted_out.push(choreo.clone().data(&[("k", "1")]).build());
    all_opted_out.push(
        opted_in("quiet-app")
            .env_from_secret("quiet")
            .env_from_secret("choreo")
            .build(),
    );
    let relabelled = Source::secret(NS, "db")
        .data(&[("password", "hunter2"), ("user", "app")])
        .annotate("note", "x")
        .label("team", "payments")
        .build();
    // The adoptions' patches only.
    let unchanged = |patches| Expect {
        rollouts: &[("web", 0), ("api", 0), ("quiet-app", 0)],
        patches,
        ..Expect::default()
    };
    common::scenario::run(vec![
        Scenario {
            name: "a changed referenced key rolls once, with one patch",
            seeds: two_workloads(),
            settings: settings(),
            change: vec![
                Until("adoptions", adopted),
                Put(db("changed", "app", json!({}))),
                Until("a roll", |s| s.rolls == 1 && s.pending == 0),
            ],
            // The patch's own watch event is evaluated and changes nothing.
            expect: Expect {
                rollouts: &[("web", 1), ("api", 0)],
                patches: &[("web", 2)],
                hashed: &["web"],
                ..Expect::default()
            },
        },
        Scenario {
            name: "a ConfigMap and a Secret changed together roll once",
            seeds: vec![
                Source::secret(NS, "db").data(&[("password", "a")]).build(),
                Source::config_map(NS, "settings")
                    .data(&[("level", "info")])
                    .build(),
                opted_in("web")
                    .env_secret_key("P", "db", "password")
                    .env_from_config_map("settings")
                    .build(),
            ],
            settings: ControllerSettings {
                debounce: Duration::from_secs(3),
                ..ControllerSettings::default()
            },
            change: vec![
                Until("adoption", |s| s.adoptions == 2 && s.pending == 0),
                Put(Source::config_map(NS, "settings")
                    .data(&[("level", "debug")])
                    .build()),
                Put(Source::secret(NS, "db").data(&[("password", "b")]).build()),
                Until("one roll", |s| s.rolls == 1 && s.pending == 0),
            ],
            expect: Expect {
                rollouts: &[("web", 1)],
                patches: &[("web", 2)],
                ..Expect::default()
            },
        },
        Scenario {
            name: "labels and annotations only roll nothing",
            seeds: two_workloads(),
            settings: settings(),
            change: vec![Until("adoptions", adopted), Put(relabelled.clone())],
            expect: unchanged(&[("web", 1)]),
        },
        Scenario {
            name: "a key the workload does not read rolls nothing",
            seeds: two_workloads(),
            settings: settings(),
            change: vec![
                Until("adoptions", adopted),
                Put(db("hunter2", "root", json!({}))),
            ],
            expect: unchanged(&[("web", 1)]),
        },
        Scenario {
            name: "a Secret opted out with rollsafe.dev/watch rolls nothing",
            seeds: [two_workloads(), opted_out("quiet", "rollsafe.dev/watch")].concat(),
            settings: settings(),
            change: vec![
                Until("adoptions", |s| s.adoptions == 4 && s.pending == 0),
                Put(quiet.clone().data(&[("k", "2")]).build()),
            ],
            expect: unchanged(&[("web", 1), ("quiet-app", 1)]),
        },
        Scenario {
            name: "a Secret opted out with openchoreo.dev/restart-on-change rolls nothing",
            seeds: [
                two_workloads(),
                opted_out("choreo", "openchoreo.dev/restart-on-change"),
            ]
            .concat(),
            settings: settings(),
            change: vec![
                Until("adoptions", |s| s.adoptions == 4 && s.pending == 0),
                Put(choreo.clone().data(&[("k", "2")]).build()),
            ],
            expect: unchanged(&[("web", 1), ("quiet-app", 1)]),
        },
        Scenario {
            // A window long enough that the changes join the evaluation of the adoptions' own
            // echoes: what the first list saw must not be reported as changed.
            name: "metadata, an unreferenced key and opted-out sources, in the adoptions' echo, roll nothing",
            seeds: all_opted_out,
            settings: ControllerSettings {
                debounce: Duration::from_secs(1),
                ..ControllerSettings::default()
            },
            change: vec![
                Until("adoptions", |s| s.adoptions == 4),
                Put(relabelled),
                Put(db("hunter2", "root", json!({"note": "x"}))),
                Put(quiet.data(&[("k", "2")]).build()),
                Put(choreo.data(&[("k", "2")]).build()),
            ],
            expect: unchanged(&[("web", 1), ("quiet-app", 1)]),
        },
        Scenario {
            name: "a source deleted and recreated (same content, new uid) rolls once",
            seeds: two_workloads(),
            settings: settings(),
            change: vec![
                Until("adoptions", adopted),
                Delete("secrets", "db"),
                Until("the deletion is seen", |s| s.withheld >= 1 && s.pending == 0),
                // A missing source never rolls.
                Rollouts(&[("web", 0)]),
                Put(db("hunter2", "app", json!({}))),
                Until("a roll", |s| s.rolls == 1 && s.pending == 0),
            ],
            expect: Expect {
                rollouts: &[("web", 1)],
                ..Expect::default()
            },
        },
    ])
    .await;
}

/// Opting a source out and back in rolls nothing; what it holds when back in is the new
/// baseline. One row per opt-out annotation.
#[tokio::test]
async fn toggling_a_sources_opt_out_rolls_nothing() {
    use Step::{Barrier, Put, Rollouts, Until};
    let row = |name, annotation: &str| Scenario {
        name,
        seeds: two_workloads(),
        // The barrier rolls many times: no flap stop here.
        settings: ControllerSettings {
            flap_limit: rollsafe_watch::limits::FlapLimit {
                rolls: 0,
                window: Duration::from_secs(60),
            },
            ..settings()
        },
        change: vec![
            Until("adoptions", adopted),
            // A change rolls.
            Put(db("p0", "app", json!({}))),
            Barrier,
            Rollouts(&[("web", 1)]),
            // Opting out, unchanged: nothing rolls.
            Put(db("p0", "app", json!({annotation: "false"}))),
            Barrier,
            Rollouts(&[("web", 1)]),
            // A change while opted out: nothing rolls.
            Put(db("while-out", "app", json!({annotation: "false"}))),
            Barrier,
            Rollouts(&[("web", 1)]),
            // Opting back in: nothing rolls.
            Put(db("while-out", "app", json!({}))),
            Barrier,
            Rollouts(&[("web", 1)]),
            // The next change rolls once.
            Put(db("after", "app", json!({}))),
        ],
        expect: Expect {
            rollouts: &[("web", 2)],
            ..Expect::default()
        },
    };
    common::scenario::run(vec![
        row(
            "opting out with rollsafe.dev/watch and back in",
            "rollsafe.dev/watch",
        ),
        row(
            "opting out with openchoreo.dev/restart-on-change and back in",
            "openchoreo.dev/restart-on-change",
        ),
    ])
    .await;
}

#[tokio::test]
async fn a_restart_sends_no_patch_and_a_missed_change_rolls_once() {
    let env = Env::start(two_workloads()).await;
    let mut first = env.controller(settings());
    first
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    first.stop().await;
    env.emu.clear_requests();

    // Restart with nothing changed: zero patches.
    let mut second = env.controller(settings());
    let status = second.settled().await;
    assert!(status.evaluations >= 2, "{status:?}");
    assert!(env.emu.requests_for("patch", "deployments").is_empty());
    second.stop().await;

    // A change while no controller runs: exactly one roll after the start.
    env.put(Source::secret(NS, "db").data(&[("password", "rotated"), ("user", "app")]));
    let mut third = env.controller(settings());
    third
        .until("the missed roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    barrier(&env, &mut third, "3").await;
    assert_eq!(env.rollouts("web"), 1);
    assert_eq!(env.patches("deployments", "web").len(), 1);
    third.stop().await;
}

#[tokio::test]
async fn a_concurrent_edit_is_not_retried_blindly_and_converges() {
    let env = Env::start(two_workloads()).await;
    let mut running = env.controller(settings());
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    env.emu.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .name("web")
            .nth(1)
            .then(FaultAction::ConcurrentEdit { patch: None }),
    );
    env.emu.clear_requests();
    env.put(Source::secret(NS, "db").data(&[("password", "changed"), ("user", "app")]));
    let status = running
        .until("the roll after the conflict", |s| {
            s.rolls == 1 && s.pending == 0
        })
        .await;
    assert_eq!(status.conflicts, 1, "{status:?}");
    // One refused patch, then one computed from the next observed state — never the same
    // request resent.
    let patches = env.patches("deployments", "web");
    assert_eq!(patches.len(), 2);
    assert_ne!(patches[0].status, 200);
    assert_eq!(env.rollouts("web"), 1);
    running.stop().await;
}

#[tokio::test]
async fn dry_run_sends_nothing() {
    let env = Env::start(two_workloads()).await;
    let mut running = env.controller(ControllerSettings {
        dry_run: true,
        ..settings()
    });
    running
        .until("dry-run adoptions", |s| s.dry_run == 2 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "db").data(&[("password", "changed"), ("user", "app")]));
    running
        .until("a dry-run roll", |s| s.dry_run == 3 && s.pending == 0)
        .await;
    assert!(env.emu.requests_for("patch", "deployments").is_empty());
    assert!(env.emu.rollouts().is_empty());
    running.stop().await;
}

#[tokio::test]
async fn a_compacted_watch_relists_without_spurious_rolls() {
    let env = Env::start(two_workloads()).await;
    // Watches end after a second; kube resumes each from its last resourceVersion, which the
    // compaction made too old: 410, then a relist.
    let mut running = env.controller(ControllerSettings {
        watch_timeout: 1,
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    env.emu.compact();
    running
        .until("relists after the 410", |s| {
            s.relists >= 3 && s.watch_errors >= 3
        })
        .await;
    barrier(&env, &mut running, "2").await;
    barrier(&env, &mut running, "3").await;
    assert_eq!(env.rollouts("web"), 0);
    assert_eq!(env.patches("deployments", "web").len(), 1);
    running.stop().await;
}

/// Against a server that serves streaming lists, every watch starts with one (no paged list
/// at all), a compacted watch starts over with one, and the controller behaves as with paged
/// lists: adoption without a roll, no spurious roll after the relist, one roll per change.
#[tokio::test]
async fn streaming_lists_start_every_watch_and_change_nothing_else() {
    let TestCluster {
        emu,
        connection,
        kubeconfig,
        dir,
    } = TestCluster::start_with(
        rollsafe_emulator::Emulator::builder()
            .watch_list(true)
            .seed_objects(two_workloads()),
    )
    .await;
    let env = Env {
        emu,
        connection,
        kubeconfig,
        _dir: dir,
    };
    let mut running = env.controller(ControllerSettings {
        streaming_lists: true,
        watch_timeout: 1,
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    for resource in [
        "secrets",
        "configmaps",
        "deployments",
        "statefulsets",
        "daemonsets",
    ] {
        assert!(
            env.emu.requests_for("list", resource).is_empty(),
            "no paged list of {resource}"
        );
        let watches = env.emu.requests_for("watch", resource);
        assert!(
            watches.iter().any(|w| {
                w.query_param("sendInitialEvents").as_deref() == Some("true")
                    && w.query_param("resourceVersionMatch").as_deref() == Some("NotOlderThan")
            }),
            "{resource}: {watches:?}"
        );
    }
    env.emu.compact();
    running
        .until("relists after the 410", |s| {
            s.relists >= 3 && s.watch_errors >= 3
        })
        .await;
    barrier(&env, &mut running, "2").await;
    assert_eq!(env.rollouts("web"), 0, "no roll from the relist");
    assert!(env.emu.requests_for("list", "secrets").is_empty());
    env.put(Source::secret(NS, "db").data(&[("password", "changed"), ("user", "app")]));
    running
        .until("a roll after the barrier's", |s| {
            s.rolls == 2 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("web"), 1);
    assert_eq!(env.rollouts("api"), 1, "the barrier's roll only");
    running.stop().await;
}

#[tokio::test]
async fn a_keyed_digest_is_published_as_v1k() {
    let env = Env::start(two_workloads()).await;
    let mut running = env.controller(ControllerSettings {
        fingerprinter: Fingerprinter::keyed(b"0123456789abcdef0123").unwrap(),
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    let web = env.workload("deployments", "web");
    let record = web["metadata"]["annotations"]["rollsafe.dev/config-record"]
        .as_str()
        .unwrap();
    assert!(record.starts_with("v1k:"), "{record}");
    running.stop().await;
}

/// Events in the namespace about `name` with `reason`, as stored (core v1 view).
fn events(env: &Env, name: &str, reason: &str) -> Vec<Value> {
    env.emu
        .list_objects("events", Some(NS))
        .into_iter()
        .filter(|e| e["reason"] == reason && e["involvedObject"]["name"] == name)
        .collect()
}

#[tokio::test]
async fn a_roll_is_announced_by_an_event_naming_objects_only() {
    let mut seeds = two_workloads();
    // Consumes db and other; only db changes.
    seeds.push(
        opted_in("pair")
            .env_secret_key("P", "db", "password")
            .env_from_secret("other")
            .build(),
    );
    let env = Env::start(seeds).await;
    // A window long enough that the change joins the evaluation of the adoptions' own echoes:
    // what the first list saw must not be reported as changed.
    let mut running = env.controller(ControllerSettings {
        debounce: Duration::from_secs(1),
        ..ControllerSettings::default()
    });
    running.until("adoptions", |s| s.adoptions == 3).await;
    env.put(Source::secret(NS, "db").data(&[("password", "s3cr3t-value"), ("user", "app")]));
    running
        .until("two rolls and their events", |s| {
            s.rolls == 2 && s.events >= 2
        })
        .await;
    // Other Events (a followed rollout's end) count too: wait for the two Rolled ones.
    poll("both Rolled events", || {
        !events(&env, "pair", "Rolled").is_empty() && !events(&env, "web", "Rolled").is_empty()
    })
    .await;
    let pair = events(&env, "pair", "Rolled");
    assert_eq!(pair.len(), 1, "{pair:?}");
    let note = pair[0]["message"].as_str().unwrap();
    assert_eq!(note, "Rolled for changes to Secret/db");
    let rolled = events(&env, "web", "Rolled");
    assert_eq!(rolled.len(), 1, "{rolled:?}");
    let text = rolled[0].to_string();
    assert!(text.contains("Secret/db"), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
    assert_eq!(rolled[0]["type"], "Normal");

    // A roll for another object is an Event of its own, naming its own cause (not a repeat
    // of the first, whose note would name Secret/db).
    env.put(Source::secret(NS, "other").data(&[("token", "t2")]));
    running
        .until(
            "the rolls for Secret/other (pair and api) and their events",
            |s| s.rolls == 4 && s.events >= 4 && s.pending == 0,
        )
        .await;
    poll("pair's second Rolled event", || {
        events(&env, "pair", "Rolled").len() == 2
    })
    .await;
    let mut notes: Vec<String> = events(&env, "pair", "Rolled")
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    notes.sort();
    assert_eq!(
        notes,
        [
            "Rolled for changes to Secret/db",
            "Rolled for changes to Secret/other"
        ]
    );
    let related: Vec<Value> = events(&env, "pair", "Rolled")
        .iter()
        .map(|e| e["related"]["name"].clone())
        .collect();
    assert!(related.contains(&json!("other")), "{related:?}");

    // What a user debugging the roll reads: `kubectl describe` lists each cause's Event.
    if let Some(kubectl) = rollsafe_testing::kubectl() {
        // On a blocking thread: the emulator answers on this test's runtime.
        let kubeconfig = env.kubeconfig.clone();
        let describe = kubectl.clone();
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(describe)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["-n", NS, "describe", "deployment", "pair"])
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        let described = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{described}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for note in [
            "Rolled for changes to Secret/db",
            "Rolled for changes to Secret/other",
        ] {
            assert!(described.contains(note), "{note} in: {described}");
        }
        assert!(!described.contains("s3cr3t"), "{described}");
        // `kubectl rollout history` shows each roll's cause (`kubernetes.io/change-cause`,
        // set in the roll's own patch).
        let kubeconfig = env.kubeconfig.clone();
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["-n", NS, "rollout", "history", "deployment", "pair"])
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        let history = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{history}");
        for cause in [
            "rollsafe watch: rolled for changes to Secret/db",
            "rollsafe watch: rolled for changes to Secret/other",
        ] {
            assert!(history.contains(cause), "{cause} in: {history}");
        }
    }
    running.stop().await;

    // A change made while no controller runs: the next one names it from the records.
    env.put(Source::secret(NS, "db").data(&[("password", "s3cr3t-third"), ("user", "app")]));
    let mut restarted = env.controller(ControllerSettings::default());
    restarted
        .until("the rolls for the unseen change", |s| {
            s.rolls == 2 && s.events >= 2 && s.pending == 0
        })
        .await;
    for name in ["web", "pair"] {
        let notes: Vec<Value> = events(&env, name, "Rolled")
            .iter()
            .map(|e| e["message"].clone())
            .collect();
        assert!(
            notes
                .iter()
                .all(|note| note
                    != "Rolled: what it consumes changed while rollsafe was not watching"),
            "{name}: {notes:?}"
        );
        assert!(
            notes.contains(&json!("Rolled for changes to Secret/db")),
            "{name}: {notes:?}"
        );
    }
    restarted.stop().await;
}

#[tokio::test]
async fn paused_and_on_delete_workloads_are_patched_and_said_so() {
    let mut paused = opted_in("paused")
        .env_secret_key("P", "db", "password")
        .build();
    paused["spec"]["paused"] = json!(true);
    let mut on_delete = Workload::daemon_set("agent")
        .namespace(NS)
        .watch("true")
        .env_secret_key("P", "db", "password")
        .build();
    on_delete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let seeds = vec![
        Source::secret(NS, "db").data(&[("password", "a")]).build(),
        paused,
        on_delete,
    ];
    let env = Env::start(seeds).await;
    let mut running = env.controller(settings());
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "db").data(&[("password", "b")]));
    running
        .until("two deferred rolls and their events", |s| {
            s.deferred == 2 && s.events >= 2 && s.pending == 0
        })
        .await;
    let rollouts = env.emu.rollouts();
    assert_eq!(rollouts.len(), 2, "{rollouts:?}");
    assert!(rollouts.iter().all(|r| !r.rolled), "{rollouts:?}");
    for name in ["paused", "agent"] {
        let deferred = events(&env, name, "RolloutDeferred");
        assert_eq!(deferred.len(), 1, "{name}");
        assert_eq!(deferred[0]["type"], "Warning");
    }
    let agent = env.workload("daemonsets", "agent");
    assert!(
        agent
            .pointer("/spec/template/metadata/annotations/rollsafe.dev~1config-hash")
            .is_some()
    );
    running.stop().await;
}

#[tokio::test]
async fn a_flapping_source_halts_the_workload_until_the_annotation_is_removed() {
    let env = Env::start(two_workloads()).await;
    let flapping = || ControllerSettings {
        flap_limit: rollsafe_watch::limits::FlapLimit::parse("2/10m").unwrap(),
        ..settings()
    };
    let mut running = env.controller(flapping());
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    for (round, value) in ["v1", "v2"].iter().enumerate() {
        env.put(Source::secret(NS, "db").data(&[("password", value), ("user", "app")]));
        let rolls = round as u64 + 1;
        running
            .until("a roll", |s| s.rolls == rolls && s.pending == 0)
            .await;
    }
    env.put(Source::secret(NS, "db").data(&[("password", "v3"), ("user", "app")]));
    running
        .until("the halt", |s| s.halts == 1 && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("web"), 2);
    let web = env.workload("deployments", "web");
    assert!(web["metadata"]["annotations"]["rollsafe.dev/halted"].is_string());
    poll("the Halted event", || {
        !events(&env, "web", "Halted").is_empty()
    })
    .await;
    assert_eq!(events(&env, "web", "Halted").len(), 1);
    running.stop().await;

    // The halt survives a restart: further changes roll nothing.
    let mut running = env.controller(flapping());
    running.settled().await;
    env.put(Source::secret(NS, "db").data(&[("password", "v4"), ("user", "app")]));
    barrier(&env, &mut running, "2").await;
    assert_eq!(env.rollouts("web"), 2);

    // Removing the annotation resumes: one roll to the current content.
    let mut web = env.workload("deployments", "web");
    web["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("rollsafe.dev/halted");
    env.put(web);
    running
        .until("the roll after resuming", |s| {
            s.rolls >= 2 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("web"), 3);
    running.stop().await;
}

#[tokio::test]
async fn the_global_rate_limit_postpones_rolls_without_losing_them() {
    let mut seeds = two_workloads();
    seeds.push(
        opted_in("web2")
            .env_secret_key("P", "db", "password")
            .build(),
    );
    let env = Env::start(seeds).await;
    let mut running = env.controller(ControllerSettings {
        max_rolls_per_minute: 120,
        burst: 1,
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 3 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "db").data(&[("password", "x"), ("user", "app")]));
    let status = running
        .until("both rolls", |s| s.rolls == 2 && s.pending == 0)
        .await;
    assert!(status.rate_limited >= 1, "{status:?}");
    assert_eq!(env.rollouts("web") + env.rollouts("web2"), 2);
    running.stop().await;
}

/// One HTTP/1.1 GET over a fresh connection: status code and body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap();
    (code, body)
}

#[tokio::test]
async fn the_admin_listener_serves_metrics_and_readiness() {
    let env = Env::start(two_workloads()).await;
    let (metrics, registry) = registered_metrics();
    // Not started yet: not ready.
    let idle = Controller::new(env.connection.client(None), settings());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let registry = std::sync::Arc::new(registry);
    tokio::spawn(rollsafe_watch::admin::serve(
        listener,
        registry.clone(),
        idle.status(),
        std::future::pending(),
    ));
    assert_eq!(get(addr, "/healthz").await.0, 200);
    assert_eq!(get(addr, "/livez").await.0, 200);
    assert_eq!(get(addr, "/readyz").await.0, 503);
    drop(idle);

    let controller =
        Controller::new(env.connection.client(None), settings()).with_metrics(metrics.clone());
    let mut status = controller.status();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(rollsafe_watch::admin::serve(
        listener,
        registry,
        controller.status(),
        std::future::pending(),
    ));
    let task = tokio::spawn(controller.run(std::future::pending()));
    tokio::time::timeout(
        DEADLINE,
        status.wait_for(|s| s.adoptions == 2 && s.pending == 0),
    )
    .await
    .unwrap()
    .unwrap();
    env.put(Source::secret(NS, "db").data(&[("password", "m"), ("user", "app")]));
    tokio::time::timeout(DEADLINE, status.wait_for(|s| s.rolls == 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(get(addr, "/readyz").await.0, 200);
    let (code, text) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    // Every namespace also holds its `kube-root-ca.crt` ConfigMap, as on a real cluster.
    let namespaces = env.emu.list_objects("namespaces", None).len();
    let sources = format!(
        "rollsafe_watch_objects{{kind=\"source\"}} {}",
        2 + namespaces
    );
    for expected in [
        "rollsafe_watch_rolls_total{kind=\"Deployment\",result=\"adopted\"} 2",
        "rollsafe_watch_rolls_total{kind=\"Deployment\",result=\"rolled\"} 1",
        "rollsafe_watch_reaction_seconds_count 1",
        sources.as_str(),
        "rollsafe_watch_halted 0",
        "rollsafe_watch_synced 1",
    ] {
        assert!(text.contains(expected), "{expected} in\n{text}");
    }
    task.abort();
}

#[tokio::test]
async fn two_replicas_one_leader_and_failover_rolls_nothing_twice() {
    use rollsafe_watch::leader::elect;
    let env = Env::start(two_workloads()).await;
    let replica = |election: &rollsafe_watch::leader::Election| {
        let controller = Controller::new(env.connection.client(None), settings())
            .with_leadership(election.leader.clone());
        Running::spawn(controller)
    };
    let a = elect(env.connection.client(None), &lease("a"))
        .await
        .unwrap();
    let mut first = replica(&a);
    first
        .until("a leads and adopts", |s| {
            s.leader && s.adoptions == 2 && s.pending == 0
        })
        .await;
    let b = elect(env.connection.client(None), &lease("b"))
        .await
        .unwrap();
    let mut second = replica(&b);
    let status = second.settled().await;
    assert!(!status.leader);
    assert!(!b.leader.elected());

    // One change: one roll, by the leader only.
    env.put(Source::secret(NS, "db").data(&[("password", "one"), ("user", "app")]));
    first
        .until("the leader rolls", |s| s.rolls == 1 && s.pending == 0)
        .await;
    second.settled().await;
    assert_eq!(env.rollouts("web"), 1);
    assert_eq!(second.status.borrow().rolls, 0);
    assert_eq!(second.status.borrow().conflicts, 0);

    // The leader dies without releasing the Lease; the other takes over when it expires.
    a.task.abort();
    first.stop().await;
    drop(a);
    second
        .until("the follower takes over", |s| s.leader && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("web"), 1, "taking over rolls nothing");
    env.put(Source::secret(NS, "db").data(&[("password", "two"), ("user", "app")]));
    second
        .until("the new leader rolls", |s| s.rolls == 1 && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("web"), 2);
    second.stop().await;
}

/// `two_workloads` with `web` labelled `team=a`, and `far` (also `team=a`) reading `db` in
/// namespace `elsewhere`.
fn selection_seeds() -> Vec<Value> {
    let mut seeds = two_workloads();
    seeds[2] = opted_in("web")
        .env_secret_key("P", "db", "password")
        .label("team", "a")
        .build();
    seeds.push(
        opted_in("far")
            .namespace("elsewhere")
            .label("team", "a")
            .env_from_secret("db")
            .build(),
    );
    seeds.push(
        Source::secret("elsewhere", "db")
            .data(&[("password", "x")])
            .build(),
    );
    seeds
}

/// What is considered: the namespaces watched and the workload selector, one row each and
/// together. (Each row's `barrier` workload is labelled `team=a` and in the watched namespace.)
#[tokio::test]
async fn namespaces_and_the_selector_limit_what_is_considered() {
    use Step::{Put, Records, Settled, Until};
    common::scenario::run(vec![
        Scenario {
            name: "a namespace list and a selector: only the selected workload of a watched namespace",
            seeds: selection_seeds(),
            settings: ControllerSettings {
                namespaces: vec![NS.to_owned()],
                selector: Some("team=a".to_owned()),
                ..settings()
            },
            change: vec![
                Settled("web (and the barrier) only", |s| {
                    s.adoptions == 2 && s.workloads == 2
                }),
                Records(&[
                    (NS, "web", true),
                    (NS, "api", false),
                    ("elsewhere", "far", false),
                ]),
                // A workload leaving the selection is forgotten (the watch sends DELETED).
                Put(opted_in("web")
                    .env_secret_key("P", "db", "password")
                    .build()),
                Until("web forgotten", |s| s.workloads == 1),
            ],
            expect: Expect {
                records: &[(NS, "api", false), ("elsewhere", "far", false)],
                ..Expect::default()
            },
        },
        Scenario {
            name: "a namespace list alone leaves the other namespaces out",
            seeds: selection_seeds(),
            settings: ControllerSettings {
                namespaces: vec![NS.to_owned()],
                ..settings()
            },
            change: vec![Settled("web, api (and the barrier)", |s| {
                s.adoptions == 3 && s.workloads == 3
            })],
            expect: Expect {
                records: &[(NS, "web", true), (NS, "api", true), ("elsewhere", "far", false)],
                ..Expect::default()
            },
        },
        Scenario {
            name: "a selector alone leaves the unlabelled workloads out, in every namespace",
            seeds: selection_seeds(),
            settings: ControllerSettings {
                selector: Some("team=a".to_owned()),
                ..settings()
            },
            change: vec![Settled("web, far (and the barrier)", |s| {
                s.adoptions == 3 && s.workloads == 3
            })],
            expect: Expect {
                records: &[(NS, "web", true), (NS, "api", false), ("elsewhere", "far", true)],
                ..Expect::default()
            },
        },
    ])
    .await;
}

/// A client whose every request fails while `cut` is set: a replica cut off from the API
/// server on its Lease connection only.
/// The Lease both replicas of a leadership test contend for.
fn lease(identity: &str) -> rollsafe_watch::leader::LeaseSettings {
    rollsafe_watch::leader::LeaseSettings {
        namespace: NS.to_owned(),
        name: "rollsafe-watch".to_owned(),
        identity: identity.to_owned(),
        duration_seconds: 4,
        grace_seconds: 3,
    }
}

fn partitionable(client: kube::Client, cut: Arc<AtomicBool>) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let cut = Arc::clone(&cut);
        async move {
            if cut.load(Ordering::SeqCst) {
                return Err(kube::Error::Service("partitioned".into()));
            }
            client.send(request).await
        }
    });
    kube::Client::new(service, namespace)
}

#[tokio::test]
async fn a_leader_whose_renewals_fail_stops_patching_before_another_takes_over() {
    use rollsafe_watch::leader::elect;
    let env = Env::start(two_workloads()).await;
    // a decides faster than b: without the rule it would patch before b does.
    let replica = |election: &rollsafe_watch::leader::Election, debounce: u64| {
        let settings = ControllerSettings {
            debounce: Duration::from_millis(debounce),
            ..settings()
        };
        let controller = Controller::new(env.connection.client(None), settings)
            .with_leadership(election.leader.clone());
        Running::spawn(controller)
    };
    let cut = Arc::new(AtomicBool::new(false));
    let a = elect(
        partitionable(env.connection.client(None), Arc::clone(&cut)),
        &lease("a"),
    )
    .await
    .unwrap();
    let mut first = replica(&a, 10);
    first
        .until("a leads and adopts", |s| {
            s.leader && s.adoptions == 2 && s.pending == 0
        })
        .await;
    let b = elect(env.connection.client(None), &lease("b"))
        .await
        .unwrap();
    let mut second = replica(&b, 500);
    assert!(!second.settled().await.leader);

    // a can no longer reach the API server for its Lease (it still can for everything else):
    // the election keeps telling it that it leads, but its renewals fail.
    cut.store(true, Ordering::SeqCst);
    first
        .until("a stops leading once its lease is unconfirmed", |s| {
            !s.leader
        })
        .await;
    assert!(a.leader.elected(), "the election alone still says a leads");
    second
        .until("b takes over when the lease expires", |s| {
            s.leader && s.pending == 0
        })
        .await;
    assert!(
        !first.status.borrow().leader,
        "a stopped before b could start"
    );

    // A change now is rolled once, by b; a sends nothing.
    let before = first.status.borrow().evaluations;
    env.put(Source::secret(NS, "db").data(&[("password", "one"), ("user", "app")]));
    second
        .until("b rolls", |s| s.rolls == 1 && s.pending == 0)
        .await;
    let status = first
        .until("a evaluated the change", |s| {
            s.evaluations > before && s.pending == 0
        })
        .await;
    assert_eq!(
        (
            status.rolls,
            status.conflicts,
            status.failures,
            status.adoptions
        ),
        (0, 0, 0, 2),
        "a sent no patch after its lease lapsed: {status:?}"
    );
    assert_eq!(env.rollouts("web"), 1);
    assert_eq!(
        env.patches("deployments", "web").len(),
        2,
        "the adoption and b's roll only"
    );
    first.stop().await;
    second.stop().await;
    a.task.abort();
    b.task.abort();
}

#[tokio::test]
async fn each_roll_is_followed_to_its_end_and_the_outcome_announced() {
    let mut bad = opted_in("bad")
        .env_secret_key("P", "db", "password")
        .build();
    bad["spec"]["progressDeadlineSeconds"] = json!(1);
    let seeds = vec![
        Source::secret(NS, "db")
            .data(&[("password", "hunter2")])
            .build(),
        opted_in("web")
            .env_secret_key("P", "db", "password")
            .build(),
        bad,
    ];
    let env = Env::start(seeds).await;
    // Pods take time; the new revision of `bad` crash-loops past its one-second deadline.
    env.emu
        .change_settings(rollsafe_emulator::RolloutPaceChange {
            pod_ready_millis: Some(200),
            progress_deadline_scale: None,
        })
        .unwrap();
    env.emu.add_fault(
        // The first patch of `bad` adopts it (no template change); the second rolls it.
        rollsafe_emulator::Fault::on("patch", "deployments")
            .name("bad")
            .nth(2)
            .then(rollsafe_emulator::FaultAction::rollout_fails(
                "CrashLoopBackOff",
                "password authentication failed",
            )),
    );
    let (metrics, registry) = registered_metrics();
    let mut running = Running::spawn(
        Controller::new(env.connection.client(None), ControllerSettings::default())
            .with_metrics(metrics),
    );
    running.until("adoptions", |s| s.adoptions == 2).await;
    env.put(Source::secret(NS, "db").data(&[("password", "rotated-s3cr3t")]));
    running
        .until("two rolls, their Events and their outcomes", |s| {
            s.rolls == 2 && s.events >= 4
        })
        .await;
    let complete = events(&env, "web", "RolloutComplete");
    assert_eq!(complete.len(), 1, "{complete:?}");
    assert_eq!(complete[0]["type"], "Normal");
    let note = complete[0]["message"].as_str().unwrap();
    assert!(note.starts_with("Rollout complete after "), "{note}");
    assert!(
        note.ends_with("complete: 1 updated, 1 ready of 1"),
        "{note}"
    );
    let stalled = events(&env, "bad", "RolloutStalled");
    assert_eq!(
        stalled.len(),
        1,
        "{:?}",
        env.emu
            .list_objects("events", Some(NS))
            .iter()
            .map(|e| format!(
                "{} {} {}",
                e["involvedObject"]["name"], e["reason"], e["message"]
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(stalled[0]["type"], "Warning");
    let note = stalled[0]["message"].as_str().unwrap();
    assert!(note.contains("progress deadline exceeded"), "{note}");
    assert!(note.contains("has timed out progressing"), "{note}");
    assert!(events(&env, "bad", "RolloutComplete").is_empty());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for expected in [
        "rollsafe_watch_rollout_seconds_count{kind=\"Deployment\",result=\"complete\"} 1",
        "rollsafe_watch_rollout_seconds_count{kind=\"Deployment\",result=\"stalled\"} 1",
        "rollsafe_watch_rollouts_stalled_total 1",
    ] {
        assert!(text.contains(expected), "{expected} in\n{text}");
    }
    // What a user reads: kubectl describe shows the stall and Kubernetes' reason.
    if let Some(kubectl) = rollsafe_testing::kubectl() {
        let kubeconfig = env.kubeconfig.clone();
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["-n", NS, "describe", "deployment", "bad"])
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        let described = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{described}");
        assert!(described.contains("RolloutStalled"), "{described}");
        assert!(described.contains("Rollout stalled after"), "{described}");
        assert!(!described.contains("s3cr3t"), "{described}");
    }
    running.stop().await;
}

/// Secret `db` (`password` = `password`) annotated `rollsafe.dev/rollout: progressive`.
fn progressive_db(password: &str) -> Source {
    Source::secret(NS, "db")
        .data(&[("password", password)])
        .annotate("rollsafe.dev/rollout", "progressive")
}

/// A progressive `db` read by `consumers` (the first is the canary), whose rollouts stall after
/// a second; pods are ready in 200 ms. The canary's second patch (its first roll) makes a
/// revision whose pods crash-loop with `message`.
async fn progressive_canary(consumers: &[&str], message: &str) -> Env {
    let mut seeds = vec![progressive_db("hunter2").build()];
    seeds.extend(consumers.iter().map(|name| {
        opted_in(name)
            .env_secret_key("P", "db", "password")
            .progress_deadline_seconds(1)
            .build()
    }));
    let env = Env::start(seeds).await;
    env.emu
        .change_settings(rollsafe_emulator::RolloutPaceChange {
            pod_ready_millis: Some(200),
            progress_deadline_scale: None,
        })
        .unwrap();
    env.emu.add_fault(
        rollsafe_emulator::Fault::on("patch", "deployments")
            .name(consumers[0])
            .nth(2)
            .then(rollsafe_emulator::FaultAction::rollout_fails(
                "CrashLoopBackOff",
                message,
            )),
    );
    env
}

/// A Secret annotated `rollsafe.dev/rollout: progressive`: its consumers roll in waves (here a
/// canary, Deployment/api, then the rest). A rotation the canary's pods crash on stops there:
/// the rest keep their record, are never patched and are announced `RolloutHeld`, also after a
/// controller restart (the progression's state is on the workloads). The fixed Secret rolls the
/// canary again, then the held ones once each.
#[tokio::test]
async fn a_progressive_source_stops_a_bad_rotation_at_the_canary_across_a_restart() {
    let env = progressive_canary(&["api", "web", "worker"], "password authentication failed").await;
    let settings = || ControllerSettings {
        debounce: Duration::from_millis(200),
        ..ControllerSettings::default()
    };
    let mut running = env.controller(settings());
    running.until("adoptions", |s| s.adoptions == 3).await;
    env.emu.clear_rollouts();
    let rolled = |name: &str| env.emu.rollouts().iter().filter(|r| r.name == name).count();
    env.put(progressive_db("bad-s3cr3t"));
    running
        .until("the canary rolled and the rest held", |s| {
            s.rolls == 1 && s.held == 2
        })
        .await;
    assert_eq!((rolled("api"), rolled("web"), rolled("worker")), (1, 0, 0));
    // Events are published by their own task, after the step that decided them.
    poll("both RolloutHeld events", || {
        ["web", "worker"]
            .iter()
            .all(|name| !events(&env, name, "RolloutHeld").is_empty())
    })
    .await;
    for name in ["web", "worker"] {
        let held = events(&env, name, "RolloutHeld");
        assert_eq!(held.len(), 1, "{name}: {held:?}");
        assert_eq!(held[0]["type"], "Warning");
        assert_eq!(
            held[0]["message"],
            "Not rolled for changes to Secret/db: the progressive rollout stopped at Deployment/api, whose rollout stalled"
        );
    }
    running.stop().await;

    // A new replica (a restart, or another leader) reads the progression off the workloads:
    // it rolls nothing, and says why once.
    let mut restarted = env.controller(settings());
    restarted
        .until("the held ones held again", |s| s.held == 2)
        .await;
    assert_eq!((rolled("api"), rolled("web"), rolled("worker")), (1, 0, 0));

    // The fixed Secret: the canary rolls to it and completes, then the rest, once each.
    env.put(progressive_db("fixed"));
    restarted
        .until("every consumer rolled for the fix", |s| s.rolls == 3)
        .await;
    poll("the rest completed", || {
        !events(&env, "worker", "RolloutComplete").is_empty()
            && !events(&env, "web", "RolloutComplete").is_empty()
    })
    .await;
    assert_eq!((rolled("api"), rolled("web"), rolled("worker")), (2, 1, 1));
    restarted.stop().await;
}

/// The progression across a leader change: the new leader reads it off the workloads, holds
/// what the old one held, and completes it for the fixed Secret.
#[tokio::test]
async fn a_progression_survives_a_leader_change() {
    use rollsafe_watch::leader::elect;
    let env = progressive_canary(&["api", "web"], "").await;
    let replica = |election: &rollsafe_watch::leader::Election| {
        let controller = Controller::new(env.connection.client(None), settings())
            .with_leadership(election.leader.clone());
        Running::spawn(controller)
    };
    let a = elect(env.connection.client(None), &lease("a"))
        .await
        .unwrap();
    let mut first = replica(&a);
    first
        .until("a leads and adopts", |s| s.leader && s.adoptions == 2)
        .await;
    let b = elect(env.connection.client(None), &lease("b"))
        .await
        .unwrap();
    let mut second = replica(&b);
    second.settled().await;
    env.put(progressive_db("bad"));
    first
        .until("the canary rolled and web held", |s| {
            s.rolls == 1 && s.held == 1
        })
        .await;
    assert_eq!((env.rollouts("api"), env.rollouts("web")), (1, 0));

    // The leader dies; the other takes over and holds web too, rolling nothing.
    a.task.abort();
    first.stop().await;
    drop(a);
    second
        .until("the follower takes over and holds web", |s| {
            s.leader && s.held == 1
        })
        .await;
    assert_eq!((env.rollouts("api"), env.rollouts("web")), (1, 0));
    assert_eq!(second.status.borrow().rolls, 0);

    env.put(progressive_db("fixed"));
    second
        .until("the fix rolls the canary, then web", |s| s.rolls == 2)
        .await;
    assert_eq!((env.rollouts("api"), env.rollouts("web")), (2, 1));
    second.stop().await;
}

/// A cluster migrating from Stakater Reloader: with `--reloader-compat`, Reloader's annotations
/// opt workloads in and sources out with Reloader's meaning; the first run adopts with zero
/// rolls (Reloader's own traces on the workloads change nothing); then each annotation behaves
/// as documented.
#[tokio::test]
async fn reloader_annotations_migrate_with_zero_rolls_then_behave_as_reloaders() {
    let annotated = |name: &str, annotations: Value, env: Value, env_from: Value| {
        Workload::deployment(name)
            .namespace(NS)
            .with_replicas()
            .annotations(annotations)
            .env(env)
            .env_from(env_from)
            .build()
    };
    let seeds = vec![
        Source::secret(NS, "db")
            .data(&[("password", "hunter2")])
            .build(),
        Source::secret(NS, "tls")
            .data(&[("crt", "c1")])
            .annotations(json!({"reloader.stakater.com/ignore": "true"}))
            .build(),
        Source::config_map(NS, "settings")
            .data(&[("mode", "a")])
            .build(),
        // Everything referenced, with Reloader's own traces of earlier reloads on it.
        {
            let mut object = annotated(
                "auto",
                json!({"reloader.stakater.com/auto": "true",
                       "reloader.stakater.com/last-reloaded-from": "{\"kind\":\"SECRET\",\"name\":\"db\"}"}),
                json!([secret_key_ref("P", "db", "password"), {"name": "STAKATER_DB_SECRET", "value": "0f3a"}]),
                json!([{"configMapRef": {"name": "settings"}}]),
            );
            object["spec"]["template"]["metadata"]["annotations"] =
                json!({"reloader.stakater.com/last-reloaded-from": "x"});
            object
        },
        // Only the referenced Secrets.
        annotated(
            "secrets-only",
            json!({"secret.reloader.stakater.com/auto": "true"}),
            json!([secret_key_ref("P", "db", "password")]),
            json!([{"configMapRef": {"name": "settings"}}]),
        ),
        // A named Secret the template does not reference.
        annotated(
            "listed",
            json!({"secret.reloader.stakater.com/reload": "db"}),
            json!([]),
            json!([]),
        ),
        // Opted out.
        annotated(
            "off",
            json!({"reloader.stakater.com/auto": "false"}),
            json!([secret_key_ref("P", "db", "password")]),
            json!([]),
        ),
        // An ignored source; and an annotation rollsafe does not implement (the others are
        // honoured, the warning names it).
        annotated(
            "uses-tls",
            json!({"reloader.stakater.com/auto": "true",
                   "reloader.stakater.com/rollout-strategy": "restart"}),
            json!([secret_key_ref("T", "tls", "crt")]),
            json!([]),
        ),
        // Reloader's annotation on the pod template only, where Reloader does not read it
        // either: not honoured, and said so.
        {
            let mut object = annotated(
                "template-only",
                json!({}),
                json!([secret_key_ref("P", "db", "password")]),
                json!([]),
            );
            object["spec"]["template"]["metadata"]["annotations"] =
                json!({"reloader.stakater.com/auto": "true"});
            object
        },
    ];
    let env = Env::start(seeds).await;
    let mut running = env.controller(ControllerSettings {
        reloader_compat: true,
        ..settings()
    });
    running
        .until("the Reloader-annotated workloads adopted", |s| {
            s.adoptions == 4 && s.pending == 0
        })
        .await;
    let rolls = |name: &str| env.rollouts(name);
    for name in [
        "auto",
        "secrets-only",
        "listed",
        "off",
        "uses-tls",
        "template-only",
    ] {
        assert_eq!(rolls(name), 0, "{name}: migration rolls nothing");
    }
    // What the operator reads: one warning per workload, naming the annotation.
    let unsupported = common::warnings("\"code\":\"reloader_unsupported\"");
    let named = |workload: &str, annotation: &str| {
        unsupported
            .iter()
            .filter(|line| {
                line.contains(&format!("/{workload}\""))
                    && line.contains(&format!("\"annotation\":\"{annotation}\""))
            })
            .count()
    };
    assert_eq!(
        named("uses-tls", "reloader.stakater.com/rollout-strategy"),
        1,
        "{unsupported:#?}"
    );
    assert_eq!(
        named("template-only", "reloader.stakater.com/auto"),
        1,
        "{unsupported:#?}"
    );
    assert!(
        unsupported
            .iter()
            .any(|line| line.contains("on its pod template only")),
        "{unsupported:#?}"
    );
    env.put(Source::secret(NS, "db").data(&[("password", "rotated")]));
    running
        .until("db's consumers rolled", |s| s.rolls == 3 && s.pending == 0)
        .await;
    assert_eq!(
        ["auto", "secrets-only", "listed", "off", "template-only"].map(rolls),
        [1, 1, 1, 0, 0]
    );
    env.put(Source::config_map(NS, "settings").data(&[("mode", "b")]));
    running
        .until("settings' consumers rolled", |s| {
            s.rolls == 4 && s.pending == 0
        })
        .await;
    assert_eq!(["auto", "secrets-only"].map(rolls), [2, 1]);
    env.put(
        Source::secret(NS, "tls")
            .data(&[("crt", "c2")])
            .annotations(json!({"reloader.stakater.com/ignore": "true"})),
    );
    running.settled().await;
    assert_eq!(rolls("uses-tls"), 0, "an ignored Secret rolls nothing");
    running.stop().await;
}

/// The controller's metrics, registered in a fresh registry.
fn registered_metrics() -> (
    rollsafe_watch::metrics::ControllerMetrics,
    prometheus_client::registry::Registry,
) {
    let metrics = rollsafe_watch::metrics::ControllerMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    (metrics, registry)
}

/// Polls `done` until it holds, failing after [`DEADLINE`].
async fn poll(what: &str, done: impl Fn() -> bool) {
    let started = tokio::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < DEADLINE, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `n` Deployments `c0`…, each reading `db/password`, beside `db` and the barrier's `other`.
fn consumers_of_db(n: usize) -> Vec<Value> {
    let mut seeds = vec![
        Source::secret(NS, "db")
            .data(&[("password", "hunter2")])
            .build(),
        Source::secret(NS, "other").data(&[("k", "1")]).build(),
    ];
    for i in 0..n {
        seeds.push(
            opted_in(&format!("c{i}"))
                .env_secret_key("P", "db", "password")
                .build(),
        );
    }
    seeds
}

fn template_hash(env: &Env, name: &str) -> Value {
    env.workload("deployments", name)
        .pointer("/spec/template/metadata/annotations/rollsafe.dev~1config-hash")
        .cloned()
        .unwrap_or(Value::Null)
}

/// Sieve's stale-view failover (docs/watch.md, "Stale views"): the follower's Secret watch is
/// stalled without an error while its workload watch and Lease stay live; the leader rolls 12
/// consumers and dies; the follower takes over. Its cache says the old values, every record
/// the new ones: it reads, finds itself behind, relists — and rolls nothing back, nor again.
#[tokio::test]
async fn a_follower_whose_secret_watch_stalled_takes_over_without_rolling_anything_back() {
    use rollsafe_kube::Impersonation;
    use rollsafe_watch::leader::elect;
    const CONSUMERS: usize = 12;
    let env = Env::start(consumers_of_db(CONSUMERS)).await;
    let names: Vec<String> = (0..CONSUMERS).map(|i| format!("c{i}")).collect();
    let a = elect(env.connection.client(None), &lease("a"))
        .await
        .unwrap();
    let mut first = Running::spawn(
        Controller::new(env.connection.client(None), settings()).with_leadership(a.leader.clone()),
    );
    first
        .until("a leads and adopts", |s| {
            s.leader && s.adoptions == CONSUMERS as u64 && s.pending == 0
        })
        .await;
    // The follower acts as replica-b; only its Secret watch stalls (the first it makes: it
    // listed, then watches and hears nothing more).
    let stall = env.emu.add_fault(
        Fault::on("watch", "secrets")
            .user("replica-b")
            .then(FaultAction::Stall),
    );
    let replica_b = Impersonation::new("replica-b", ["system:masters"]).unwrap();
    let b = elect(env.connection.client(Some(&replica_b)), &lease("b"))
        .await
        .unwrap();
    let mut second = Running::spawn(
        Controller::new(env.connection.client(Some(&replica_b)), settings())
            .with_leadership(b.leader.clone()),
    );
    second.settled().await;
    poll("the follower's Secret watch is stalled", || {
        env.emu
            .faults()
            .iter()
            .any(|f| f.id == stall && f.fired == 1)
    })
    .await;

    // The leader rolls every consumer for the new value.
    let before: Vec<Value> = names.iter().map(|n| template_hash(&env, n)).collect();
    let evaluated = second.status.borrow().evaluations;
    env.put(Source::secret(NS, "db").data(&[("password", "rotated")]));
    first
        .until("the leader rolls every consumer", |s| {
            s.rolls == CONSUMERS as u64 && s.pending == 0
        })
        .await;
    let rolled: Vec<Value> = names.iter().map(|n| template_hash(&env, n)).collect();
    assert!(rolled.iter().zip(&before).all(|(now, was)| now != was));
    // The follower has seen every new record (its workload watch is live) and, not leading,
    // read nothing.
    second
        .until("the follower sees the new records", |s| {
            s.evaluations >= evaluated + CONSUMERS as u64 && s.pending == 0
        })
        .await;
    assert_eq!(second.status.borrow().confirmations, 0);

    // The leader dies without releasing the Lease; the follower takes over when it expires.
    a.task.abort();
    first.stop().await;
    drop(a);
    let status = second
        .until(
            "the follower takes over, finds itself behind and catches up",
            |s| s.leader && s.stale_views >= 1 && s.stale_watches == 0 && s.pending == 0,
        )
        .await;
    assert_eq!(status.rolls, 0, "nothing rolled back: {status:?}");
    assert_eq!(status.adoptions, 0, "{status:?}");
    assert_eq!(
        status.stale_views, 1,
        "one read found it behind; the other consumers waited for the relist: {status:?}"
    );
    for (name, hash) in names.iter().zip(&rolled) {
        assert_eq!(env.rollouts(name), 1, "{name} rolled once, by the leader");
        assert_eq!(
            &template_hash(&env, name),
            hash,
            "{name} keeps the new digest"
        );
    }

    // The next change rolls each consumer once, from the caught-up view.
    env.emu.remove_fault(stall);
    env.put(Source::secret(NS, "db").data(&[("password", "third")]));
    second
        .until("the new leader rolls the next change", |s| {
            s.rolls == CONSUMERS as u64 && s.pending == 0
        })
        .await;
    for name in &names {
        assert_eq!(env.rollouts(name), 2, "{name}: one roll per change");
    }
    second.stop().await;
}

/// A Secret watch that goes silent (no event, no bookmark, no end) is stale after the stall
/// bound: `/readyz` says so, nothing is patched meanwhile — not even an adoption the live
/// workload watch asks for — and kube's watcher abandons the silent request. When the stream
/// delivers again, what was held is done once.
#[tokio::test]
async fn a_stalled_watch_is_stale_within_the_bound_and_nothing_is_patched_meanwhile() {
    use rollsafe_watch::freshness::{STALL_CHECK, stall_bound};
    let env = Env::start(two_workloads()).await;
    let (metrics, registry) = registered_metrics();
    // Each watch request lasts a second: a healthy stream ends and resumes every second.
    let controller = Controller::new(
        env.connection.client(None),
        ControllerSettings {
            watch_timeout: 1,
            ..settings()
        },
    )
    .with_metrics(metrics);
    let status_rx = controller.status();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_admin, admin_stopped) = oneshot::channel::<()>();
    let admin = tokio::spawn(rollsafe_watch::admin::serve(
        listener,
        Arc::new(registry),
        status_rx,
        async {
            let _ = admin_stopped.await;
        },
    ));
    let mut running = Running::spawn(controller);
    running
        .until("adopted", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    assert_eq!(get(addr, "/readyz").await.0, 200);

    // From now on every Secret watch stalls.
    let stalled_at = tokio::time::Instant::now();
    env.emu.add_fault(
        Fault::on("watch", "secrets")
            .always()
            .then(FaultAction::Stall),
    );
    running
        .until("the Secret watch is stale", |s| s.stale_watches == 1)
        .await;
    let detected = stalled_at.elapsed();
    // The stream's last delivery was at most one watch timeout (1 s) before the fault; checks
    // run every second.
    let bound = stall_bound(1) + Duration::from_secs(1) + 2 * STALL_CHECK;
    assert!(
        detected <= bound,
        "stale after {detected:?}, bound {bound:?}"
    );
    assert_eq!(
        get(addr, "/readyz").await,
        (503, "a watch is stale".to_owned())
    );

    // A change the stalled stream withholds.
    env.put(Source::secret(NS, "db").data(&[("password", "rotated"), ("user", "app")]));
    // The workload watch is live: a new workload is seen, but not adopted while stale.
    env.put(opted_in("late").env_secret_key("P", "db", "password"));
    running
        .until("late is cached and evaluated", |s| {
            s.workloads == 3 && s.pending == 0
        })
        .await;
    let (code, text) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        text.contains("rollsafe_watch_skipped_total{reason=\"stale_view\"}"),
        "{text}"
    );
    assert!(text.contains("rollsafe_watch_stale_watches 1"), "{text}");
    assert!(
        text.contains("rollsafe_watch_watch_stalls_total 1"),
        "{text}"
    );
    assert!(env.patches("deployments", "late").is_empty());
    assert_eq!(env.rollouts("web"), 0);
    // kube's watcher gave the silent request up (1 s + its 5 s margin) and watched again.
    running
        .until("a silent watch abandoned", |s| s.abandoned_watches >= 1)
        .await;

    // The stream delivers again: fresh; the change rolls web once, late is adopted.
    env.emu.clear_faults();
    let status = running
        .until("fresh again, and done", |s| {
            s.stale_watches == 0 && s.rolls == 1 && s.adoptions == 3 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("web"), 1, "{status:?}");
    assert_eq!(env.rollouts("api"), 0, "{status:?}");
    assert_eq!(get(addr, "/readyz").await.0, 200);
    running.stop().await;
    let _ = stop_admin.send(());
    admin.await.unwrap().unwrap();
}

/// `--source-selector`, `--ignore-namespace` and `--ignore-kind`: the API server filters what
/// is watched, so what is left out is neither transferred nor cached; an object outside the
/// selection counts as not watched (like an opted-out one), never as missing.
#[tokio::test]
async fn source_selection_and_ignores_cut_what_is_watched_and_held() {
    use rollsafe_core::reference::TargetKind;
    let db = |namespace: &str, password: &str| {
        Source::secret(namespace, "db")
            .data(&[("password", password)])
            .label("rollsafe", "yes")
    };
    let mut seeds = vec![
        db(NS, "hunter2").build(),
        Source::secret(NS, "other").data(&[("k", "1")]).build(),
        Source::config_map(NS, "settings")
            .data(&[("mode", "a")])
            .build(),
        opted_in("web")
            .env_secret_key("P", "db", "password")
            .env_from_secret("other")
            .env_from_config_map("settings")
            .build(),
        opted_in("api").env_from_secret("other").build(),
        db("skip", "x").build(),
        opted_in("far")
            .namespace("skip")
            .env_secret_key("P", "db", "password")
            .build(),
    ];
    for i in 0..20 {
        seeds.push(
            Source::secret(NS, &format!("unselected-{i}"))
                .data(&[("k", "v")])
                .build(),
        );
    }
    let env = Env::start(seeds).await;

    // Everything watched: every Secret and ConfigMap is cached, the far namespace's too.
    let mut everything = env.controller(settings());
    let all = everything.settled().await;
    everything.stop().await;
    env.emu.reset().unwrap();

    let mut running = env.controller(ControllerSettings {
        source_selector: Some("rollsafe=yes".to_owned()),
        ignore_namespaces: vec!["skip".to_owned()],
        ignore_kinds: vec![TargetKind::ConfigMap],
        ..settings()
    });
    let status = running.settled().await;
    // (the emulator's namespaces each hold a kube-root-ca.crt ConfigMap, too)
    assert!(all.sources >= 25 && all.workloads == 3, "{all:?}");
    assert_eq!(
        (status.sources, status.workloads),
        (1, 2),
        "only db is cached, and no workload of the ignored namespace: {status:?}"
    );
    assert_eq!(status.adoptions, 2, "web and api adopted, nothing rolled");
    let sent = |resource: &str, needle: &str| {
        let reads: Vec<String> = env
            .emu
            .requests()
            .into_iter()
            .filter(|r| r.resource.as_deref() == Some(resource))
            .filter(|r| matches!(r.verb.as_deref(), Some("list" | "watch")))
            .map(|r| r.query)
            .collect();
        !reads.is_empty() && reads.iter().all(|query| query.contains(needle))
    };
    assert!(sent("secrets", "labelSelector=rollsafe%3Dyes"));
    assert!(sent(
        "deployments",
        "fieldSelector=metadata.namespace%21%3Dskip"
    ));
    assert!(
        env.emu
            .requests()
            .iter()
            .all(|r| r.resource.as_deref() != Some("configmaps")),
        "ConfigMaps are not watched"
    );

    // The selected object rolls its consumer once; the others never.
    env.put(db(NS, "rotated"));
    running
        .until("web rolls", |s| s.rolls == 1 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "other").data(&[("k", "2")]));
    env.put(Source::config_map(NS, "settings").data(&[("mode", "b")]));
    env.put(db("skip", "y"));
    // db leaving the selection is not a change: nothing rolls.
    env.put(Source::secret(NS, "db").data(&[("password", "rotated")]));
    running
        .until("db left the cache", |s| s.sources == 0 && s.pending == 0)
        .await;
    // db back in the selection joins the record, as an opt-out removed does: no roll (its
    // value then is its first seen); its next change rolls web once more.
    env.put(db(NS, "third"));
    running
        .until("db back in the cache", |s| s.sources == 1 && s.pending == 0)
        .await;
    assert_eq!(running.status.borrow().rolls, 1);
    env.put(db(NS, "fourth"));
    let status = running
        .until("web rolls for db's next change", |s| {
            s.rolls == 2 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("web"), 2, "{status:?}");
    assert_eq!(env.rollouts("api"), 0, "{status:?}");
    assert!(
        env.emu
            .get_object("deployments", Some("skip"), "far")
            .unwrap()
            .pointer("/metadata/annotations/rollsafe.dev~1config-record")
            .is_none()
    );
    running.stop().await;
}

/// Reloader's `search` + `match` under `--reloader-compat`: only the referenced objects that
/// carry `reloader.stakater.com/match: "true"` roll the workload; an object gaining the
/// annotation joins its record without a roll (like an opt-out removed), then rolls it.
#[tokio::test]
async fn reloader_search_rolls_only_for_matched_references() {
    let matched = json!({"reloader.stakater.com/match": "true"});
    let settings_map = |mode: &str| {
        Source::config_map(NS, "settings")
            .data(&[("mode", mode)])
            .annotations(matched.clone())
    };
    let searching = Workload::deployment("searching")
        .namespace(NS)
        .with_replicas()
        .annotate("reloader.stakater.com/search", "true")
        .env_secret_key("P", "db", "password")
        .env_from_secret("other")
        .env_from_config_map("settings")
        .build();
    let env = Env::start(vec![
        Source::secret(NS, "db")
            .data(&[("password", "hunter2")])
            .annotations(matched.clone())
            .build(),
        Source::secret(NS, "other").data(&[("k", "1")]).build(),
        settings_map("a").build(),
        searching,
    ])
    .await;
    let mut running = env.controller(ControllerSettings {
        reloader_compat: true,
        ..settings()
    });
    running
        .until("adopted", |s| s.adoptions == 1 && s.pending == 0)
        .await;
    // Waits until the controller has evaluated the workload after a change.
    async fn evaluated(running: &mut Running) {
        let before = running.status.borrow().evaluations;
        running
            .until("evaluated", |s| s.evaluations > before && s.pending == 0)
            .await;
    }

    env.put(
        Source::secret(NS, "db")
            .data(&[("password", "rotated")])
            .annotations(matched.clone()),
    );
    running
        .until("a matched Secret rolls", |s| s.rolls == 1 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "other").data(&[("k", "2")]));
    evaluated(&mut running).await;
    assert_eq!(
        env.rollouts("searching"),
        1,
        "an unmatched reference rolls nothing"
    );
    env.put(settings_map("b"));
    running
        .until("a matched ConfigMap rolls", |s| {
            s.rolls == 2 && s.pending == 0
        })
        .await;
    // `other` gains match: it joins the record, no roll; its next change rolls.
    env.put(
        Source::secret(NS, "other")
            .data(&[("k", "2")])
            .annotations(matched.clone()),
    );
    running
        .until("other joins the record", |s| {
            s.adoptions == 2 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("searching"), 2);
    env.put(
        Source::secret(NS, "other")
            .data(&[("k", "3")])
            .annotations(matched),
    );
    running
        .until("now it rolls", |s| s.rolls == 3 && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("searching"), 3);
    running.stop().await;
}

/// The CustomResourceDefinition Argo Rollouts installs, as far as serving needs it.
fn rollouts_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "rollouts.argoproj.io"},
           "spec": {"group": "argoproj.io", "scope": "Namespaced",
                    "names": {"plural": "rollouts", "singular": "rollout", "kind": "Rollout",
                              "listKind": "RolloutList", "shortNames": ["ro"]},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": true}},
                                  "subresources": {"status": {}}}]}})
}

/// An Argo Rollout named `name` whose inline pod template reads all of `secret`.
fn rollout(name: &str, secret: &str) -> Value {
    json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
           "metadata": {"name": name, "namespace": NS,
                        "annotations": {"rollsafe.dev/watch": "true"}},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                    "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "app", "image": "app:1",
                                          "envFrom": [{"secretRef": {"name": secret}}]}]}}}})
}

/// A CronJob named `name` whose Jobs read `secret`'s `key`.
fn cron_job(name: &str, secret: &str, key: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
           "metadata": {"name": name, "namespace": NS,
                        "annotations": {"rollsafe.dev/watch": "true"}},
           "spec": {"schedule": "0 3 * * *",
                    "jobTemplate": {"spec": {"template": {"spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": "job", "image": "job:1",
                                        "env": [secret_key_ref("P", secret, key)]}]}}}}}})
}

async fn create(
    env: &Env,
    resource: &kube::api::ApiResource,
    object: Value,
    namespace: Option<&str>,
) {
    let client = env.connection.client(None);
    let api: kube::Api<kube::api::DynamicObject> = match namespace {
        Some(namespace) => kube::Api::namespaced_with(client, namespace, resource),
        None => kube::Api::all_with(client, resource),
    };
    let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&kube::api::PostParams::default(), &object)
        .await
        .unwrap();
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

#[tokio::test]
async fn cron_jobs_and_argo_rollouts_roll_once_per_change() {
    let seeds = vec![
        Source::secret(NS, "db")
            .data(&[("password", "a"), ("user", "app")])
            .build(),
        cron_job("nightly", "db", "password"),
    ];
    let env = Env::start(seeds).await;
    let crd = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    create(&env, &crd, rollouts_crd(), None).await;
    let rollouts = resource("argoproj.io", "v1alpha1", "Rollout", "rollouts");
    create(&env, &rollouts, rollout("web", "db"), Some(NS)).await;
    // A Rollout whose pods come from a Deployment's template: not rolled itself.
    let mut referencing = rollout("referencing", "db");
    referencing["spec"]
        .as_object_mut()
        .unwrap()
        .remove("template");
    referencing["spec"]["workloadRef"] =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-deploy"});
    create(&env, &rollouts, referencing, Some(NS)).await;

    let mut running = env.controller(ControllerSettings {
        argo_rollouts: true,
        ..settings()
    });
    let status = running
        .until("two adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    assert_eq!(status.rolls, 0);
    assert_eq!(
        status.workloads, 3,
        "the CronJob and both Rollouts are cached"
    );
    assert!(env.patches("rollouts", "referencing").is_empty());

    // A key the CronJob does not read: only the Rollout (all of db) rolls.
    env.put(Source::secret(NS, "db").data(&[("password", "a"), ("user", "ops")]));
    running
        .until("the Rollout's roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    assert_eq!(env.patches("cronjobs", "nightly").len(), 1, "adoption only");
    let web = env.workload("rollouts", "web");
    let hash = web
        .pointer("/spec/template/metadata/annotations/rollsafe.dev~1config-hash")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    assert!(
        web["metadata"]["annotations"]["rollsafe.dev/config-record"]
            .as_str()
            .unwrap()
            .starts_with(&hash)
    );
    assert_eq!(env.patches("rollouts", "web").len(), 2, "adoption + roll");

    // The CronJob's key: both roll, once each; the CronJob's roll waits for its next Job.
    env.put(Source::secret(NS, "db").data(&[("password", "b"), ("user", "ops")]));
    running
        .until("two more rolls and the CronJob's event", |s| {
            s.rolls == 3 && s.deferred == 1 && s.pending == 0
        })
        .await;
    let nightly = env.workload("cronjobs", "nightly");
    assert!(
        nightly
            .pointer(
                "/spec/jobTemplate/spec/template/metadata/annotations/rollsafe.dev~1config-hash"
            )
            .is_some(),
        "{nightly}"
    );
    assert!(nightly.pointer("/spec/template").is_none());
    assert_eq!(env.patches("cronjobs", "nightly").len(), 2);
    assert_eq!(env.patches("rollouts", "web").len(), 3);
    poll("the CronJob's RolloutDeferred event", || {
        !events(&env, "nightly", "RolloutDeferred").is_empty()
    })
    .await;
    let deferred = events(&env, "nightly", "RolloutDeferred");
    assert_eq!(deferred.len(), 1);
    assert_eq!(deferred[0]["involvedObject"]["apiVersion"], "batch/v1");
    assert_eq!(deferred[0]["involvedObject"]["kind"], "CronJob");
    assert_eq!(
        deferred[0]["type"], "Normal",
        "a CronJob's next Job is its normal roll"
    );
    let note = deferred[0]["note"]
        .as_str()
        .or(deferred[0]["message"].as_str())
        .unwrap_or_default();
    assert!(note.contains("next scheduled Job"), "{}", deferred[0]);
    assert!(env.patches("rollouts", "referencing").is_empty());
    running.stop().await;

    // Without --argo-rollouts, Rollouts are neither watched nor patched.
    let before = env.patches("rollouts", "web").len();
    let mut running = env.controller(settings());
    let status = running.settled().await;
    assert_eq!(status.workloads, 1, "the CronJob only");
    env.put(Source::secret(NS, "db").data(&[("password", "c"), ("user", "ops")]));
    running
        .until("the CronJob's roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    assert_eq!(env.patches("rollouts", "web").len(), before);
    running.stop().await;
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// In `namespace`: Secret `db` (`password` = `value`) and Deployment `web` reading it.
fn team(namespace: &str, value: &str) -> Vec<Value> {
    vec![
        Source::secret(namespace, "db")
            .data(&[("password", value)])
            .build(),
        opted_in("web")
            .namespace(namespace)
            .env_secret_key("P", "db", "password")
            .build(),
    ]
}

fn web_patches(env: &Env, namespace: &str) -> usize {
    env.emu
        .requests_for("patch", "deployments")
        .into_iter()
        .filter(|r| r.name.as_deref() == Some("web") && r.namespace.as_deref() == Some(namespace))
        .count()
}

#[tokio::test]
async fn the_namespace_selector_follows_namespaces_gaining_and_losing_the_label() {
    let mut seeds = vec![
        namespace("team-a", json!({"rollsafe": "on"})),
        namespace("team-b", json!({})),
    ];
    seeds.extend(team("team-a", "a1"));
    seeds.extend(team("team-b", "b1"));
    let env = Env::start(seeds).await;
    let mut running = env.controller(ControllerSettings {
        namespace_selector: Some("rollsafe=on".to_owned()),
        ..settings()
    });
    let status = running
        .until("team-a's adoption", |s| s.adoptions == 1 && s.pending == 0)
        .await;
    // Per namespace: web, db and the kube-root-ca.crt ConfigMap every namespace has.
    assert_eq!(
        (status.workloads, status.sources),
        (1, 2),
        "team-b is not held"
    );
    assert_eq!(web_patches(&env, "team-b"), 0);

    // A change outside the selection rolls nothing; inside, it rolls once.
    env.put(team("team-b", "b2").remove(0));
    env.put(team("team-a", "a2").remove(0));
    running
        .until("team-a's roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    assert_eq!(web_patches(&env, "team-b"), 0);

    // team-b gains the label: its objects are listed and adopted, not rolled.
    env.put(namespace("team-b", json!({"rollsafe": "on"})));
    let status = running
        .until("team-b's adoption", |s| {
            s.adoptions == 2 && s.stale_watches == 0 && s.pending == 0
        })
        .await;
    assert_eq!(status.rolls, 1);
    assert_eq!((status.workloads, status.sources), (2, 4));
    env.put(team("team-b", "b3").remove(0));
    running
        .until("team-b's roll", |s| s.rolls == 2 && s.pending == 0)
        .await;
    assert_eq!(web_patches(&env, "team-b"), 2, "adoption + one roll");

    // team-a loses it: forgotten, and its changes roll nothing.
    env.put(namespace("team-a", json!({})));
    running
        .until("team-a forgotten", |s| s.workloads == 1 && s.sources == 2)
        .await;
    let before = web_patches(&env, "team-a");
    env.put(team("team-a", "a3").remove(0));
    env.put(team("team-b", "b4").remove(0));
    running
        .until("team-b's second roll", |s| s.rolls == 3 && s.pending == 0)
        .await;
    assert_eq!(web_patches(&env, "team-a"), before);
    running.stop().await;
}

#[tokio::test]
async fn reloaders_regular_expression_entries_watch_every_matching_name() {
    let annotated = |name: &str, reload: &str| {
        Workload::deployment(name)
            .namespace(NS)
            .with_replicas()
            .annotate("secret.reloader.stakater.com/reload", reload)
            .build()
    };
    let seeds = vec![
        Source::secret(NS, "db-main")
            .data(&[("password", "m1")])
            .build(),
        Source::secret(NS, "db-replica")
            .data(&[("password", "r1")])
            .build(),
        Source::secret(NS, "old-db-main")
            .data(&[("password", "o1")])
            .build(),
        Source::secret(NS, "other").data(&[("k", "1")]).build(),
        annotated("pattern", "db-.*"),
        // Not a valid expression: refused, counted, not watched.
        annotated("broken", "db-(.*"),
        // The barrier: reads all of `other`.
        opted_in("api").env_from_secret("other").build(),
    ];
    let env = Env::start(seeds).await;
    let (metrics, _registry) = registered_metrics();
    let controller = Controller::new(
        env.connection.client(None),
        ControllerSettings {
            reloader_compat: true,
            ..settings()
        },
    )
    .with_metrics(metrics.clone());
    let mut running = Running::spawn(controller);
    running
        .until("two adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    assert_eq!(metrics.reloader_refused.get(), 1, "the broken entry");
    assert!(env.patches("deployments", "broken").is_empty());
    let record = |env: &Env| {
        env.workload("deployments", "pattern")["metadata"]["annotations"]
            ["rollsafe.dev/config-record"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // Two matching Secrets recorded; the one whose whole name does not match is not.
    assert_eq!(
        record(&env)
            .split_once(';')
            .map_or(0, |(_, e)| e.split(',').count()),
        2,
        "{}",
        record(&env)
    );

    // A matched Secret's change rolls once; an unmatched one's rolls nothing.
    env.put(Source::secret(NS, "db-replica").data(&[("password", "r2")]));
    running
        .until("the pattern's roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("pattern"), 1);
    env.put(Source::secret(NS, "old-db-main").data(&[("password", "o2")]));
    barrier(&env, &mut running, "2").await;
    assert_eq!(env.rollouts("pattern"), 1);

    // A new matching Secret joins the record without a roll; its next change rolls.
    let adoptions = running.status.borrow().adoptions;
    env.put(Source::secret(NS, "db-new").data(&[("password", "n1")]));
    running
        .until("the re-record", |s| {
            s.adoptions > adoptions && s.pending == 0
        })
        .await;
    assert_eq!(
        env.rollouts("pattern"),
        1,
        "an object joining rolls nothing"
    );
    assert_eq!(
        record(&env)
            .split_once(';')
            .map_or(0, |(_, e)| e.split(',').count()),
        3
    );
    env.put(Source::secret(NS, "db-new").data(&[("password", "n2")]));
    running
        .until("db-new's roll", |s| s.rolls == 3 && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("pattern"), 2);

    // One disappearing re-records without a roll.
    let adoptions = running.status.borrow().adoptions;
    env.emu
        .delete_object("secrets", Some(NS), "db-main")
        .unwrap();
    running
        .until("the re-record after the deletion", |s| {
            s.adoptions > adoptions && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("pattern"), 2);
    assert_eq!(
        record(&env)
            .split_once(';')
            .map_or(0, |(_, e)| e.split(',').count()),
        2
    );
    running.stop().await;
}

#[tokio::test]
async fn a_stalled_events_api_holds_no_patch() {
    let env = Env::start(consumers_of_db(3)).await;
    let mut running = env.controller(settings());
    running
        .until("adoptions", |s| s.adoptions == 3 && s.pending == 0)
        .await;
    // Every Event write is held before it applies, until the fault is removed.
    let stall = env
        .emu
        .add_fault(Fault::on("create", "events").then(FaultAction::Stall));
    env.put(Source::secret(NS, "db").data(&[("password", "rotated")]));
    let status = running
        .until("three rolls while the Events wait", |s| {
            s.rolls == 3 && s.pending == 0
        })
        .await;
    // Sent inline, the first held Event would have timed out (a failure) before the next
    // patch could start.
    assert_eq!(
        (status.events, status.event_failures),
        (0, 0),
        "no Event got through, none gave up yet: {status:?}"
    );
    for i in 0..3 {
        assert_eq!(env.rollouts(&format!("c{i}")), 1);
    }
    env.emu.remove_fault(stall);
    // The rolls went in parallel: their Events, and the rollouts' ends, arrive in any order.
    poll("the three Rolled Events", || {
        (0..3).all(|i| !events(&env, &format!("c{i}"), "Rolled").is_empty())
    })
    .await;
    for i in 0..3 {
        assert_eq!(events(&env, &format!("c{i}"), "Rolled").len(), 1);
    }
    assert_eq!(running.status.borrow().event_failures, 0);
    running.stop().await;
}

/// Adoption at its own pace, never in front of a roll: 48 workloads are adopted at 8 first
/// records a second (the pace bounds the adoption from below); a change made while most of
/// them still wait rolls its three consumers at once, before the adoption ends, and each of
/// them once — rolled from the record it had before the change, not absorbed into an
/// adoption. No more than the pool's patches are ever in flight.
#[tokio::test]
async fn adoption_is_paced_and_a_change_made_meanwhile_rolls_at_once() {
    const BULK: u64 = 48;
    let mut seeds = vec![
        Source::secret(NS, "bulk").data(&[("k", "1")]).build(),
        Source::secret(NS, "hot").data(&[("k", "1")]).build(),
        Source::secret(NS, "other").data(&[("k", "1")]).build(),
    ];
    for i in 0..BULK as usize {
        seeds.push(
            Workload::deployment(&format!("b{i}"))
                .namespace(NS)
                .with_replicas()
                .watch("true")
                .env_secret_key("K", "bulk", "k")
                .build(),
        );
    }
    for i in 0..3 {
        seeds.push(
            Workload::deployment(&format!("h{i}"))
                .namespace(NS)
                .with_replicas()
                .watch("true")
                .env_secret_key("K", "hot", "k")
                .build(),
        );
    }
    let env = Env::start(seeds).await;
    let started = tokio::time::Instant::now();
    let mut running = env.controller(ControllerSettings {
        max_adoptions_per_second: 8,
        ..settings()
    });
    running
        .until("adoption under way", |s| {
            s.synced && s.adoptions >= 8 && s.adoptions_queued > 0
        })
        .await;
    env.put(Source::secret(NS, "hot").data(&[("k", "2")]));
    let status = running
        .until("the three consumers of hot rolled", |s| s.rolls == 3)
        .await;
    assert!(
        status.adoptions < BULK,
        "the roll waited for the adoption: {status:?}"
    );
    let status = running
        .until("every workload recorded", |s| {
            s.adoptions + s.rolls == BULK + 3 && s.pending == 0
        })
        .await;
    // At 8 a second (8 at once), at least 48 first records cannot take less than
    // (48 - 8) / 8 s.
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "adoption not paced: {:?}",
        started.elapsed()
    );
    assert_eq!((status.rolls, status.conflicts, status.failures), (3, 0, 0));
    for i in 0..3 {
        assert_eq!(env.rollouts(&format!("h{i}")), 1, "h{i}");
        assert_eq!(
            env.patches("deployments", &format!("h{i}")).len(),
            1,
            "h{i}"
        );
    }
    for i in 0..BULK as usize {
        assert_eq!(env.rollouts(&format!("b{i}")), 0, "b{i}");
    }
    let peak = env.emu.peak_in_flight("patch", "deployments");
    assert!(
        (1..=rollsafe_watch::patches::PATCH_CONCURRENCY as u32).contains(&peak),
        "{peak}"
    );
    running.stop().await;
}

/// Patches go in parallel, but never two for one workload: c0's roll is held by the API
/// server while c1 and c2 roll twice; c0 comes due again meanwhile and is evaluated once its
/// patch is answered — one more patch, to what it consumes then.
#[tokio::test]
async fn one_workload_never_has_two_patches_in_flight() {
    let env = Env::start(consumers_of_db(3)).await;
    let mut running = env.controller(settings());
    running
        .until("adoptions", |s| s.adoptions == 3 && s.pending == 0)
        .await;
    let stall = env.emu.add_fault(
        Fault::on("patch", "deployments")
            .name("c0")
            .then(FaultAction::Stall),
    );
    env.put(Source::secret(NS, "db").data(&[("password", "first")]));
    running
        .until("c1 and c2 rolled, c0 held", |s| s.rolls == 2)
        .await;
    env.put(Source::secret(NS, "db").data(&[("password", "second")]));
    running
        .until("c1 and c2 rolled again", |s| s.rolls == 4)
        .await;
    // c0 came due again while its patch was held: still one request in flight (a request is
    // logged once answered: only the adoption so far).
    let in_flight = |env: &Env| {
        env.emu
            .in_flight()
            .into_iter()
            .filter(|stat| stat.verb == "patch" && stat.resource == "deployments")
            .map(|stat| stat.current)
            .sum::<u32>()
    };
    assert_eq!(in_flight(&env), 1);
    assert_eq!(env.patches("deployments", "c0").len(), 1);
    assert_eq!(env.rollouts("c0"), 0);
    env.emu.remove_fault(stall);
    let status = running
        .until("c0 rolled for both changes", |s| {
            s.rolls == 6 && s.pending == 0
        })
        .await;
    assert_eq!((status.conflicts, status.failures), (0, 0), "{status:?}");
    assert_eq!(env.patches("deployments", "c0").len(), 3);
    assert_eq!(env.rollouts("c0"), 2);
    assert_eq!(template_hash(&env, "c0"), template_hash(&env, "c1"));
    running.stop().await;
}

/// `kubectl describe deployment NAME` against the emulator (on a blocking thread: the emulator
/// answers on this test's runtime); `None` without kubectl outside CI.
async fn kubectl_describe(env: &Env, name: &str) -> Option<String> {
    let kubectl = rollsafe_testing::kubectl()?;
    let kubeconfig = env.kubeconfig.clone();
    let name = name.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["-n", NS, "describe", "deployment", &name])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `web`'s restart window, office hours in UTC; the controllers' clock starts 15 s before it
/// opens, on a Thursday, and runs on.
const OFFICE_HOURS: &str = "Mon-Fri 09:00-17:00 UTC";

fn pending_mark(env: &Env, name: &str) -> Option<String> {
    env.workload("deployments", name)["metadata"]["annotations"]["rollsafe.dev/pending"]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test]
async fn a_change_outside_the_restart_window_is_held_across_a_restart_and_rolls_once_when_it_opens()
{
    let mut seeds = two_workloads();
    seeds[2]["metadata"]["annotations"]["rollsafe.dev/restart-window"] = json!(OFFICE_HOURS);
    let env = Env::start(seeds).await;
    let clock = WallClock::starting_at("2026-12-03T08:59:45Z".parse().unwrap());
    let held = || ControllerSettings {
        clock,
        ..settings()
    };
    let mut running = env.controller(held());
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "db").data(&[("password", "changed"), ("user", "app")]));
    let status = running
        .until("the hold", |s| s.pended == 1 && s.pending == 0)
        .await;
    assert_eq!(status.held_by_window, 1);
    assert_eq!(status.rolls, 0);
    assert_eq!(env.rollouts("web"), 0);
    let mark = pending_mark(&env, "web").unwrap();
    assert!(
        mark.starts_with("window until=2026-12-03T09:00:00Z digest=v1:"),
        "{mark}"
    );
    poll("the Pending event", || {
        !events(&env, "web", "Pending").is_empty()
    })
    .await;
    let pending = events(&env, "web", "Pending");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(
        pending[0]["message"],
        "Roll for changes to Secret/db held by its restart window (Mon-Fri 09:00-17:00 UTC) until 2026-12-03T09:00+00:00"
    );
    assert_eq!(pending[0]["type"], "Normal");
    // What the on-call engineer reads: the Event and the mark, through kubectl.
    if let Some(described) = kubectl_describe(&env, "web").await {
        assert!(
            described.contains("Roll for changes to Secret/db held by its restart window"),
            "{described}"
        );
        assert!(described.contains("rollsafe.dev/pending"), "{described}");
    }

    // A restart neither loses the hold nor repeats it: no patch, the same mark.
    let patches = env.patches("deployments", "web").len();
    running.stop().await;
    let metrics = rollsafe_watch::metrics::ControllerMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut running = Running::spawn(
        Controller::new(env.connection.client(None), held()).with_metrics(metrics.clone()),
    );
    running
        .until("synced, web held again", |s| {
            s.synced && s.held_by_window == 1 && s.pending == 0
        })
        .await;
    assert_eq!(env.patches("deployments", "web").len(), patches);
    assert_eq!(pending_mark(&env, "web").as_deref(), Some(mark.as_str()));

    // A second change while held is coalesced: the mark follows the content.
    env.put(Source::secret(NS, "db").data(&[("password", "changed again"), ("user", "app")]));
    running
        .until("the new mark", |s| s.pended == 1 && s.pending == 0)
        .await;
    let second = pending_mark(&env, "web").unwrap();
    assert_ne!(second, mark);
    assert_eq!(env.rollouts("web"), 0, "still held");

    // At 09:00 the window opens: one roll, for both changes; the mark goes.
    running
        .until("the roll at the window's opening", |s| {
            s.rolls == 1 && s.held_by_window == 0 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("web"), 1);
    assert_eq!(env.rollouts("api"), 0);
    assert_eq!(pending_mark(&env, "web"), None);
    poll("the Rolled event", || {
        !events(&env, "web", "Rolled").is_empty()
    })
    .await;
    // Nothing more once it rolled.
    barrier(&env, &mut running, "2").await;
    assert_eq!(env.rollouts("web"), 1);
    // The held roll is timed apart: the reaction histogram has the barrier's roll only.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for expected in [
        "rollsafe_watch_held_roll_seconds_count 1",
        "rollsafe_watch_reaction_seconds_count 1",
    ] {
        assert!(text.contains(expected), "{expected} in\n{text}");
    }
    running.stop().await;
}

#[tokio::test]
async fn a_change_undone_while_held_clears_the_mark_and_rolls_nothing() {
    let window = || json!({"rollsafe.dev/restart-window": OFFICE_HOURS});
    let mut seeds = two_workloads();
    seeds[1]["metadata"]["annotations"] = window();
    let env = Env::start(seeds).await;
    // Saturday: closed for two days.
    let mut running = env.controller(ControllerSettings {
        clock: WallClock::starting_at("2026-12-05T12:00:00Z".parse().unwrap()),
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    // `other`'s own window holds its consumer api.
    env.put(
        Source::secret(NS, "other")
            .data(&[("k", "2")])
            .annotations(window()),
    );
    running
        .until("the hold", |s| s.pended == 1 && s.pending == 0)
        .await;
    let mark = pending_mark(&env, "api").unwrap();
    assert!(
        mark.starts_with("window until=2026-12-07T09:00:00Z"),
        "{mark}"
    );
    poll("the Pending event", || {
        !events(&env, "api", "Pending").is_empty()
    })
    .await;
    assert!(
        events(&env, "api", "Pending")[0]["message"]
            .as_str()
            .unwrap()
            .contains("held by the restart window of Secret/other (Mon-Fri 09:00-17:00 UTC) until 2026-12-07T09:00+00:00")
    );
    // web is not held by other's window: db changes roll it at once.
    env.put(Source::secret(NS, "db").data(&[("password", "changed"), ("user", "app")]));
    running
        .until("web's roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    // The change undone: the mark goes, nothing rolls.
    env.put(
        Source::secret(NS, "other")
            .data(&[("k", "1")])
            .annotations(window()),
    );
    poll("the mark removed", || pending_mark(&env, "api").is_none()).await;
    let status = running
        .until("idle", |s| s.held_by_window == 0 && s.pending == 0)
        .await;
    assert_eq!(status.rolls, 1);
    assert_eq!(env.rollouts("api"), 0);
    running.stop().await;
}

/// Approves `name`'s pending roll as `rollsafe approve` does: the mark tested, the digest
/// written.
async fn approve(env: &Env, name: &str) {
    let mark = pending_mark(env, name).unwrap();
    let document = rollsafe_watch::approval::approve_document(&mark).unwrap();
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.connection.client(None),
        NS,
        &rollsafe_kube::read::workload_resource(rollsafe_core::workload::WatchedKind::Deployment),
    );
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Json::<()>(document),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_roll_that_needs_approval_rolls_once_approved_and_a_newer_change_needs_a_new_one() {
    let env = Env::start(two_workloads()).await;
    let mut running = env.controller(ControllerSettings {
        require_approval: vec![NS.to_owned()],
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    env.put(Source::secret(NS, "db").data(&[("password", "changed"), ("user", "app")]));
    running
        .until("the hold", |s| s.pended == 1 && s.pending == 0)
        .await;
    let mark = pending_mark(&env, "web").unwrap();
    assert!(mark.starts_with("approval since="), "{mark}");
    poll("the Pending event", || {
        !events(&env, "web", "Pending").is_empty()
    })
    .await;
    assert_eq!(
        events(&env, "web", "Pending")[0]["message"],
        "Roll for changes to Secret/db awaits approval: rollsafe approve -n shop deployment/web"
    );
    // A restart sends nothing: the mark is there.
    let patches = env.patches("deployments", "web").len();
    running.stop().await;
    let mut running = env.controller(ControllerSettings {
        require_approval: vec![NS.to_owned()],
        ..settings()
    });
    running.settled().await;
    assert_eq!(env.patches("deployments", "web").len(), patches);
    assert_eq!(env.rollouts("web"), 0);

    // Approved: one roll; the mark and the approval go.
    approve(&env, "web").await;
    running
        .until("the approved roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    assert_eq!(env.rollouts("web"), 1);
    poll("the marks removed", || pending_mark(&env, "web").is_none()).await;
    let annotations = env.workload("deployments", "web")["metadata"]["annotations"].clone();
    assert!(
        annotations.get("rollsafe.dev/approved").is_none(),
        "{annotations}"
    );

    // A newer change needs a new approval.
    env.put(Source::secret(NS, "db").data(&[("password", "changed again"), ("user", "app")]));
    running
        .until("the second hold", |s| s.pended == 1 && s.pending == 0)
        .await;
    poll("the new mark", || pending_mark(&env, "web").is_some()).await;
    assert_eq!(env.rollouts("web"), 1);
    approve(&env, "web").await;
    running
        .until("the second approved roll", |s| {
            s.rolls == 2 && s.pending == 0
        })
        .await;
    assert_eq!(env.rollouts("web"), 2);
    assert_eq!(env.rollouts("api"), 0);
    running.stop().await;
}

#[tokio::test]
async fn the_brakes_survive_a_restart_of_the_leader() {
    let env = Env::start(two_workloads()).await;
    let braked = || ControllerSettings {
        flap_limit: rollsafe_watch::limits::FlapLimit::parse("2/10m").unwrap(),
        max_rolls_per_minute: 1,
        burst: 3,
        ..settings()
    };
    let mut running = env.controller(braked());
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    for (round, password) in ["one", "two"].into_iter().enumerate() {
        env.put(Source::secret(NS, "db").data(&[("password", password), ("user", "app")]));
        running
            .until("web's roll", |s| {
                s.rolls == round as u64 + 1 && s.pending == 0
            })
            .await;
    }
    env.put(Source::secret(NS, "other").data(&[("k", "2")]));
    running
        .until("api's roll: the burst of 3 spent", |s| {
            s.rolls == 3 && s.pending == 0
        })
        .await;
    let rolled_at =
        env.workload("deployments", "web")["metadata"]["annotations"]["rollsafe.dev/rolled-at"]
            .as_str()
            .unwrap()
            .to_owned();
    assert_eq!(rolled_at.split(',').count(), 2, "{rolled_at}");
    running.stop().await;

    // A new process (a restarted or new leader) starts from what the workloads recorded.
    let mut running = env.controller(braked());
    running.settled().await;
    // The bucket the last leader spent is not full again: api's next roll waits for a token.
    env.put(Source::secret(NS, "other").data(&[("k", "3")]));
    running
        .until("api's roll postponed by the rate limit", |s| {
            s.rate_limited >= 1
        })
        .await;
    assert_eq!(env.rollouts("api"), 1);
    // web rolled twice within the window: its next change halts it instead of a third roll.
    env.put(Source::secret(NS, "db").data(&[("password", "three"), ("user", "app")]));
    running.until("web halted", |s| s.halts == 1).await;
    assert_eq!(env.rollouts("web"), 2);
    let annotations = env.workload("deployments", "web")["metadata"]["annotations"].clone();
    assert!(
        annotations.get("rollsafe.dev/halted").is_some(),
        "{annotations}"
    );
    assert!(
        annotations.get("rollsafe.dev/rolled-at").is_none(),
        "resuming starts afresh: {annotations}"
    );
    running.stop().await;
}

/// A local webhook receiver: every JSON body posted to `/hook/T0KEN`, in order.
async fn webhook_receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (sent, received) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let app = axum::Router::new().route(
        "/hook/T0KEN",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let sent = sent.clone();
            async move {
                let _ = sent.send(body);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}/hook/T0KEN"), received)
}

/// The next notification whose outcome is `outcome` (others skipped), within the deadline.
async fn notified(
    received: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    outcome: &str,
) -> Value {
    let wait = async {
        loop {
            let body = received.recv().await.unwrap();
            if body["outcome"] == outcome {
                return body;
            }
        }
    };
    tokio::time::timeout(DEADLINE, wait)
        .await
        .unwrap_or_else(|_| panic!("no {outcome} notification"))
}

#[tokio::test]
async fn every_outcome_is_notified_naming_objects_and_keys_never_values() {
    let mut seeds = two_workloads();
    seeds[2]["metadata"]["annotations"]["rollsafe.dev/approval"] = json!("required");
    let env = Env::start(seeds).await;
    let (url, mut received) = webhook_receiver().await;
    let sink = rollsafe_notify::Sink {
        url: url.parse().unwrap(),
        format: rollsafe_notify::Format::Json,
    };
    let notifier =
        rollsafe_notify::Notifier::start(vec![sink], rollsafe_notify::NotifyMetrics::default());
    let mut running = env.controller(ControllerSettings {
        notifier: Some(notifier),
        cluster_name: Some("prod-eu".to_owned()),
        page_url: Some("https://rollsafe.example.com/".to_owned()),
        ..settings()
    });
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    // web needs an approval: the hold is notified, with the command that approves.
    env.put(Source::secret(NS, "db").data(&[("password", "s3cr3t-rotated"), ("user", "app")]));
    let pending = notified(&mut received, "pending").await;
    assert_eq!(
        pending,
        json!({
            "outcome": "pending", "title": pending["title"],
            "cluster": "prod-eu", "namespace": NS,
            "workload": {"kind": "Deployment", "name": "web"},
            "causes": [{"kind": "Secret", "name": "db", "keys": ["password"]}],
            "summary": "Roll for changes to Secret/db awaits approval: rollsafe approve -n shop deployment/web",
            "describe": "kubectl describe -n shop deployment/web",
            "link": "https://rollsafe.example.com/",
            "at": pending["at"],
        })
    );
    // Approved: the roll, then its rollout's end.
    approve(&env, "web").await;
    let rolled = notified(&mut received, "rolled").await;
    assert_eq!(rolled["summary"], "Rolled for changes to Secret/db");
    assert_eq!(
        rolled["causes"],
        json!([{"kind": "Secret", "name": "db", "keys": ["password"]}])
    );
    // api consumes all of `other`: its cause has no key list.
    env.put(Source::secret(NS, "other").data(&[("k", "s3cr3t-2")]));
    let api = loop {
        let body = notified(&mut received, "rolled").await;
        if body["workload"]["name"] == "api" {
            break body;
        }
    };
    assert_eq!(
        api["causes"],
        json!([{"kind": "Secret", "name": "other", "keys": []}])
    );
    for body in [&pending, &rolled, &api] {
        let text = body.to_string();
        assert!(!text.contains("s3cr3t"), "a value was sent: {text}");
    }
    running.stop().await;
}
