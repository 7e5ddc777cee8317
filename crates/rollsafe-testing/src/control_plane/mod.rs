//! A real Kubernetes control plane on loopback, for the suites' second substrate: etcd,
//! kube-apiserver (RBAC, its own CA, static tokens for the admin and the test users),
//! kube-controller-manager (the default controllers), kube-scheduler and kwok as the pod
//! simulator, built from Go modules ([`binaries`]) and started on free ports of 127.0.0.1.
//!
//! [`ControlPlane::start`] returns once a canary Deployment became Available and its namespace
//! was deleted again (so the scheduler, the workload controllers, the simulator, the namespace
//! controller and the garbage collector all answered); dropping it stops every process it
//! started, by PID, and removes its folder. Each process logs to a file under
//! [`ControlPlaneInfo::logs`]; [`ControlPlane::log_tails`] gives their last lines.

pub mod binaries;
mod pki;
mod process;
mod ready;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use pki::Pki;
pub use pki::{ADMIN, TEST_USERS, User};
use process::Process;

/// What a started control plane offers: the one JSON line `control-plane` prints, and what the
/// suites read from `ROLLSAFE_CONTROL_PLANE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlPlaneInfo {
    /// The API server's version (`/version`'s `gitVersion`).
    pub version: String,
    /// The admin's kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// The API server's URL.
    pub server: String,
    /// A kubeconfig per test user (alice in `devs`, bob in `ops`).
    pub users: BTreeMap<String, PathBuf>,
    /// The folder of the processes' logs, one file per component.
    pub logs: PathBuf,
    /// The API server's audit log (JSON lines, `audit.k8s.io/v1` Events at `Metadata` level)
    /// of the workload lists and patches and the Secret reads: the real substrate's
    /// server-side request log.
    pub audit: PathBuf,
}

/// Why a control plane could not be built or started. Messages are fixed; the logs folder
/// holds the components' own words.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// Go is not installed.
    #[error(
        "the real control plane needs Go 1.26 (at /usr/local/go/bin or on PATH) to build; install it, or run only the emulator suites"
    )]
    GoMissing,
    /// The Go build failed.
    #[error("building the control plane failed: {reason}")]
    Build {
        /// What failed.
        reason: String,
    },
    /// Files or ports could not be prepared.
    #[error("preparing the control plane failed: {reason}")]
    Setup {
        /// What failed.
        reason: String,
    },
    /// A component did not start.
    #[error("{component} did not start")]
    Spawn {
        /// The component.
        component: &'static str,
    },
    /// A readiness step did not pass in time.
    #[error("the control plane was not ready: {step}")]
    NotReady {
        /// The step that did not pass.
        step: String,
    },
}

impl ControlPlaneError {
    /// A static code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::GoMissing => "go_missing",
            Self::Build { .. } => "build_failed",
            Self::Setup { .. } => "setup_failed",
            Self::Spawn { .. } => "spawn_failed",
            Self::NotReady { .. } => "not_ready",
        }
    }
}

/// How long each readiness step may take on a loaded two-core machine.
const READY_STEP: Duration = Duration::from_secs(120);

/// What the API server audits: the requests rollsafe makes of workloads and Secrets (their
/// times, user, impersonation and answer; `Metadata` level, so no body and no Secret value).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [get, list, watch, patch, create, update, delete]
  resources:
  - group: apps
    resources: [deployments, statefulsets, daemonsets]
  - group: batch
    resources: [cronjobs]
  - group: \"\"
    resources: [secrets, configmaps]
- level: None
";

/// The admin's context in the admin kubeconfig (the emulator's name for it too).
pub const ADMIN_CONTEXT: &str = "admin";

/// The simulated node every pod is scheduled to.
pub const NODE: &str = "rollsafe-node-0";

/// How a control plane differs from the suites' own ([`ControlPlane::start`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// More flags for kube-apiserver, after the harness's (e.g.
    /// `--feature-gates=ConstrainedImpersonation=false`).
    pub api_server_flags: Vec<String>,
    /// Only etcd and the API server: no controllers, scheduler, simulator or node (for a test
    /// that asks the API server alone, such as its authorizer or its filters). Ready once the
    /// API server answers `/readyz`.
    pub api_server_only: bool,
}

/// A running control plane. Dropping it stops its processes and removes its folder.
pub struct ControlPlane {
    info: ControlPlaneInfo,
    processes: Vec<Process>,
    // Declared last: removed after the processes stopped.
    dir: tempfile::TempDir,
}

fn free_port() -> Result<u16, ControlPlaneError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|_| ControlPlaneError::Setup {
            reason: "no free port on 127.0.0.1".to_owned(),
        })
}

fn arg(flag: &str, value: impl AsRef<Path>) -> String {
    format!("--{flag}={}", value.as_ref().display())
}

impl ControlPlane {
    /// Builds what is missing ([`binaries::build`]) and starts a control plane from it.
    pub async fn build_and_start() -> Result<Self, ControlPlaneError> {
        let bin = tokio::task::spawn_blocking(binaries::build)
            .await
            .map_err(|_| ControlPlaneError::Build {
                reason: "the build task failed".to_owned(),
            })??;
        Self::start(&bin).await
    }

    /// Starts etcd, the API server, the controller manager, the scheduler and kwok from the
    /// binaries in `bin`, creates the simulated node and waits for a canary Deployment.
    pub async fn start(bin: &Path) -> Result<Self, ControlPlaneError> {
        Self::start_with(bin, &Options::default()).await
    }

    /// [`ControlPlane::start`], as `options` say.
    pub async fn start_with(bin: &Path, options: &Options) -> Result<Self, ControlPlaneError> {
        let dir = tempfile::Builder::new()
            .prefix("rollsafe-control-plane-")
            .tempdir()
            .map_err(|_| ControlPlaneError::Setup {
                reason: "cannot create a temporary folder".to_owned(),
            })?;
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).map_err(|_| ControlPlaneError::Setup {
            reason: "cannot create the logs folder".to_owned(),
        })?;
        let pki = Pki::write(&dir.path().join("pki"))?;
        let api_port = free_port()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let admin_kubeconfig = dir.path().join("admin.kubeconfig");
        // The admin's kubeconfig also has a context per test user, as the emulator's has.
        let mut contexts = vec![(ADMIN_CONTEXT, ADMIN.name)];
        contexts.extend(TEST_USERS.iter().map(|u| (u.name, u.name)));
        pki.write_kubeconfig(&admin_kubeconfig, &server, &contexts)?;
        let mut users = BTreeMap::new();
        for user in &TEST_USERS {
            let path = dir.path().join(format!("{}.kubeconfig", user.name));
            pki.write_kubeconfig(&path, &server, &[(user.name, user.name)])?;
            users.insert(user.name.to_owned(), path);
        }
        let kwok_config = dir.path().join("kwok.yaml");
        std::fs::write(
            &kwok_config,
            include_str!("../../../../tools/control-plane/kwok-stages.yaml"),
        )
        .map_err(|_| ControlPlaneError::Setup {
            reason: "cannot write kwok's stages".to_owned(),
        })?;

        let mut plane = Self {
            info: ControlPlaneInfo {
                version: String::new(),
                kubeconfig: admin_kubeconfig.clone(),
                server: server.clone(),
                users,
                logs: logs.clone(),
                audit: logs.join("audit.jsonl"),
            },
            processes: Vec::new(),
            dir,
        };
        if let Err(error) = plane.boot(bin, &pki, &kwok_config, options).await {
            eprintln!(
                "control plane: {error}; the components' logs end with:\n{}",
                plane.log_tails(30)
            );
            return Err(error);
        }
        Ok(plane)
    }

    /// Starts the components in order, each once the one before it answers.
    async fn boot(
        &mut self,
        bin: &Path,
        pki: &Pki,
        kwok_config: &Path,
        options: &Options,
    ) -> Result<(), ControlPlaneError> {
        let plane = self;
        let admin_kubeconfig = plane.info.kubeconfig.clone();
        let api_port = plane
            .info
            .server
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| ControlPlaneError::Setup {
                reason: "the API server's port".to_owned(),
            })?;
        let (etcd_port, peer_port) = (free_port()?, free_port()?);
        let work = plane.dir.path().to_owned();
        let audit_policy = work.join("audit-policy.yaml");
        std::fs::write(&audit_policy, AUDIT_POLICY).map_err(|_| ControlPlaneError::Setup {
            reason: "cannot write the audit policy".to_owned(),
        })?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        plane.spawn(
            "etcd",
            bin,
            &[
                "--name=rollsafe".to_owned(),
                arg("data-dir", work.join("etcd")),
                arg("listen-client-urls", &etcd_url),
                arg("advertise-client-urls", &etcd_url),
                arg("listen-peer-urls", &peer_url),
                arg("initial-advertise-peer-urls", &peer_url),
                format!("--initial-cluster=rollsafe={peer_url}"),
                "--unsafe-no-fsync=true".to_owned(),
                "--quota-backend-bytes=4294967296".to_owned(),
                "--log-level=warn".to_owned(),
            ],
            &[],
        )?;
        ready::etcd(etcd_port).await?;

        let mut api_server_args = vec![
            arg("etcd-servers", &etcd_url),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            // The `kubernetes` Service's endpoints may not be a loopback address.
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--secure-port={api_port}"),
            arg("tls-cert-file", &pki.serving_cert),
            arg("tls-private-key-file", &pki.serving_key),
            arg("client-ca-file", &pki.ca),
            arg("token-auth-file", &pki.token_file),
            "--authorization-mode=Node,RBAC".to_owned(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            arg("service-account-key-file", &pki.service_account_public_key),
            arg("service-account-signing-key-file", &pki.service_account_key),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--allow-privileged=true".to_owned(),
            "--profiling=false".to_owned(),
            arg("audit-policy-file", &audit_policy),
            arg("audit-log-path", &plane.info.audit),
            "--audit-log-format=json".to_owned(),
            "--audit-log-mode=blocking".to_owned(),
            "--v=1".to_owned(),
        ];
        api_server_args.extend(options.api_server_flags.iter().cloned());
        plane.spawn("kube-apiserver", bin, &api_server_args, &[])?;
        let client = ready::client(&admin_kubeconfig).await?;
        ready::api_server(&client).await?;
        plane.info.version = ready::version(&client).await?;
        if options.api_server_only {
            return Ok(());
        }

        plane.spawn(
            "kube-controller-manager",
            bin,
            &[
                arg("kubeconfig", &admin_kubeconfig),
                "--bind-address=127.0.0.1".to_owned(),
                "--secure-port=0".to_owned(),
                "--leader-elect=false".to_owned(),
                arg("service-account-private-key-file", &pki.service_account_key),
                arg("root-ca-file", &pki.ca),
                "--use-service-account-credentials=false".to_owned(),
                // The client-side limit (20/s by default) throttled a test's 230 Deployments
                // to 45 s; on loopback the API server is the limit, as it is in a cluster.
                "--kube-api-qps=500".to_owned(),
                "--kube-api-burst=1000".to_owned(),
                "--v=1".to_owned(),
            ],
            &[],
        )?;
        plane.spawn(
            "kube-scheduler",
            bin,
            &[
                arg("kubeconfig", &admin_kubeconfig),
                "--bind-address=127.0.0.1".to_owned(),
                "--secure-port=0".to_owned(),
                "--leader-elect=false".to_owned(),
                "--kube-api-qps=500".to_owned(),
                "--kube-api-burst=1000".to_owned(),
                "--v=1".to_owned(),
            ],
            &[],
        )?;
        plane.spawn(
            "kwok",
            bin,
            &[
                arg("kubeconfig", &admin_kubeconfig),
                arg("config", kwok_config),
                "--manage-all-nodes=true".to_owned(),
                "--node-ip=127.0.0.1".to_owned(),
                "--cidr=10.244.0.0/16".to_owned(),
                "--node-lease-duration-seconds=40".to_owned(),
            ],
            // kwok reads ~/.kwok/kwok.yaml by default: keep the user's out.
            &[("HOME", work.as_path())],
        )?;
        ready::node(&client, NODE).await?;
        ready::canary(&client).await
    }

    fn spawn(
        &mut self,
        component: &'static str,
        bin: &Path,
        args: &[String],
        env: &[(&str, &Path)],
    ) -> Result<(), ControlPlaneError> {
        let process = Process::spawn(component, &bin.join(component), args, env, &self.info.logs)?;
        self.processes.push(process);
        Ok(())
    }

    /// What the control plane offers.
    pub fn info(&self) -> &ControlPlaneInfo {
        &self.info
    }

    /// The last `lines` lines of each component's log, for a failing test to print.
    pub fn log_tails(&self, lines: usize) -> String {
        log_tails(&self.info.logs, lines)
    }

    /// Whether every process is still running; the first that exited otherwise.
    pub fn exited(&mut self) -> Option<&'static str> {
        self.processes
            .iter_mut()
            .find_map(|p| p.exited().then(|| p.component()))
    }

    /// Stops every process (the reverse of their start order) and waits for each.
    pub fn stop(&mut self) {
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `lines` lines of each log file in `logs`, headed by its name.
pub fn log_tails(logs: &Path, lines: usize) -> String {
    let mut out = String::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(logs)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    // The audit log is data for the tests, not a component's words.
    files.retain(|f| f.extension().is_none_or(|e| e != "jsonl"));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        out.push_str(&format!("==> {} <==\n", file.display()));
        for line in tail {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
