use super::*;
use serde_json::json;

/// A Deployment in `shop` reading Secret `db`'s `password` as an env var, Secret `tls` whole
/// from a volume and ConfigMap `settings` with envFrom, pulling with `regcred`.
fn deployment(annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop", "annotations": annotations},
        "spec": {"template": {"spec": {
            "imagePullSecrets": [{"name": "regcred"}],
            "containers": [{"name": "app",
                "env": [{"name": "PASSWORD",
                         "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                        {"name": "STAKATER_DB_SECRET", "value": "0a1b"}],
                "envFrom": [{"configMapRef": {"name": "settings"}}],
                "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]}],
            "volumes": [{"name": "tls", "secret": {"secretName": "tls"}}]}}}
    })
}

fn analysed(object: &Value, sources: &BTreeMap<SourceId, Marks>) -> WorkloadReport {
    let kind = Kind::of_object(object).unwrap();
    analyse(kind, object, sources, &Scope::default()).unwrap()
}

fn codes(report: &WorkloadReport) -> Vec<DifferenceCode> {
    report.differences.iter().map(|d| d.code).collect()
}

fn consumed(report: &WorkloadReport) -> Vec<(String, Option<Vec<String>>, bool)> {
    report
        .consumes
        .iter()
        .map(|c| {
            (
                format!("{}/{}", c.kind.as_str(), c.name),
                c.keys.clone(),
                c.rolls,
            )
        })
        .collect()
}

fn marked(kind: TargetKind, name: &str, marks: Marks) -> BTreeMap<SourceId, Marks> {
    BTreeMap::from([(("shop".to_owned(), kind, name.to_owned()), marks)])
}

#[test]
fn a_workload_without_reloader_annotations_is_not_reported() {
    let object = deployment(json!({"rollsafe.dev/watch": "true"}));
    assert!(
        analyse(
            Kind::Deployment,
            &object,
            &BTreeMap::new(),
            &Scope::default()
        )
        .is_none()
    );
}

#[test]
fn auto_watches_every_reference_with_key_precision() {
    let report = analysed(
        &deployment(json!({"reloader.stakater.com/auto": "true"})),
        &BTreeMap::new(),
    );
    assert_eq!(report.watch.state, WatchState::Watched);
    assert_eq!(report.watch.decided_by, DecidedBy::Reloader);
    assert_eq!(
        consumed(&report),
        [
            ("ConfigMap/settings".to_owned(), None, true),
            (
                "Secret/db".to_owned(),
                Some(vec!["password".to_owned()]),
                true
            ),
            ("Secret/regcred".to_owned(), None, true),
            ("Secret/tls".to_owned(), None, true),
        ]
    );
    assert_eq!(
        codes(&report),
        [DifferenceCode::KeyLevel, DifferenceCode::NotSeenByReloader]
    );
    assert_eq!(
        report.differences[0].message,
        "rolls only when key \"password\" of Secret db changes; Reloader restarted it on any change \
         of db"
    );
    assert_eq!(report.differences[1].objects, ["Secret/regcred"]);
    assert_eq!(
        report.leftovers,
        ["env STAKATER_DB_SECRET in container app"]
    );
}

#[test]
fn typed_auto_and_reload_lists() {
    let report = analysed(
        &deployment(json!({"secret.reloader.stakater.com/auto": "true"})),
        &BTreeMap::new(),
    );
    let names: Vec<String> = consumed(&report).into_iter().map(|c| c.0).collect();
    assert_eq!(names, ["Secret/db", "Secret/regcred", "Secret/tls"]);

    let report = analysed(
        &deployment(json!({"configmap.reloader.stakater.com/reload": "settings, other"})),
        &BTreeMap::new(),
    );
    assert_eq!(report.watch.state, WatchState::Watched);
    assert_eq!(
        consumed(&report),
        [
            ("ConfigMap/other".to_owned(), None, true),
            ("ConfigMap/settings".to_owned(), None, true),
        ]
    );
    assert!(report.differences.is_empty(), "{:?}", report.differences);
}

#[test]
fn auto_false_is_not_watched_though_reloader_honoured_the_lists() {
    let report = analysed(
        &deployment(json!({"reloader.stakater.com/auto": "false",
                           "secret.reloader.stakater.com/reload": "db"})),
        &BTreeMap::new(),
    );
    assert_eq!(report.watch.state, WatchState::NotWatched);
    assert_eq!(
        report.watch.reason,
        "not watched: reloader.stakater.com/auto is \"false\""
    );
    assert!(report.consumes.is_empty());
    assert_eq!(codes(&report), [DifferenceCode::AutoFalseWithReload]);
    assert_eq!(report.differences[0].objects, ["Secret/db"]);
}

#[test]
fn search_watches_the_referenced_objects_that_carry_match() {
    let sources = marked(
        TargetKind::Secret,
        "db",
        Marks {
            matched: true,
            ..Marks::default()
        },
    );
    let report = analysed(
        &deployment(json!({"reloader.stakater.com/search": "true"})),
        &sources,
    );
    assert_eq!(report.watch.state, WatchState::Watched);
    assert!(
        report.watch.reason.contains("reloader.stakater.com/search"),
        "{}",
        report.watch.reason
    );
    let rolls: Vec<(String, bool, Option<&str>)> = report
        .consumes
        .iter()
        .map(|c| {
            (
                format!("{}/{}", c.kind.as_str(), c.name),
                c.rolls,
                c.opted_out_by,
            )
        })
        .collect();
    let unmatched = Some("no reloader.stakater.com/match");
    assert_eq!(
        rolls,
        [
            ("ConfigMap/settings".to_owned(), false, unmatched),
            ("Secret/db".to_owned(), true, None),
            ("Secret/regcred".to_owned(), false, unmatched),
            ("Secret/tls".to_owned(), false, unmatched),
        ]
    );
    assert!(
        !codes(&report).contains(&DifferenceCode::UnsupportedAnnotation),
        "search is implemented: {:?}",
        codes(&report)
    );
}

#[test]
fn every_unsupported_annotation_is_reported() {
    let report = analysed(
        &deployment(json!({
            "reloader.stakater.com/auto": "true",
            "reloader.stakater.com/rollout-strategy": "restart",
            "deployment.reloader.stakater.com/pause-period": "5m",
            "secrets.exclude.reloader.stakater.com/reload": "tls",
        })),
        &BTreeMap::new(),
    );
    assert_eq!(report.watch.state, WatchState::Watched);
    let unsupported: Vec<(&str, &[String])> = report
        .differences
        .iter()
        .filter(|d| d.code == DifferenceCode::UnsupportedAnnotation)
        .map(|d| (d.annotation.as_deref().unwrap(), d.objects.as_slice()))
        .collect();
    assert_eq!(
        unsupported,
        [
            ("deployment.reloader.stakater.com/pause-period", &[][..]),
            ("reloader.stakater.com/rollout-strategy", &[][..]),
            (
                "secrets.exclude.reloader.stakater.com/reload",
                &["Secret/tls".to_owned()][..]
            ),
        ]
    );
    let messages: Vec<&str> = report
        .differences
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages[..3]
            .iter()
            .all(|m| m.contains("logs it once as reloader_unsupported")),
        "{messages:?}"
    );
    assert!(messages[1].contains("reloader_unsupported"), "{messages:?}");
}

#[test]
fn a_regex_entry_watches_the_matching_names_it_knows() {
    let marks = BTreeMap::from([
        (
            ("shop".to_owned(), TargetKind::Secret, "db-main".to_owned()),
            Marks::default(),
        ),
        (
            ("shop".to_owned(), TargetKind::Secret, "api".to_owned()),
            Marks::default(),
        ),
        (
            ("other".to_owned(), TargetKind::Secret, "db-x".to_owned()),
            Marks::default(),
        ),
    ]);
    let report = analysed(
        &deployment(json!({"secret.reloader.stakater.com/reload": "db-.*"})),
        &marks,
    );
    assert_eq!(report.watch.state, WatchState::Watched);
    assert_eq!(report.watch.code, None);
    let names: Vec<&str> = report.consumes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["db-main"], "its namespace's matching names only");
    assert_eq!(codes(&report), [DifferenceCode::RegexEntry]);
    assert!(report.differences[0].message.contains("whole name matches"));
}

#[test]
fn an_entry_that_does_not_compile_leaves_the_workload_unwatched() {
    let report = analysed(
        &deployment(json!({"secret.reloader.stakater.com/reload": "db-(.*"})),
        &BTreeMap::new(),
    );
    assert_eq!(report.watch.state, WatchState::NotWatched);
    assert_eq!(report.watch.code, Some("reload_pattern"));
    assert_eq!(codes(&report), [DifferenceCode::RegexEntry]);
    assert!(report.differences[0].message.contains("(reload_pattern)"));
}

#[test]
fn rollsafe_watch_takes_precedence() {
    let report = analysed(
        &deployment(json!({"reloader.stakater.com/search": "true",
                           "rollsafe.dev/watch": "secret/db"})),
        &BTreeMap::new(),
    );
    assert_eq!(report.watch.decided_by, DecidedBy::RollsafeWatch);
    assert_eq!(report.rollsafe_watch.as_deref(), Some("secret/db"));
    assert_eq!(consumed(&report), [("Secret/db".to_owned(), None, true)]);
    assert_eq!(codes(&report), [DifferenceCode::RollsafeWatchFirst]);
}

#[test]
fn opted_out_sources_roll_nothing() {
    let mut sources = marked(
        TargetKind::Secret,
        "tls",
        Marks {
            ignore: true,
            ..Marks::default()
        },
    );
    sources.extend(marked(
        TargetKind::ConfigMap,
        "settings",
        Marks {
            opted_out_by: Some(WATCH),
            ..Marks::default()
        },
    ));
    let report = analysed(
        &deployment(json!({"reloader.stakater.com/auto": "true"})),
        &sources,
    );
    let opted_out: Vec<(&str, Option<&str>)> = report
        .consumes
        .iter()
        .filter(|c| !c.rolls)
        .map(|c| (c.name.as_str(), c.opted_out_by))
        .collect();
    assert_eq!(
        opted_out,
        [("settings", Some(WATCH)), ("tls", Some(IGNORE))]
    );
    assert_eq!(
        codes(&report)[2..],
        [
            DifferenceCode::OptedOutSource,
            DifferenceCode::IgnoredSource
        ]
    );
}

#[test]
fn annotations_on_the_pod_template_only_are_not_read() {
    let mut object = deployment(json!({}));
    object["spec"]["template"]["metadata"] = json!({"annotations": {
        "reloader.stakater.com/auto": "true",
        "reloader.stakater.com/last-reloaded-from": "{\"type\":\"SECRET\"}"}});
    let report = analysed(&object, &BTreeMap::new());
    assert!(report.reloader_annotations.is_empty());
    assert_eq!(
        report.template_annotations.keys().collect::<Vec<_>>(),
        ["reloader.stakater.com/auto"]
    );
    assert_eq!(report.watch.state, WatchState::NotWatched);
    assert_eq!(codes(&report), [DifferenceCode::TemplateAnnotations]);
    assert_eq!(
        report.leftovers,
        [
            "pod-template annotation reloader.stakater.com/last-reloaded-from",
            "env STAKATER_DB_SECRET in container app"
        ]
    );
}

#[test]
fn a_cron_job_is_watched_and_rolls_with_its_next_job() {
    let object = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "shop",
                     "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "job",
            "envFrom": [{"secretRef": {"name": "db"}}]}]}}}}}});
    let report = analysed(&object, &BTreeMap::new());
    assert_eq!(report.watch.state, WatchState::Watched);
    assert_eq!(report.consumes.len(), 1);
    assert_eq!(codes(&report), [DifferenceCode::NextRun]);
}

#[test]
fn an_argo_rollout_is_watched_with_the_flag_said() {
    let object = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "shop",
                     "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"template": {"spec": {"containers": [{"name": "app",
            "envFrom": [{"secretRef": {"name": "db"}}]}]}}}});
    let report = analysed(&object, &BTreeMap::new());
    assert_eq!(report.watch.state, WatchState::Watched);
    assert_eq!(codes(&report), [DifferenceCode::ArgoRollouts]);
}

#[test]
fn a_namespace_left_out_by_the_values_is_not_watched() {
    let scope = Scope {
        ignore_namespaces: BTreeSet::from(["shop".to_owned()]),
        ..Scope::default()
    };
    let object = deployment(json!({"reloader.stakater.com/auto": "true"}));
    let report = analyse(Kind::Deployment, &object, &BTreeMap::new(), &scope).unwrap();
    assert_eq!(report.watch.state, WatchState::NotWatched);
    assert!(report.consumes.is_empty() && report.differences.is_empty());

    let scope = Scope {
        ignore_kinds: BTreeSet::from([TargetKind::ConfigMap]),
        ..Scope::default()
    };
    let report = analyse(Kind::Deployment, &object, &BTreeMap::new(), &scope).unwrap();
    assert_eq!(
        report.consumes[0].opted_out_by,
        Some("controller.ignoreKinds")
    );
}
