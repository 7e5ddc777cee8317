//! The Helm chart through Helm's own Go SDK (helm-python-sdk): strict lint and render of every
//! mode, golden snapshots of the rendered manifests, the least-privilege invariants of the
//! generated RBAC, schema refusals, and `rollsafe render` run as a Helm 4 post-renderer plugin.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_common;

use std::path::Path;

use install_common::*;
use serde_json::{Value, json};

/// The modes the chart is rendered in: (snapshot name, values).
fn modes() -> Vec<(&'static str, Value)> {
    vec![
        ("namespace-scope", json!({})),
        (
            "namespace-scope-impersonation",
            json!({"impersonation": {"enabled": true, "groups": ["developers", "platform"]}}),
        ),
        ("cluster-scope", json!({"server": {"scope": "cluster"}})),
        (
            "cluster-scope-namespaces",
            json!({"server": {"scope": "cluster", "namespaces": ["team-a", "team-b"]}}),
        ),
        (
            "cluster-scope-impersonation",
            json!({"server": {"scope": "cluster"},
                   "impersonation": {"enabled": true, "users": ["ada@example.com"]}}),
        ),
        (
            "cluster-scope-namespaces-impersonation",
            json!({"server": {"scope": "cluster", "namespaces": ["team-a", "team-b"]},
                   "impersonation": {"enabled": true, "constrained": true}}),
        ),
        (
            "namespace-scope-impersonation-unconstrained",
            json!({"impersonation": {"enabled": true, "constrained": false,
                                     "groups": ["developers", "platform"]},
                   "tokenReview": {"enabled": true}}),
        ),
        (
            "exposed",
            json!({
                "server": {"restartEnabled": true, "adminGroups": ["platform"], "replicas": 3},
                "session": {"existingSecret": "rollsafe-session"},
                "audit": {"file": {"enabled": true, "existingClaim": "rollsafe-audit"}},
                "ingress": {"enabled": true, "className": "nginx",
                            "hosts": [{"host": "rollsafe.example.com",
                                       "paths": [{"path": "/api", "pathType": "Prefix"}]}],
                            "tls": [{"secretName": "rollsafe-tls", "hosts": ["rollsafe.example.com"]}]},
                "networkPolicy": {"enabled": true,
                                  "apiFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}],
                                  "egress": {"enabled": true, "apiServerCIDRs": ["10.0.0.1/32"]}},
                "metrics": {"serviceMonitor": {"enabled": true, "labels": {"release": "prometheus"}}}
            }),
        ),
        (
            "people-and-machines",
            json!({
                "impersonation": {"enabled": true, "groups": ["developers"]},
                "tokenReview": {"enabled": true, "audiences": ["rollsafe"],
                                "serviceAccounts": ["ci/deployer"]},
                "oidc": {"issuerUrl": "https://idp.example.com", "clientId": "rollsafe",
                         "redirectUrl": "https://rollsafe.example.com/auth/callback",
                         "clientSecret": {"existingSecret": "rollsafe-oidc"},
                         "scopes": ["email", "profile", "groups"]}
            }),
        ),
        ("token-review", json!({"tokenReview": {"enabled": true}})),
        ("controller", json!({"controller": {"enabled": true}})),
        (
            "controller-namespaces",
            json!({"controller": {"enabled": true, "namespaces": ["team-a", "team-b"],
                                  "selector": "tier=web", "all": true, "dryRun": true,
                                  "debounce": "5s", "maxRollsPerMinute": 30, "burst": 5,
                                  "flapLimit": "3/5m", "progressDeadline": "5m",
                                  "rollout": "progressive", "reloaderCompat": true,
                                  "sourceSelector": "rollsafe.dev/managed=true",
                                  "namespaceSelector": "rollsafe.dev/watched=true",
                                  "ignoreNamespaces": ["kube-system"],
                                  "ignoreKinds": ["ConfigMap"], "argoRollouts": true,
                                  "fingerprintKey": {"existingSecret": "rollsafe-fingerprint"},
                                  "restartWindow": "Mon-Fri 09:00-17:00 Europe/Berlin",
                                  "requireApproval": ["team-a"],
                                  "notify": {"existingSecret": "rollsafe-webhooks", "format": "slack"},
                                  "clusterName": "prod-eu",
                                  "pageUrl": "https://rollsafe.example.com/"}}),
        ),
    ]
}

/// The manifests as `helm template` prints them, with the one random value (a generated
/// session key) replaced after checking its shape.
fn golden_text(manifests: &[(String, String)]) -> String {
    let mut text = String::new();
    for (path, manifest) in manifests {
        let manifest = manifest.trim();
        if manifest.is_empty() {
            continue;
        }
        text.push_str(&format!("---\n# Source: {path}\n"));
        for line in manifest.lines() {
            match line.trim_start().strip_prefix("session-secret: ") {
                Some(value) if path.ends_with("session-secret.yaml") => {
                    let value = value.trim_matches('"');
                    assert_eq!(value.len(), 88, "a base64 of 64 random characters");
                    text.push_str("  session-secret: <generated once: 64 random characters>\n");
                }
                _ => {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    text
}

#[test]
fn every_mode_lints_strictly_and_matches_its_golden_render() {
    let Some(python) = helm_python() else { return };
    for (name, values) in modes() {
        let lint = helm(
            &python,
            json!({"op": "lint", "chart": chart_dir(), "values": values, "namespace": NAMESPACE}),
        )
        .unwrap();
        let problems: Vec<&Value> = lint["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["severity"].as_i64().unwrap_or(3) >= 2)
            .collect();
        assert!(
            problems.is_empty(),
            "{name}: lint --strict found {problems:?}"
        );
        assert_eq!(lint["errors"], json!([]), "{name}");

        let manifests = render(&python, &values);
        insta::assert_snapshot!(format!("chart-{name}"), golden_text(&manifests));
        check_invariants(name, &values, &objects(&manifests));
    }
}

/// `impersonation.constrained: auto` follows the cluster's version: the constrained rules from
/// Kubernetes 1.36 (where the ConstrainedImpersonation feature is beta and on), the
/// unconstrained ones before; `true` and `false` whatever the version. The server is told what
/// was granted.
#[test]
fn auto_impersonation_is_constrained_from_kubernetes_1_36() {
    let Some(python) = helm_python() else { return };
    for (constrained, version, expected) in [
        (json!("auto"), "v1.35.4", false),
        (json!("auto"), "v1.36.0", true),
        (json!("auto"), "v1.37.2", true),
        (json!(true), "v1.30.0", true),
        (json!(false), "v1.37.2", false),
    ] {
        let values = json!({"impersonation": {"enabled": true, "constrained": constrained}});
        let objects = objects(&render_for_kube_version(&python, &values, version));
        let deployment = of_kind(&objects, "Deployment")[0];
        let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap();
        let told = env
            .iter()
            .find(|e| e["name"] == "KRYPTON_IMPERSONATION_CONSTRAINED")
            .unwrap();
        assert_eq!(
            told["value"],
            expected.to_string(),
            "{constrained} {version}"
        );
        let verbs: Vec<String> = rules(&objects)
            .iter()
            .flat_map(|(_, _, rule)| rule["verbs"].as_array().unwrap().clone())
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            verbs.contains(&"impersonate:user-info".to_owned()),
            expected,
            "{constrained} {version}: {verbs:?}"
        );
        assert_eq!(
            verbs.contains(&"impersonate".to_owned()),
            !expected,
            "{constrained} {version}: {verbs:?}"
        );
        check_invariants(&format!("auto at {version}"), &values, &objects);
    }
    // Without impersonation nothing is said about it.
    let objects = objects(&render_for_kube_version(&python, &json!({}), "v1.37.2"));
    let deployment = of_kind(&objects, "Deployment")[0];
    assert!(
        !deployment
            .to_string()
            .contains("KRYPTON_IMPERSONATION_CONSTRAINED"),
        "{deployment}"
    );
}

/// What must hold in every mode, whatever the snapshots say.
fn check_invariants(mode: &str, values: &Value, objects: &[Value]) {
    let impersonation = values["impersonation"]["enabled"] == true;
    let token_review = values["tokenReview"]["enabled"] == true;
    // What the RBAC grants follows what the Deployment tells the server (`auto` resolved).
    let constrained = impersonation
        && of_kind(objects, "Deployment").iter().any(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "KRYPTON_IMPERSONATION_CONSTRAINED" && e["value"] == "true")
        });
    let reviewed_accounts: Vec<&str> = values["tokenReview"]["serviceAccounts"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
        .unwrap_or_default();
    let (controller, server): (Vec<Value>, Vec<Value>) = objects
        .iter()
        .cloned()
        .partition(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] == "controller");
    check_controller(mode, values, &controller);
    let objects = &server[..];
    for (kind, namespace, rule) in rules(objects) {
        let verbs: Vec<&str> = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let resources: Vec<&str> = rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let api_groups = &rule["apiGroups"];
        for verb in &verbs {
            assert!(
                ["get", "list", "patch", "impersonate"].contains(verb)
                    || (*verb == "create" && resources == ["tokenreviews"])
                    || verb.starts_with("impersonate:")
                    || verb.starts_with("impersonate-on:"),
                "{mode}: {kind} grants {verb}"
            );
            // The constrained verbs exist only when the Deployment says constrained, and the
            // unconstrained one only when it does not.
            if verb.starts_with("impersonate") {
                assert!(impersonation, "{mode}: {verb} without impersonation");
                assert_eq!(*verb != "impersonate", constrained, "{mode}: {verb}");
            }
        }
        if verbs.iter().any(|v| v.starts_with("impersonate-on:")) {
            // What may be done as the caller: the Secret read, the workload lists and patches,
            // and in cluster scope without a list the namespace list — nothing else.
            let allowed: &[&str] = match resources.as_slice() {
                ["secrets"] => &["get"],
                ["deployments", "statefulsets", "daemonsets"] => &["list", "patch"],
                ["namespaces"] => &["list"],
                other => panic!("{mode}: impersonate-on {other:?}"),
            };
            for verb in &verbs {
                let (mode_name, action) = verb
                    .strip_prefix("impersonate-on:")
                    .and_then(|v| v.split_once(':'))
                    .unwrap_or_else(|| panic!("{mode}: {verb} mixed with impersonate-on"));
                assert!(allowed.contains(&action), "{mode}: {verb} on {resources:?}");
                assert!(
                    mode_name == "user-info" || (mode_name == "serviceaccount" && token_review),
                    "{mode}: {verb}"
                );
            }
            if resources == ["namespaces"] {
                assert_eq!(kind, "ClusterRole", "{mode}");
                assert_eq!(values["server"]["scope"], "cluster", "{mode}");
                assert!(values["server"]["namespaces"].is_null(), "{mode}");
            }
            continue;
        }
        if verbs.iter().any(|v| v.starts_with("impersonate")) {
            // Who may be impersonated: the core group unconstrained, authentication.k8s.io
            // constrained.
            let group = if constrained {
                "authentication.k8s.io"
            } else {
                ""
            };
            assert_eq!(api_groups, &json!([group]), "{mode}");
        }
        if resources.contains(&"tokenreviews") {
            assert!(token_review, "{mode}: tokenreviews without TokenReview");
            assert_eq!(
                (kind.as_str(), verbs.as_slice()),
                ("ClusterRole", &["create"][..])
            );
            continue;
        }
        if resources.contains(&"serviceaccounts") {
            // Only reviewed ServiceAccount tokens are impersonated, by name where listed.
            assert!(
                impersonation && token_review,
                "{mode}: ServiceAccounts touched"
            );
            let verb = if constrained {
                "impersonate:serviceaccount"
            } else {
                "impersonate"
            };
            assert_eq!(verbs, [verb], "{mode}");
            match reviewed_accounts.as_slice() {
                [] => assert_eq!(kind, "ClusterRole", "{mode}"),
                listed => {
                    assert_eq!(kind, "Role", "{mode}");
                    let name = rule["resourceNames"][0].as_str().unwrap();
                    assert!(
                        listed.contains(&format!("{namespace}/{name}").as_str()),
                        "{mode}"
                    );
                    assert_eq!(rule["resourceNames"].as_array().unwrap().len(), 1);
                }
            }
            continue;
        }
        assert!(!resources.contains(&"*") && !verbs.contains(&"*"), "{mode}");
        if resources.contains(&"leases") {
            // The server reads the settings the controller publishes: `get` on its one Lease,
            // in the release namespace (the controller's own rules are checked elsewhere).
            assert_eq!(verbs, ["get"], "{mode}: leases");
            assert_eq!(rule["resourceNames"], json!(["rollsafe-watch"]), "{mode}");
            assert_eq!(
                (kind.as_str(), namespace.as_str()),
                ("Role", NAMESPACE),
                "{mode}"
            );
        }
        if verbs.contains(&"impersonate") || verbs.contains(&"impersonate:user-info") {
            assert!(impersonation, "{mode}: impersonate without impersonation");
            assert_eq!(kind, "ClusterRole");
            assert!(resources.iter().all(|r| *r == "users" || *r == "groups"));
        }
        if resources.contains(&"configmaps") {
            assert_eq!(verbs, ["get"], "{mode}");
            assert_eq!(rule["resourceNames"], json!(["krypton-access"]), "{mode}");
            assert_eq!(namespace, NAMESPACE, "{mode}");
        }
        if resources.contains(&"secrets") {
            assert!(
                !impersonation,
                "{mode}: with impersonation the caller reads Secrets"
            );
            assert_eq!(verbs, ["get"], "{mode}");
        }
    }
    let restart_roles = roles_ending(objects, "-restart");
    match (
        impersonation,
        values["server"]["scope"].as_str(),
        values["server"]["namespaces"].as_array(),
    ) {
        (true, _, _) => assert!(restart_roles.is_empty(), "{mode}"),
        (false, Some("cluster"), None) => {
            assert_eq!(restart_roles.len(), 1);
            assert_eq!(restart_roles[0]["kind"], "ClusterRole");
        }
        (false, Some("cluster"), Some(namespaces)) => {
            assert_roles_in(mode, &restart_roles, namespaces);
        }
        (false, _, _) => {
            assert_eq!(restart_roles.len(), 1);
            assert_eq!(restart_roles[0]["kind"], "Role");
            assert_eq!(restart_roles[0]["metadata"]["namespace"], NAMESPACE);
        }
    }
    // Constrained: what may be done as the caller is bound to the namespaces in scope — a Role
    // in each (the release namespace in namespace scope), a ClusterRole only in cluster scope
    // without a list.
    let impersonate_on = roles_ending(objects, "-impersonate-on");
    match (
        constrained,
        values["server"]["scope"].as_str(),
        values["server"]["namespaces"].as_array(),
    ) {
        (false, _, _) => assert!(impersonate_on.is_empty(), "{mode}"),
        (true, Some("cluster"), None) => {
            assert_eq!(impersonate_on.len(), 1, "{mode}");
            assert_eq!(impersonate_on[0]["kind"], "ClusterRole", "{mode}");
        }
        (true, Some("cluster"), Some(namespaces)) => {
            assert_roles_in(mode, &impersonate_on, namespaces);
        }
        (true, _, _) => {
            assert_roles_in(mode, &impersonate_on, &[json!(NAMESPACE)]);
        }
    }
    if let Some(groups) = values["impersonation"]["groups"].as_array() {
        let impersonate = of_kind(objects, "ClusterRole")
            .into_iter()
            .find(|r| {
                r["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .ends_with("-impersonate")
            })
            .unwrap();
        let rule = impersonate["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resources"] == json!(["groups"]))
            .unwrap();
        assert_eq!(
            &rule["resourceNames"],
            &Value::Array(groups.clone()),
            "{mode}"
        );
    }

    // The pod: hardened, probed, with a grace above the server's own.
    let deployment = of_kind(objects, "Deployment")[0];
    let pod = &deployment["spec"]["template"]["spec"];
    let grace =
        rollsafe_server::serve::shutdown_grace(&rollsafe_kube::Timeouts::default()).as_secs();
    assert!(
        pod["terminationGracePeriodSeconds"].as_u64().unwrap() > grace,
        "{mode}: the kubelet must wait longer than the server's shutdown grace ({grace} s)"
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert!(pod["securityContext"]["runAsUser"].as_u64().unwrap() > 0);
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(container["resources"]["requests"].is_object());
    assert!(container["resources"]["limits"]["memory"].is_string());
    let env = container["env"].as_array().unwrap();
    let session = env.iter().find(|e| e["name"] == "SESSION_SECRET").unwrap();
    assert!(
        session.get("value").is_none(),
        "{mode}: the session key only from a Secret"
    );
    assert!(session["valueFrom"]["secretKeyRef"].is_object());
    for service_account in of_kind(objects, "ServiceAccount") {
        assert_eq!(service_account["automountServiceAccountToken"], false);
    }
    assert!(
        of_kind(objects, "Lease").is_empty()
            && !objects.iter().any(|o| o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("controller"))),
        "{mode}: the controller's objects all carry its component label"
    );
}

/// The Roles and ClusterRoles among `objects` whose names end with `suffix`.
fn roles_ending<'a>(objects: &'a [Value], suffix: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| {
            (o["kind"] == "Role" || o["kind"] == "ClusterRole")
                && o["metadata"]["name"].as_str().unwrap().ends_with(suffix)
        })
        .collect()
}

/// `roles` are Roles, one in each of the listed `namespaces` and nowhere else.
fn assert_roles_in(mode: &str, roles: &[&Value], namespaces: &[Value]) {
    let mut seen: Vec<&str> = roles
        .iter()
        .map(|r| {
            assert_eq!(
                r["kind"], "Role",
                "{mode}: Roles in the listed namespaces only"
            );
            r["metadata"]["namespace"].as_str().unwrap()
        })
        .collect();
    seen.sort();
    let wanted: Vec<&str> = namespaces.iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(seen, wanted, "{mode}");
}

/// The controller's objects: none unless enabled; else its own ServiceAccount, a hardened
/// Deployment with leader election, and exactly the RBAC of docs/watch.md.
fn check_controller(mode: &str, values: &Value, objects: &[Value]) {
    if values["controller"]["enabled"] != true {
        assert!(
            objects.is_empty(),
            "{mode}: nothing of the controller is rendered"
        );
        return;
    }
    let account = of_kind(objects, "ServiceAccount");
    assert_eq!(account.len(), 1, "{mode}: its own ServiceAccount");
    assert_eq!(account[0]["automountServiceAccountToken"], false);
    let account = account[0]["metadata"]["name"].as_str().unwrap();
    assert_ne!(
        account,
        format!("{RELEASE}-rollsafe"),
        "{mode}: not the server's"
    );

    let deployment = of_kind(objects, "Deployment");
    assert_eq!(deployment.len(), 1);
    let pod = &deployment[0]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], account);
    assert_eq!(pod["automountServiceAccountToken"], true);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    assert_eq!(container["args"], json!(["watch", "--leader-elect"]));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "metrics");
    assert!(container["resources"]["limits"]["memory"].is_string());
    let template = &deployment[0]["spec"]["template"]["metadata"];
    assert_eq!(template["annotations"]["prometheus.io/scrape"], "true");
    assert_eq!(template["annotations"]["prometheus.io/path"], "/metrics");
    let env = container["env"].as_array().unwrap();
    let variable = |name: &str| env.iter().find(|e| e["name"] == name).map(|e| &e["value"]);
    assert_eq!(
        variable("ROLLSAFE_WATCH_LEASE_NAMESPACE"),
        Some(&json!(NAMESPACE))
    );
    if values["controller"]["fingerprintKey"]["existingSecret"].is_string() {
        let file = variable("ROLLSAFE_WATCH_FINGERPRINT_KEY_FILE")
            .unwrap()
            .as_str()
            .unwrap();
        let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
        assert!(
            file.starts_with(mount),
            "{mode}: the key file is in the mounted Secret"
        );
        assert_eq!(
            pod["volumes"][0]["secret"]["secretName"],
            "rollsafe-fingerprint"
        );
    }
    if values["controller"]["notify"]["existingSecret"].is_string() {
        // The webhook URLs (they carry tokens) come from a file in the mounted Secret, never
        // from a plain variable.
        let file = variable("ROLLSAFE_WATCH_NOTIFY_WEBHOOK_FILE")
            .unwrap()
            .as_str()
            .unwrap();
        let mounts = container["volumeMounts"].as_array().unwrap();
        let mount = mounts
            .iter()
            .find(|m| m["name"] == "notify-webhooks")
            .unwrap();
        assert!(
            file.starts_with(mount["mountPath"].as_str().unwrap()),
            "{mode}"
        );
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "notify-webhooks")
            .unwrap();
        assert_eq!(volume["secret"]["secretName"], "rollsafe-webhooks");
        assert!(variable("ROLLSAFE_WATCH_NOTIFY_WEBHOOK").is_none());
        assert_eq!(
            variable("ROLLSAFE_WATCH_NOTIFY_FORMAT"),
            Some(&json!("slack"))
        );
    }

    // Every binding names the controller's ServiceAccount, never the server's.
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}])
        );
    }
    let mut workload_rules = vec![
        json!({"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"],
         "verbs": ["list", "watch", "patch"]}),
        json!({"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["list", "watch", "patch"]}),
    ];
    // Argo Rollouts only behind their value.
    if values["controller"]["argoRollouts"] == json!(true) {
        workload_rules.push(
            json!({"apiGroups": ["argoproj.io"], "resources": ["rollouts"],
                                   "verbs": ["list", "watch", "patch"]}),
        );
    }
    workload_rules.push(
        json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}),
    );
    // The eviction strategy (docs/strategies.md), always: a workload chooses it by annotation.
    workload_rules.extend([
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}),
        json!({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}),
        json!({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]}),
    ]);
    let workload_rules = Value::Array(workload_rules);
    let lease_rules = json!([
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["rollsafe-watch"], "verbs": ["get", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}
    ]);
    let roles: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
        .collect();
    // The Namespace watch's ClusterRole, only with controller.namespaceSelector.
    let (namespaces, roles): (Vec<&Value>, Vec<&Value>) = roles.into_iter().partition(|r| {
        r["metadata"]["name"]
            .as_str()
            .unwrap()
            .ends_with("-namespaces")
    });
    if values["controller"]["namespaceSelector"].is_string() {
        assert_eq!(namespaces.len(), 1, "{mode}");
        assert_eq!(namespaces[0]["kind"], "ClusterRole", "{mode}");
        assert_eq!(
            namespaces[0]["rules"],
            json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}]),
            "{mode}"
        );
    } else {
        assert!(
            namespaces.is_empty(),
            "{mode}: no namespace access without the selector"
        );
    }
    let (lease, workload): (Vec<&Value>, Vec<&Value>) = roles
        .into_iter()
        .partition(|r| r["metadata"]["name"].as_str().unwrap().ends_with("-lease"));
    assert_eq!(lease.len(), 1);
    assert_eq!(
        lease[0]["kind"], "Role",
        "{mode}: Leases never cluster-wide"
    );
    assert_eq!(lease[0]["metadata"]["namespace"], NAMESPACE);
    assert_eq!(lease[0]["rules"], lease_rules, "{mode}");
    match values["controller"]["namespaces"].as_array() {
        None => {
            assert_eq!(workload.len(), 1);
            assert_eq!(workload[0]["kind"], "ClusterRole");
        }
        Some(namespaces) => {
            assert_roles_in(mode, &workload, namespaces);
        }
    }
    for role in workload {
        assert_eq!(role["rules"], workload_rules, "{mode}");
    }
}

#[test]
fn the_chart_default_shutdown_grace_is_the_servers() {
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap())
            .unwrap();
    assert_eq!(
        values["server"]["shutdownGraceSeconds"].as_u64().unwrap(),
        rollsafe_server::serve::shutdown_grace(&rollsafe_kube::Timeouts::default()).as_secs(),
        "server.shutdownGraceSeconds must follow the server's shutdown_grace()"
    );
}

#[test]
fn the_schema_refuses_bad_values_at_install_time() {
    let Some(python) = helm_python() else { return };
    let refused = [
        (
            "a controller running as root",
            json!({"controller": {"enabled": true, "podSecurityContext": {"runAsNonRoot": false, "runAsUser": 0}}}),
        ),
        (
            "a controller debounce without a unit",
            json!({"controller": {"enabled": true, "debounce": "2"}}),
        ),
        (
            "an unknown controller rollout mode",
            json!({"controller": {"enabled": true, "rollout": "canary"}}),
        ),
        (
            "an unknown kind of source to ignore",
            json!({"controller": {"enabled": true, "ignoreKinds": ["Pod"]}}),
        ),
        (
            "a zero controller progress deadline",
            json!({"controller": {"enabled": true, "progressDeadline": "0s"}}),
        ),
        (
            "a controller Lease moved through extraEnv",
            json!({"controller": {"enabled": true, "extraEnv": [{"name": "ROLLSAFE_WATCH_LEASE_NAME", "value": "x"}]}}),
        ),
        (
            "a controller namespace that is not a DNS label",
            json!({"controller": {"enabled": true, "namespaces": ["Team_A"]}}),
        ),
        (
            "an unknown scope",
            json!({"server": {"scope": "everything"}}),
        ),
        (
            "namespaces in namespace scope",
            json!({"server": {"namespaces": ["a"]}}),
        ),
        (
            "a namespace that is not a DNS label",
            json!({"server": {"scope": "cluster", "namespaces": ["Team_A"]}}),
        ),
        (
            "a session key in clear",
            json!({"session": {"secret": "0123456789abcdef0123456789abcdef"}}),
        ),
        (
            "a session key through extraEnv",
            json!({"server": {"extraEnv": [{"name": "SESSION_SECRET", "value": "x"}]}}),
        ),
        (
            "authentication switched off",
            json!({"server": {"extraEnv": [{"name": "AUTH_DISABLED", "value": "true"}]}}),
        ),
        (
            "OpenID Connect without a client id",
            json!({"oidc": {"issuerUrl": "https://idp.example.com",
                            "redirectUrl": "https://rollsafe.example.com/auth/callback"}}),
        ),
        (
            "OpenID Connect with a redirect elsewhere than /auth/callback",
            json!({"oidc": {"issuerUrl": "https://idp.example.com", "clientId": "rollsafe",
                            "redirectUrl": "https://rollsafe.example.com/"}}),
        ),
        (
            "an OpenID client secret in clear",
            json!({"oidc": {"clientSecret": {"value": "s3cr3t"}}}),
        ),
        (
            "a ServiceAccount without its namespace",
            json!({"tokenReview": {"enabled": true, "serviceAccounts": ["deployer"]}}),
        ),
        (
            "impersonating a reserved group",
            json!({"impersonation": {"enabled": true, "groups": ["system:masters"]}}),
        ),
        (
            "impersonating a ServiceAccount user",
            json!({"impersonation": {"enabled": true, "users": ["system:serviceaccount:kube-system:default"]}}),
        ),
        (
            "a constraint that is neither a boolean nor auto",
            json!({"impersonation": {"enabled": true, "constrained": "yes"}}),
        ),
        (
            "a writable root filesystem",
            json!({"server": {"securityContext": {"readOnlyRootFilesystem": false, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}}),
        ),
        (
            "running as root",
            json!({"server": {"podSecurityContext": {"runAsNonRoot": false, "runAsUser": 0}}}),
        ),
        (
            "a grace below the server's",
            json!({"server": {"shutdownGraceSeconds": 30}}),
        ),
        (
            "reserved groups allowed",
            json!({"server": {"allowedGroups": ["system:*"]}}),
        ),
        (
            "no restart at all",
            json!({"server": {"maxConcurrentRestarts": 0}}),
        ),
        (
            "egress without the API server",
            json!({"networkPolicy": {"enabled": true, "egress": {"enabled": true}}}),
        ),
        (
            "both PDB bounds",
            json!({"server": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1, "maxUnavailable": 1}}}),
        ),
        ("an unknown key", json!({"replicas": 3})),
        (
            "a string where a number goes",
            json!({"server": {"replicas": "two"}}),
        ),
    ];
    for (why, values) in refused {
        let answer = helm(
            &python,
            json!({"op": "validate", "chart": chart_dir(), "values": values}),
        )
        .unwrap();
        assert_eq!(answer["ok"], false, "{why}: accepted {values}");
        // The same values fail a real render (what `helm install` does first).
        let render = helm(
            &python,
            json!({"op": "render", "chart": chart_dir(), "values": values,
                   "name": RELEASE, "namespace": NAMESPACE}),
        );
        assert_eq!(
            render.map(|_| ()).unwrap_err()["error"],
            "HelmValuesError",
            "{why}"
        );
    }
    for (mode, values) in modes() {
        let answer = helm(
            &python,
            json!({"op": "validate", "chart": chart_dir(), "values": values}),
        )
        .unwrap();
        assert_eq!(answer["ok"], true, "{mode}: {answer}");
    }
}

/// `rollsafe render` as Helm 4 runs post-renderers: the plugin of `deploy/helm-plugin`, found
/// under `$HELM_PLUGINS`, run by Helm's own install action (client-side dry run). Its output
/// is the same as piping the chart's manifests into `rollsafe render`, as Helm 3's
/// `--post-renderer <executable>` does.
#[test]
fn rollsafe_render_runs_as_a_helm_4_post_renderer_plugin() {
    let Some(python) = helm_python() else { return };
    let plugins = tempfile::tempdir().unwrap();
    copy_dir(
        &repo().join("deploy/helm-plugin/rollsafe-render"),
        &plugins.path().join("rollsafe-render"),
    );
    let binary = assert_cmd::cargo::cargo_bin("rollsafe");
    let path = std::env::join_paths(
        std::iter::once(binary.parent().unwrap().to_path_buf()).chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        ),
    )
    .unwrap();
    let values = json!({"session": {"existingSecret": "rollsafe-session"}});
    let env = [
        ("HELM_PLUGINS", plugins.path().as_os_str().to_owned()),
        ("PATH", path),
    ];
    let installed = helm_with_env(
        &python,
        json!({"op": "install", "chart": chart_dir(), "values": values, "name": RELEASE,
               "namespace": NAMESPACE, "postRenderer": "rollsafe-render"}),
        &env,
    )
    .unwrap_or_else(|error| panic!("helm install --post-renderer failed: {error}"));
    // `--post-renderer-args` reach `rollsafe render`: a bad one fails the install, a good one
    // renders.
    let refused = helm_with_env(
        &python,
        json!({"op": "install", "chart": chart_dir(), "values": values, "name": RELEASE,
               "namespace": NAMESPACE, "postRenderer": "rollsafe-render",
               "postRendererArgs": ["--workload-type", "cronjob"]}),
        &env,
    );
    assert!(refused.is_err(), "{refused:?}");
    let with_args = helm_with_env(
        &python,
        json!({"op": "install", "chart": chart_dir(), "values": values, "name": RELEASE,
               "namespace": NAMESPACE, "postRenderer": "rollsafe-render",
               "postRendererArgs": ["--workload-type", "deployment"]}),
        &env,
    )
    .unwrap();
    assert!(
        with_args["manifest"]
            .as_str()
            .unwrap()
            .contains("openchoreo.dev/dp-resource-hash")
    );
    let manifest = installed["manifest"].as_str().unwrap();
    let objects: Vec<Value> = serde_saphyr::from_multiple::<Value>(manifest)
        .unwrap()
        .into_iter()
        .filter(Value::is_object)
        .collect();
    let deployment = of_kind(&objects, "Deployment")[0];
    let hash = deployment["spec"]["template"]["metadata"]["annotations"]
        ["openchoreo.dev/dp-resource-hash"]
        .as_str()
        .expect("the post-renderer annotated the pod template");

    // Helm 3's contract: the whole rendered stream on stdin, the result on stdout.
    let manifests: Vec<(String, String)> = render(&python, &values)
        .into_iter()
        .filter(|(path, _)| !path.ends_with("NOTES.txt"))
        .collect();
    let stream = golden_text(&manifests);
    let output = std::process::Command::new(&binary)
        .arg("render")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(stream.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let piped: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(std::str::from_utf8(&output.stdout).unwrap()).unwrap();
    let piped_deployment = piped.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        piped_deployment["spec"]["template"]["metadata"]["annotations"]["openchoreo.dev/dp-resource-hash"],
        hash
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
