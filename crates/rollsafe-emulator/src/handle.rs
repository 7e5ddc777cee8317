//! Test-side access to a running emulator ([`Handle`]), and the start state it resets to.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::error::EmulatorError;
use crate::faults::{Fault, FaultState};
use crate::observe::{InFlightStat, RequestLogEntry};
use crate::state::Shared;
use rollsafe_emulator_registry::controllers::rollout_sim::{RolloutPace, RolloutPaceChange};
use rollsafe_emulator_registry::identity::Identity;
use rollsafe_emulator_registry::{Cluster, Rollout};
use rollsafe_emulator_types::resources;

/// The user name of the admin identity.
pub const ADMIN_USER: &str = "system:admin";
/// The kubeconfig context (and user entry) of the admin identity.
pub const ADMIN_CONTEXT: &str = "admin";
/// Namespaces every emulator starts with.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The start state: the default namespaces, the bootstrap RBAC objects, then the seeds.
pub(crate) fn load_base(store: &mut Cluster, seeds: &[Value]) -> Result<(), EmulatorError> {
    for ns in DEFAULT_NAMESPACES {
        store.ensure_namespace(ns)?;
    }
    for obj in rollsafe_emulator_registry::authorizer::bootstrap_objects() {
        store.upsert(obj)?;
    }
    for (index, obj) in seeds.iter().enumerate() {
        store
            .upsert(obj.clone())
            .map_err(|source| EmulatorError::Seed {
                index,
                kind: obj
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name: obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// Test-side access to a running emulator: the in-process equivalent of the admin API.
#[derive(Debug, Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

fn resource_id(plural: &str) -> Result<resources::ResId, EmulatorError> {
    resources::find_plural(plural).ok_or_else(|| EmulatorError::UnknownResource(plural.to_string()))
}

/// Tokens made by TokenRequest authenticate ServiceAccounts; they are not configured
/// identities (no kubeconfig entry, not listed).
fn is_service_account_token(identity: &Identity) -> bool {
    identity.name.starts_with("system:serviceaccount:")
}

fn yaml_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

impl Handle {
    /// `http://127.0.0.1:<port>`: plain HTTP (the kube crate sends tokens over it).
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// `https://127.0.0.1:<port>`: the same port with TLS, verified with [`Handle::ca_pem`].
    /// kubectl needs it: client-go sends no credentials to an `http://` server.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.shared.addr)
    }

    /// The PEM of the CA that signed the emulator's server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.shared.tls.ca_pem
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The token of the admin identity (`system:admin`, group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.shared.admin_token
    }

    /// Names of the configured identities (without the admin), sorted.
    pub fn identity_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .shared
            .identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|i| i.name != ADMIN_USER && !is_service_account_token(i))
            .map(|i| i.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The token of an identity (`"admin"` or [`ADMIN_USER`] for the admin).
    pub fn token_for(&self, name: &str) -> Option<String> {
        let wanted = if name == ADMIN_CONTEXT {
            ADMIN_USER
        } else {
            name
        };
        self.shared
            .identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|i| i.name == wanted)
            .map(|i| i.token.clone())
    }

    /// Adds an identity while running.
    pub fn add_identity(&self, identity: Identity) -> Result<(), EmulatorError> {
        let mut map = self
            .shared
            .identities
            .write()
            .unwrap_or_else(|e| e.into_inner());
        check_identity(&identity, &map)?;
        map.insert(identity.token.clone(), identity);
        Ok(())
    }

    /// A kubeconfig with one cluster (the `https://` URL and the CA), a user and a context per
    /// identity (named after it), and the context `admin` (current) for the admin identity.
    /// Namespace of every context: `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        let mut entries: Vec<(String, String)> =
            vec![(ADMIN_CONTEXT.to_string(), self.shared.admin_token.clone())];
        let mut others: Vec<(String, String)> = self
            .shared
            .identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|i| i.name != ADMIN_USER && !is_service_account_token(i))
            .map(|i| (i.name.clone(), i.token.clone()))
            .collect();
        others.sort();
        entries.extend(others);
        let mut out = String::new();
        out.push_str("apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n");
        out.push_str(&format!("    server: {}\n", yaml_str(&self.https_url())));
        out.push_str(&format!(
            "    certificate-authority-data: {}\n",
            yaml_str(&base64::engine::general_purpose::STANDARD.encode(self.ca_pem()))
        ));
        out.push_str("contexts:\n");
        for (name, _) in &entries {
            out.push_str(&format!(
                "- name: {n}\n  context:\n    cluster: emulator\n    user: {n}\n    namespace: default\n",
                n = yaml_str(name)
            ));
        }
        out.push_str(&format!(
            "current-context: {}\nusers:\n",
            yaml_str(ADMIN_CONTEXT)
        ));
        for (name, token) in &entries {
            out.push_str(&format!(
                "- name: {}\n  user:\n    token: {}\n",
                yaml_str(name),
                yaml_str(token)
            ));
        }
        out.push_str("preferences: {}\n");
        out
    }

    /// Writes [`Handle::kubeconfig_yaml`] to a file (mode 0600 on Unix).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EmulatorError> {
        let write_err = |source| EmulatorError::Write {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(path, self.kubeconfig_yaml()).map_err(write_err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(write_err)?;
        }
        Ok(())
    }

    /// Registers a fault; returns its id.
    pub fn add_fault(&self, fault: Fault) -> u64 {
        self.shared.faults().add(fault)
    }

    /// Removes a fault; whether it existed.
    pub fn remove_fault(&self, id: u64) -> bool {
        self.shared.faults().remove(id)
    }

    /// Removes all faults.
    pub fn clear_faults(&self) {
        self.shared.faults().clear();
    }

    /// Registered faults with their counters.
    pub fn faults(&self) -> Vec<FaultState> {
        self.shared.faults().list()
    }

    /// The request log (API requests only, not the admin API), in arrival order.
    pub fn requests(&self) -> Vec<RequestLogEntry> {
        let mut entries: Vec<RequestLogEntry> = self.shared.log().iter().cloned().collect();
        entries.sort_by_key(|e| e.seq);
        entries
    }

    /// Log entries of one verb on one resource (`"deployments"`, `"deployments/scale"`).
    pub fn requests_for(&self, verb: &str, resource: &str) -> Vec<RequestLogEntry> {
        self.requests()
            .into_iter()
            .filter(|e| e.is(verb, resource))
            .collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log().clear();
    }

    /// Polls the request log until an entry satisfies `pred` or `timeout` passes.
    pub async fn wait_for_request(
        &self,
        timeout: Duration,
        pred: impl Fn(&RequestLogEntry) -> bool,
    ) -> Option<RequestLogEntry> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.requests().into_iter().find(|e| pred(e)) {
                return Some(e);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The most requests of one verb on one resource ever handled at once (since the last
    /// reset). Watches count only while their request is being set up.
    pub fn peak_in_flight(&self, verb: &str, resource: &str) -> u32 {
        self.shared.inflight.peak(verb, resource)
    }

    /// All in-flight counters.
    pub fn in_flight(&self) -> Vec<InFlightStat> {
        self.shared.inflight.stats()
    }

    /// Resets the peaks.
    pub fn reset_in_flight(&self) {
        self.shared.inflight.reset();
    }

    /// Recorded rollouts (pod-template changes of workloads), in order.
    pub fn rollouts(&self) -> Vec<Rollout> {
        self.shared.store().rollouts()
    }

    /// Forgets recorded rollouts.
    pub fn clear_rollouts(&self) {
        self.shared.store().clear_rollouts();
    }

    /// How the simulated cluster paces rollouts.
    pub fn settings(&self) -> RolloutPace {
        self.shared.store().rollout_settings()
    }

    /// Changes the settings the change names (the others stay); the new settings, or why the
    /// change is refused (a `progressDeadlineScale` that is not a number above 0).
    pub fn change_settings(&self, change: RolloutPaceChange) -> Result<RolloutPace, EmulatorError> {
        let mut store = self.shared.store();
        let settings = store
            .rollout_settings()
            .with(change)
            .map_err(EmulatorError::Settings)?;
        store.set_rollout_settings(settings);
        Ok(settings)
    }

    /// Back to the start state: objects from the seeds, no faults, empty request log, no
    /// rollouts, default settings, peaks reset. Identities and the resourceVersion counter are
    /// kept.
    pub fn reset(&self) -> Result<(), EmulatorError> {
        {
            let mut store = self.shared.store();
            store.clear();
            load_base(&mut store, &self.shared.seeds)?;
            store.clear_rollouts();
        }
        self.clear_faults();
        self.clear_requests();
        self.reset_in_flight();
        Ok(())
    }

    /// Every continue token issued so far becomes expired (410 on use).
    pub fn expire_continue_tokens(&self) {
        self.shared.store().expire_continue_tokens();
    }

    /// Expires continue tokens and forgets the watch history (watches from an older
    /// resourceVersion get a 410 ERROR event).
    pub fn compact(&self) {
        self.shared.store().compact();
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().current_rv()
    }

    /// One object, by resource plural (`"deployments"`), namespace (`None` for cluster-scoped)
    /// and name. Bypasses authorization and faults.
    pub fn get_object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resources::find_plural(resource)?;
        self.shared
            .store()
            .get(res, namespace.unwrap_or(""), name)
            .map(|o| (**o).clone())
    }

    /// Objects of a resource, in one namespace or all, in key order.
    pub fn list_objects(&self, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        let Some(res) = resources::find_plural(resource) else {
            return Vec::new();
        };
        self.shared
            .store()
            .range(res, namespace, None)
            .map(|(_, o)| (**o).clone())
            .collect()
    }

    /// Creates or replaces an object (by `apiVersion`/`kind`), without a resourceVersion
    /// check; namespaces are created as needed. Goes through the same write path as the API
    /// (uid, resourceVersion, generation, rollouts, watch events, validation).
    pub fn put_object(&self, object: Value) -> Result<Value, EmulatorError> {
        Ok((*self.shared.store().upsert(object)?).clone())
    }

    /// Deletes an object.
    pub fn delete_object(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), EmulatorError> {
        let res = resource_id(resource)?;
        self.shared.store().delete(
            res,
            namespace.unwrap_or(""),
            name,
            &rollsafe_emulator_registry::store::Preconditions::default(),
        )?;
        Ok(())
    }

    /// A ready-made object for tests: a Deployment with one container that references
    /// nothing, labelled and selected by `app=<name>`.
    pub fn sample_deployment(namespace: &str, name: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
                }
            }
        })
    }
}

/// Refuses an identity the emulator cannot serve: an empty or reserved name, an empty token,
/// a name or token already in use.
pub(crate) fn check_identity(
    identity: &Identity,
    tokens: &HashMap<String, Identity>,
) -> Result<(), EmulatorError> {
    let fail = |reason| {
        Err(EmulatorError::Identity {
            name: identity.name.clone(),
            reason,
        })
    };
    if identity.name.is_empty() {
        return fail("the name is empty");
    }
    if identity.name == ADMIN_CONTEXT || identity.name == ADMIN_USER {
        return fail("the name is reserved for the admin identity");
    }
    if identity.token.is_empty() {
        return fail("the token is empty");
    }
    if tokens.contains_key(&identity.token) {
        return fail("the token is already in use");
    }
    if tokens.values().any(|i| i.name == identity.name) {
        return fail("the name is already in use");
    }
    Ok(())
}
