use super::*;

fn migrated(yaml: &str) -> Migration {
    let values: Value = serde_saphyr::from_str(yaml).unwrap();
    migrate(Some(&values)).unwrap()
}

fn settings(migration: &Migration) -> (Vec<(&str, &str)>, Vec<&str>) {
    (
        migration
            .mapped
            .iter()
            .map(|m| (m.setting.as_str(), m.to))
            .collect(),
        migration
            .unmapped
            .iter()
            .map(|u| u.setting.as_str())
            .collect(),
    )
}

#[test]
fn without_a_file_the_controller_is_enabled_with_reloader_compat() {
    let migration = migrate(None).unwrap();
    assert_eq!(
        migration.values,
        json!({"controller": {"enabled": true, "reloaderCompat": true}})
    );
    assert!(migration.mapped.is_empty() && migration.unmapped.is_empty());
    assert_eq!(migration.scope, Scope::default());
    // Reloader's defaults, written out, move nothing either.
    let defaults = migrated(
        "reloader:\n  autoReloadAll: false\n  watchGlobally: true\n  reloadStrategy: default\n  \
         ignoreNamespaces: \"\"\n  logLevel: info\n  pprofAddr: \":6060\"\n  enableHA: false\n  \
         deployment:\n    replicas: 1\n    nodeSelector:\n    resources: {}\n",
    );
    assert_eq!(defaults, migration);
}

#[test]
fn each_known_setting_is_moved_or_said_why_not() {
    let migration = migrated(
        r#"
namespace: tools
image:
  tag: v1.4.21
reloader:
  watchGlobally: true
  ignoreNamespaces: "kube-system, monitoring"
  namespaceSelector: "team=a"
  resourceLabelSelector: "reloader=*,tier=web"
  ignoreConfigMaps: true
  autoReloadAll: true
  enableHA: true
  logLevel: warning
  reloadStrategy: env-vars
  reloadOnCreate: true
  syncAfterRestart: true
  isArgoRollouts: true
  webhookUrl: "https://example.com/hook"
  rbac:
    enabled: true
  somethingNew: 1
  deployment:
    replicas: 3
    nodeSelector:
      pool: infra
    resources:
      limits:
        memory: 512Mi
    image:
      name: stakater/reloader
"#,
    );
    assert_eq!(
        migration.values,
        json!({"controller": {
            "enabled": true, "reloaderCompat": true,
            "namespaceSelector": "team=a",
            "ignoreNamespaces": ["kube-system", "monitoring"],
            "sourceSelector": "reloader,tier=web",
            "ignoreKinds": ["ConfigMap"],
            "argoRollouts": true,
            "all": true,
            "replicas": 3,
            "logLevel": "warn",
            "nodeSelector": {"pool": "infra"}
        }})
    );
    let (mapped, unmapped) = settings(&migration);
    assert_eq!(
        mapped,
        [
            ("reloader.namespaceSelector", "controller.namespaceSelector"),
            ("reloader.ignoreNamespaces", "controller.ignoreNamespaces"),
            (
                "reloader.resourceLabelSelector",
                "controller.sourceSelector"
            ),
            ("reloader.ignoreConfigMaps", "controller.ignoreKinds"),
            ("reloader.isArgoRollouts", "controller.argoRollouts"),
            ("reloader.autoReloadAll", "controller.all"),
            (
                "reloader.enableHA, reloader.deployment.replicas",
                "controller.replicas"
            ),
            ("reloader.logLevel", "controller.logLevel"),
            (
                "reloader.deployment.nodeSelector",
                "controller.nodeSelector"
            ),
        ]
    );
    assert_eq!(
        unmapped,
        [
            "reloader.reloadStrategy",
            "reloader.webhookUrl",
            "reloader.reloadOnCreate",
            "reloader.syncAfterRestart",
            "reloader.deployment.resources",
            "image",
            "reloader.rbac",
            "reloader.somethingNew",
            "reloader.deployment.image",
        ]
    );
    assert!(
        migration.unmapped[7]
            .reason
            .starts_with("not a Reloader setting")
    );
    assert_eq!(
        migration.scope.ignore_namespaces,
        BTreeSet::from(["kube-system".to_owned(), "monitoring".to_owned()])
    );
    assert_eq!(
        migration.scope.ignore_kinds,
        BTreeSet::from([TargetKind::ConfigMap])
    );
}

#[test]
fn scoped_namespaces() {
    let migration = migrated("reloader:\n  watchGlobally: false\n  namespaces: [b, a]\n");
    assert_eq!(
        migration.values["controller"]["namespaces"],
        json!(["a", "b"])
    );
    assert!(migration.mapped[0].note.is_some());

    let migration = migrated("namespace: tools\nreloader:\n  namespaces: \"b,a\"\n");
    assert_eq!(
        migration.values["controller"]["namespaces"],
        json!(["a", "b", "tools"])
    );

    let migration = migrated("namespace: tools\nreloader:\n  watchGlobally: false\n");
    assert_eq!(
        migration.values["controller"]["namespaces"],
        json!(["tools"])
    );
    assert_eq!(
        migration.scope.namespaces,
        BTreeSet::from(["tools".to_owned()])
    );

    // Without the namespace Reloader ran in, only a person can say it.
    let migration = migrated("reloader:\n  watchGlobally: false\n  ignoreNamespaces: x\n");
    assert!(migration.values["controller"].get("namespaces").is_none());
    assert_eq!(
        settings(&migration).1,
        ["reloader.watchGlobally", "reloader.ignoreNamespaces"]
    );
}

#[test]
fn a_values_file_of_the_wrong_shape_is_refused() {
    let refused = |yaml: &str| {
        let values: Value = serde_saphyr::from_str(yaml).unwrap();
        migrate(Some(&values)).unwrap_err().to_string()
    };
    assert_eq!(
        refused("- a\n- b\n"),
        "the values document is not a mapping"
    );
    assert_eq!(
        refused("reloader: yes please\n"),
        "reloader is not a mapping"
    );
    assert_eq!(
        refused("reloader:\n  watchGlobally: \"no\"\n"),
        "reloader.watchGlobally is not true or false"
    );
    assert_eq!(
        refused("reloader:\n  deployment:\n    replicas: two\n"),
        "reloader.deployment.replicas is not a whole number"
    );
    assert_eq!(
        refused("reloader:\n  ignoreNamespaces: \"Kube_System\"\n"),
        "reloader.ignoreNamespaces holds \"Kube_System\", which is not a namespace name"
    );
}
