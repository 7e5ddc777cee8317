//! Every environment variable the chart sets on the server names a setting `rollsafe serve`
//! has: a typo would be ignored silently by the binary and leave a default in force (for
//! example restarts disabled, or impersonation off). The same holds for the controller and
//! `rollsafe watch` (a misspelt variable would leave, say, dry-run off or every namespace
//! watched).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_common;

use std::collections::BTreeSet;

use clap::Args as _;
use install_common::*;
use serde_json::json;

/// Read by the process, not by `serve`'s settings.
const PROCESS_VARIABLES: [&str; 1] = ["RUST_LOG"];

#[test]
fn the_chart_sets_only_settings_the_server_reads() {
    let Some(python) = helm_python() else { return };
    let command = rollsafe_server::config::ServeArgs::augment_args(clap::Command::new("serve"));
    let known: BTreeSet<String> = command
        .get_arguments()
        .filter_map(|arg| arg.get_env())
        .map(|env| env.to_string_lossy().into_owned())
        .chain(PROCESS_VARIABLES.iter().map(|v| v.to_string()))
        .collect();
    let everything = json!({
        "server": {"scope": "cluster", "namespaces": ["a"], "restartEnabled": true,
                   "adminUsers": ["ada@example.com"], "adminGroups": ["platform"]},
        "impersonation": {"enabled": true, "groups": ["platform"]},
        "audit": {"file": {"enabled": true}},
        "tokenReview": {"enabled": true, "audiences": ["rollsafe"]},
        "oidc": {"issuerUrl": "https://idp.example.com", "clientId": "rollsafe",
                 "redirectUrl": "https://rollsafe.example.com/auth/callback",
                 "clientSecret": {"existingSecret": "rollsafe-oidc"}}
    });
    for values in [json!({}), everything] {
        let objects = objects(&render(&python, &values));
        let deployment = of_kind(&objects, "Deployment")[0];
        for variable in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
        {
            let name = variable["name"].as_str().unwrap();
            assert!(
                known.contains(name),
                "the chart sets {name}, which `rollsafe serve` does not read; it reads {known:?}"
            );
        }
    }
}

/// The `[env: NAME=…]` entries of `rollsafe watch --help`: what the command reads.
fn watch_variables() -> BTreeSet<String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(["watch", "--help"])
        .env_clear()
        .output()
        .unwrap();
    assert!(output.status.success(), "rollsafe watch --help failed");
    let help = String::from_utf8(output.stdout).unwrap();
    let known: BTreeSet<String> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .map(str::to_owned)
        .chain(PROCESS_VARIABLES.iter().map(|v| v.to_string()))
        .collect();
    assert!(
        known.contains("ROLLSAFE_WATCH_LEASE_NAME"),
        "the help lists the variables: {help}"
    );
    known
}

#[test]
fn the_chart_sets_only_settings_the_controller_reads() {
    let Some(python) = helm_python() else { return };
    let known = watch_variables();
    let everything = json!({"controller": {
        "enabled": true, "namespaces": ["a", "b"], "selector": "tier=web", "all": true,
        "dryRun": true, "fingerprintKey": {"existingSecret": "key"}
    }});
    for values in [json!({"controller": {"enabled": true}}), everything] {
        let objects = objects(&render(&python, &values));
        let deployment = of_kind(&objects, "Deployment")
            .into_iter()
            .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "controller")
            .unwrap();
        let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap();
        assert!(env.len() >= 8, "{values}: the settings are set");
        for variable in env {
            let name = variable["name"].as_str().unwrap();
            assert!(
                known.contains(name),
                "the chart sets {name}, which `rollsafe watch` does not read; it reads {known:?}"
            );
        }
    }
}
