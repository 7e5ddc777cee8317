//! Every environment variable the chart sets on the server names a setting `rollsafe serve`
//! has: a typo would be ignored silently by the binary and leave a default in force (for
//! example restarts disabled, or impersonation off).

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
        "audit": {"file": {"enabled": true}}
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
