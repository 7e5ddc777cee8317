//! The web page in a real browser: headless Chromium from Debian's packages, driven through
//! ChromeDriver (WebDriver) with `fantoccini`, against the server and the emulator.
//!
//! A person signs in, sees the Secrets in scope (history snapshots hidden), opens one, sees its
//! consumers and which will not roll now, restarts and reads a `requested` report; with faults
//! injected, a `partial` report with each failure's guidance and a `failed` one; a user the ACL
//! refuses sees the refusal; a history snapshot's URL shows the same "not found" as a missing
//! Secret. A screenshot of each state is saved under `target/web-screenshots/`.
//!
//! What is in the DOM is not what is seen: in every view (signed out, the list, a Secret with
//! consumers, its confirmation, one without, not found, an invalid name, refused, restarting
//! off), at a desktop and a narrow width, each control (Sign out, Restart consumers, the
//! dialog's buttons) is checked as displayed by WebDriver and by its computed style (hidden, or
//! opaque and clickable, or faded and disabled); a screenshot of each is saved under the cargo
//! target's tmp dir (`web-visibility/`) and its path printed.
//!
//! Without ChromeDriver (`/usr/bin/chromedriver`, or `ROLLSAFE_CHROMEDRIVER`) the test says why it
//! skipped, unless `CI` is set: then it fails (`.ci/run` installs `chromium` and
//! `chromium-driver`).

#![expect(clippy::unwrap_used, reason = "test code")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::provider::{free_port, provider_module, settings, start_provider};
use common::{Fixture, NS, seed, token, workload};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use rollsafe_emulator::{Fault, FaultAction};
use serde_json::{Value, json};

const SECRET_VALUE: &str = "never-shown";
const DEADLINE: Duration = Duration::from_secs(20);

fn chromedriver() -> Option<PathBuf> {
    let path = std::env::var_os("ROLLSAFE_CHROMEDRIVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromedriver"));
    path.exists().then_some(path)
}

/// [`chromedriver`] for a browser test; without it the test is skipped, saying so — except
/// under CI, where `.ci/run` installs it and its absence fails the test.
fn chromedriver_or_skip() -> Option<PathBuf> {
    let found = chromedriver();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromedriver is missing; .ci/run installs chromium and chromium-driver"
        );
        eprintln!(
            "skipped: no chromedriver at /usr/bin/chromedriver (apt-get install chromium chromium-driver)"
        );
    }
    found
}

fn chromium() -> String {
    std::env::var("ROLLSAFE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

/// ChromeDriver on a free port, stopped on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_driver(path: &Path) -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "chromedriver did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    driver
}

async fn browser(driver: &Driver, profile: &Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": chromium(),
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,1000",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .unwrap()
}

/// Polls until the element matching `css` is displayed and its text contains `text`.
async fn wait_for_text(client: &Client, css: &str, text: &str) -> String {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Ok(element) = client.find(Locator::Css(css)).await
            && element.is_displayed().await.unwrap_or(false)
            && let Ok(found) = element.text().await
            && found.contains(text)
        {
            return found;
        }
        if tokio::time::Instant::now() > deadline {
            let source = client.source().await.unwrap_or_default();
            panic!("{css} never showed {text:?}; page: {source}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// axe-core, the accessibility engine (`.ci/run` installs it from npm into `.ci/node`; or
/// `ROLLSAFE_AXE` names `axe.min.js`).
fn axe_source() -> Option<String> {
    let path = std::env::var_os("ROLLSAFE_AXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../.ci/node/node_modules/axe-core/axe.min.js")
        });
    std::fs::read_to_string(path).ok()
}

/// Runs axe-core on the page as it is now (WCAG 2.1 A and AA rules) and returns the violations
/// as `rule: element` lines.
async fn accessibility_violations(client: &Client, axe: &str) -> Vec<String> {
    client.execute(axe, vec![]).await.unwrap();
    let result = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
                .then(r => done(r.violations.map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '))))
                .catch(e => done(['axe failed: ' + e]));",
            vec![],
        )
        .await
        .unwrap();
    result
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Clicks the element `locator` finds.
async fn click(client: &Client, locator: Locator<'_>) {
    client.find(locator).await.unwrap().click().await.unwrap();
}

async fn screenshot(client: &Client, name: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// How a control should look to the person at the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Not rendered at all: `display: none` on it or an ancestor.
    Hidden,
    /// Rendered, opaque, clickable.
    Enabled,
    /// Rendered, and visibly not clickable (faded, a not-allowed cursor).
    Disabled,
}

/// The controls the page has, each checked in every view.
const CONTROLS: [&str; 4] = ["#sign-out", "#restart", "#confirm-cancel", "#confirm-ok"];

/// What WebDriver and the computed style say about the element `css` finds: WebDriver's
/// displayed state, the element's own `display`, `visibility`, `opacity` and `cursor`, whether
/// it is disabled, and the nearest element (itself or an ancestor) whose computed `display` is
/// `none`.
async fn appearance(client: &Client, css: &str) -> (bool, Value) {
    let element = client.find(Locator::Css(css)).await.unwrap();
    let displayed = element.is_displayed().await.unwrap();
    let style = client
        .execute(
            "const el = document.querySelector(arguments[0]);
             const s = getComputedStyle(el);
             let none = null;
             for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
               if (getComputedStyle(n).display === 'none') { none = n.id || n.tagName.toLowerCase(); break; }
             }
             return { display: s.display, visibility: s.visibility, opacity: parseFloat(s.opacity),
                      cursor: s.cursor, disabled: !!el.disabled, noneAt: none };",
            vec![json!(css)],
        )
        .await
        .unwrap();
    (displayed, style)
}

/// Asserts the element `css` finds looks as `expected` says in `view`.
async fn assert_shown(client: &Client, view: &str, css: &str, expected: Shown) {
    let (displayed, style) = appearance(client, css).await;
    let context = format!("{view}: {css} should be {expected:?}; displayed {displayed}, {style}");
    match expected {
        Shown::Hidden => {
            assert!(!displayed, "{context}");
            assert!(style["noneAt"].is_string(), "{context}");
        }
        Shown::Enabled | Shown::Disabled => {
            assert!(displayed, "{context}");
            assert!(style["noneAt"].is_null(), "{context}");
            assert_eq!(style["visibility"], "visible", "{context}");
            let opacity = style["opacity"].as_f64().unwrap();
            let disabled = style["disabled"].as_bool().unwrap();
            if expected == Shown::Enabled {
                assert!(!disabled, "{context}");
                assert!((opacity - 1.0).abs() < f64::EPSILON, "{context}");
                assert_eq!(style["cursor"], "pointer", "{context}");
            } else {
                assert!(disabled, "{context}");
                assert!(opacity <= 0.6, "a disabled button looks faded: {context}");
                assert_eq!(style["cursor"], "not-allowed", "{context}");
            }
        }
    }
}

/// The window sizes every view is checked at: a desktop and a narrow phone.
const WIDTHS: [(&str, u32, u32); 2] = [("desktop", 1280, 800), ("narrow", 400, 800)];

/// Checks every control in [`CONTROLS`] (those not in `shown` must be hidden) at each of
/// [`WIDTHS`], saving a screenshot of each into the target's tmp dir (the paths are printed).
/// Leaves the window at the test's usual size.
async fn check_view(client: &Client, view: &str, shown: &[(&str, Shown)]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-visibility");
    std::fs::create_dir_all(&dir).unwrap();
    for (width_name, width, height) in WIDTHS {
        client.set_window_rect(0, 0, width, height).await.unwrap();
        wait_for_width(client, width).await;
        for css in CONTROLS {
            let expected = shown
                .iter()
                .find(|(c, _)| *c == css)
                .map_or(Shown::Hidden, |(_, s)| *s);
            assert_shown(client, &format!("{view} at {width_name}"), css, expected).await;
        }
        let png = client.screenshot().await.unwrap();
        let path = dir.join(format!("{view}-{width_name}.png"));
        std::fs::write(&path, png).unwrap();
        println!("screenshot: {}", path.display());
    }
    client.set_window_rect(0, 0, 1280, 1000).await.unwrap();
}

/// Waits until the layout viewport has (about) the window's new width.
async fn wait_for_width(client: &Client, width: u32) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let inner = client
            .execute("return window.innerWidth", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap();
        if inner.abs_diff(u64::from(width)) <= 20 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the window never became {width} px wide: {inner}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// At the narrow width, the consumer table as blocks: its caption as wide as the table (not
/// one word a line), and each "Rolls now" cell labelled, since the header row is off-screen.
async fn check_narrow_table(client: &Client) {
    client.set_window_rect(0, 0, 400, 800).await.unwrap();
    wait_for_width(client, 400).await;
    let layout = client
        .execute(
            "const t = document.getElementById('consumers');
             const c = t.querySelector('caption');
             const line = parseFloat(getComputedStyle(c).lineHeight);
             return { table: t.getBoundingClientRect().width, caption: c.getBoundingClientRect().width,
                      lines: Math.round(c.getBoundingClientRect().height / line),
                      labels: Array.from(document.querySelectorAll('#consumer-rows td:nth-child(3)'))
                        .map(td => getComputedStyle(td, '::before').content),
                      watched: Array.from(document.querySelectorAll('#consumer-rows td:nth-child(4)'))
                        .map(td => getComputedStyle(td, '::before').content) };",
            vec![],
        )
        .await
        .unwrap();
    let table = layout["table"].as_f64().unwrap();
    let caption = layout["caption"].as_f64().unwrap();
    assert!(
        caption >= table * 0.9,
        "the caption spans the table: {layout}"
    );
    assert_eq!(layout["lines"], 1, "the caption is one line: {layout}");
    let labels = layout["labels"].as_array().unwrap();
    assert_eq!(labels.len(), 3, "{layout}");
    for label in labels {
        assert_eq!(
            label, "\"Rolls now: \"",
            "each Yes/No cell is labelled: {layout}"
        );
    }
    let watched = layout["watched"].as_array().unwrap();
    assert_eq!(watched.len(), 3, "{layout}");
    for label in watched {
        assert_eq!(
            label, "\"Watched: \"",
            "each watch cell is labelled: {layout}"
        );
    }
    client.set_window_rect(0, 0, 1280, 1000).await.unwrap();
}

/// What the page shows of one requested workload's bar: WebDriver's displayed state, its
/// value and max, its accessible name, and the computed colour of the words beside it.
async fn bar(client: &Client, workload: &str) -> Value {
    let css = format!("#rollout-list [data-workload=\"{workload}\"] progress");
    let displayed = match client.find(Locator::Css(&css)).await {
        Ok(element) => element.is_displayed().await.unwrap_or(false),
        Err(_) => false,
    };
    let mut shown = client
        .execute(
            "const row = document.querySelector(`#rollout-list [data-workload=\"${arguments[0]}\"]`);
             if (!row) return null;
             const bar = row.querySelector('progress');
             const words = row.querySelector('.rollout-state');
             return { value: bar.value, max: bar.max, label: bar.getAttribute('aria-label'),
                      state: row.dataset.state, text: words.textContent,
                      color: getComputedStyle(words).color };",
            vec![json!(workload)],
        )
        .await
        .unwrap();
    shown["displayed"] = json!(displayed);
    shown
}

/// The bar of `workload` is displayed, with a text alternative naming the workload.
async fn assert_shown_bar(client: &Client, workload: &str) {
    let shown = bar(client, workload).await;
    assert_eq!(shown["displayed"], true, "{workload}: {shown}");
    let name = workload.replace('/', " ");
    assert!(
        shown["label"]
            .as_str()
            .is_some_and(|l| l.starts_with(&name)),
        "{workload}: {shown}"
    );
}

/// Waits until `main` has the focus, and returns its computed outline.
async fn focused_main(client: &Client) -> Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let main = client
            .execute(
                "const main = document.getElementById('main');
                 const s = getComputedStyle(main);
                 return { focused: document.activeElement === main, outlineStyle: s.outlineStyle,
                          outlineWidth: s.outlineWidth };",
                vec![],
            )
            .await
            .unwrap();
        if main["focused"] == true {
            return main;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "main never had the focus: {main}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sign_in(client: &Client, url: &str, token: &str) {
    client.goto(&format!("{url}/#/")).await.unwrap();
    wait_for_text(client, "#sign-in-title", "Sign in").await;
    client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    click(client, Locator::Css("#token-form button[type=submit]")).await;
}

/// Signs in with the page's provider link and the provider's own login and consent forms.
async fn sign_in_through_provider(client: &Client, account: &str) {
    let link = client
        .wait()
        .for_element(Locator::Css("#oidc-link"))
        .await
        .unwrap();
    wait_for_text(client, "#oidc-sign-in", "identity provider").await;
    link.click().await.unwrap();
    let login = client
        .wait()
        .for_element(Locator::Css("input[name=login]"))
        .await
        .unwrap();
    login.send_keys(account).await.unwrap();
    client
        .find(Locator::Css("input[name=password]"))
        .await
        .unwrap()
        .send_keys("any password")
        .await
        .unwrap();
    screenshot(client, "0-provider-login").await;
    click(client, Locator::Css("button[type=submit]")).await;
    // The consent form.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let url = client.current_url().await.unwrap();
        if url.path() == "/" {
            break;
        }
        if let Ok(button) = client.find(Locator::Css("form button[type=submit]")).await
            && button.text().await.unwrap_or_default().contains("Continue")
        {
            button.click().await.unwrap();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never back at rollsafe: {url}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn restart(client: &Client) {
    click(client, Locator::Css("#restart")).await;
    wait_for_text(client, "#confirm-text", "This patches").await;
    click(client, Locator::Css("#confirm-ok")).await;
}

fn cluster() -> Vec<Value> {
    let mut objects = seed();
    objects.push(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-v1", "namespace": NS,
                     "labels": {"krypton.io/kind": "history", "krypton.io/history-of": "db"}},
        "stringData": {"password": SECRET_VALUE}}));
    objects.push(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "locked", "namespace": NS,
                     "annotations": {"krypton.io/allowed-groups": "platform"}},
        "stringData": {"k": SECRET_VALUE}}));
    // The page lists Secrets as the caller: developers may list them (by metadata).
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "secret-lister"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "secret-listers"},
        "subjects": [{"kind": "Group", "name": "developers", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": "secret-lister", "apiGroup": "rbac.authorization.k8s.io"}}));
    // Approving reads the workload as the caller: developers may get Deployments.
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "approver"},
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "approvers"},
        "subjects": [{"kind": "Group", "name": "developers", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": "approver", "apiGroup": "rbac.authorization.k8s.io"}}));
    let mut paused = workload("Deployment", "paused", "db");
    paused["spec"]["paused"] = json!(true);
    // Opted in to the controller, and halted by its flap stop.
    paused["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "true",
        "rollsafe.dev/halted": "flapping: 5 rolls within 600s; remove this annotation to resume",
        "rollsafe.dev/pending": "approval since=2026-12-03T06:00:00Z digest=v1:abc"});
    objects.push(paused);
    // Stakater Reloader's annotation and no rollsafe one; a roll held by a restart window.
    for object in &mut objects {
        if object["kind"] == "Deployment" && object["metadata"]["name"] == "web" {
            object["metadata"]["annotations"] = json!({"reloader.stakater.com/auto": "true",
                "rollsafe.dev/pending": "window until=2026-12-08T03:00:00Z digest=v1:def"});
        }
    }
    objects
}

/// The controller's Lease as `rollsafe watch` publishes it: `--all`, `--reloader-compat`, and
/// every roll of [`NS`] awaiting approval.
fn controller_lease() -> Value {
    let settings = json!({"all": true, "reloaderCompat": true, "namespaces": [],
        "selector": null, "sourceSelector": null, "namespaceSelector": null,
        "ignoreNamespaces": [], "ignoreKinds": [], "requireApproval": [NS],
        "restartWindow": null, "progressive": false, "argoRollouts": false, "flapRolls": 5,
        "flapWindowSeconds": 600, "maxRollsPerMinute": 60, "burst": 10, "dryRun": false,
        "keyed": false, "instance": "controller-0", "at": "2026-12-07T06:00:00Z"});
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "rollsafe-watch", "namespace": NS,
                        "annotations": {"rollsafe.dev/settings": settings.to_string()}},
           "spec": {"holderIdentity": "controller-0"}})
}

/// The text of the consumer row of `workload` (`Deployment/api`), one cell a line.
async fn row_text(client: &Client, workload: &str) -> String {
    let row = client
        .find(Locator::Css(&format!("tr[data-workload=\"{workload}\"]")))
        .await
        .unwrap();
    let mut cells = Vec::new();
    for cell in row.find_all(Locator::Css("td")).await.unwrap() {
        cells.push(cell.text().await.unwrap());
    }
    cells.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_restarts_consumers_from_the_page() {
    let Some(driver_path) = chromedriver_or_skip() else {
        return;
    };
    // With the OpenID provider installed, alice signs in through its own forms; otherwise with
    // a session token (the provider's login has its own suite in oidc.rs).
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let redirect = format!("http://{listen}/auth/callback");
    let provider =
        provider_module().map(|module| start_provider(&module, free_port(), &redirect, "key-1", 0));
    if provider.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "oidc-provider is missing; .ci/run installs it"
        );
    }
    let issuer = provider.as_ref().map(|p| p.issuer.clone());
    let mut objects = cluster();
    objects.push(controller_lease());
    let f = Fixture::start_seeded(objects, None, |s| {
        s.admins.groups = vec!["platform".into()];
        s.listen = listen;
        s.oidc = issuer.as_deref().map(|issuer| settings(issuer, &redirect));
    })
    .await;
    let url = format!("http://{}", f.api);
    let driver = start_driver(&driver_path).await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;

    // Signed out: the sign-in form.
    client.goto(&format!("{url}/")).await.unwrap();
    wait_for_text(&client, "#sign-in-title", "Sign in").await;
    screenshot(&client, "1-sign-in").await;
    check_view(&client, "signed-out", &[]).await;
    let axe = axe_source();
    if axe.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "axe-core is missing; .ci/run installs it"
        );
        eprintln!("accessibility check skipped: no axe-core (npm install axe-core in .ci/node)");
    }
    let mut violations = Vec::new();
    if let Some(axe) = &axe {
        violations.extend(accessibility_violations(&client, axe).await);
    }

    // Signed in: the Secrets in scope, the history snapshot hidden.
    let alice = if provider.is_some() {
        sign_in_through_provider(&client, "alice").await;
        "alice@example.com"
    } else {
        sign_in(
            &client,
            &url,
            &token("alice@x.io", &["platform", "developers"]),
        )
        .await;
        "alice@x.io"
    };
    wait_for_text(&client, "#who-name", alice).await;
    let list = wait_for_text(&client, "#secret-list", "db").await;
    let names: Vec<&str> = list.lines().collect();
    assert_eq!(names, ["db", "locked"], "history snapshots are not listed");
    screenshot(&client, "2-secrets").await;
    check_view(&client, "secrets", &[("#sign-out", Shown::Enabled)]).await;

    // A Secret's consumers, the paused one marked before anything is pressed; opened with the
    // keyboard, as a person navigating without a mouse does.
    client
        .find(Locator::LinkText("db"))
        .await
        .unwrap()
        .send_keys(&Key::Enter)
        .await
        .unwrap();
    let rows = wait_for_text(&client, "#consumer-rows", "Deployment paused").await;
    // Focus moves to main after the navigation (for screen readers), with no box drawn.
    let main = focused_main(&client).await;
    assert_eq!(main["outlineStyle"], "none", "no focus box on main: {main}");
    assert!(rows.contains("Deployment api"), "{rows}");
    assert!(rows.contains("envFrom"), "reference paths: {rows}");
    assert!(rows.contains("No: the Deployment is paused"), "{rows}");
    // What the controller does with each: the opt-in, and the halt with how to resume.
    assert!(
        rows.contains("Yes. Halted by rollsafe watch: flapping: 5 rolls within 600s; remove this annotation to resume Remove the rollsafe.dev/halted annotation to resume."),
        "{rows}"
    );
    // A roll the controller holds for it, and how to approve it.
    assert!(
        rows.contains("Roll pending: awaits approval since 2026-12-03T06:00:00Z; approve with rollsafe approve -n "),
        "{rows}"
    );
    assert!(rows.contains(" deployment/paused."), "{rows}");
    // Judged under the settings the controller published: where they came from is said, and
    // each row's Watched and Rolls-now cells say one thing.
    let source = wait_for_text(&client, "#controller-settings", "published").await;
    assert_eq!(
        source,
        format!(
            "Watched as rollsafe watch's settings say, as the controller published them at \
             2026-12-07T06:00:00Z (Lease {NS}/rollsafe-watch)."
        )
    );
    // No rollsafe.dev/watch under --all: watched, and its rolls await approval in this
    // namespace, which a restart from here does not.
    assert_eq!(
        row_text(&client, "Deployment/api").await,
        format!(
            "Deployment api\ncontainer app: envFrom\n\
             Yes, when restarted here: a restart waits for no approval or restart window \
             (rollsafe watch's own rolls do).\n\
             Yes: rollsafe watch runs with --all (no rollsafe.dev/watch needed). Each roll \
             awaits approval (rollsafe watch runs with --require-approval {NS})."
        )
    );
    // Reloader's annotations under --reloader-compat, with a roll held by its window.
    assert_eq!(
        row_text(&client, "Deployment/web").await,
        "Deployment web\ncontainer app: envFrom\n\
         Yes, when restarted here: a restart waits for no restart window, and settles the roll \
         rollsafe watch holds.\n\
         Yes: its Reloader annotations opt it in (rollsafe watch runs with --reloader-compat). \
         Roll pending: held by a restart window until 2026-12-08T03:00:00Z."
    );
    assert!(!rows.contains("Not opted in"), "{rows}");
    wait_for_text(&client, "#detail-status", "1 will not roll now").await;
    screenshot(&client, "3-consumers").await;
    check_view(
        &client,
        "consumers",
        &[("#sign-out", Shown::Enabled), ("#restart", Shown::Enabled)],
    )
    .await;
    let note = wait_for_text(&client, "#progressive-note", "Progressive restarts").await;
    assert!(
        note.contains("rollsafe restart-consumers --progressive")
            && note.contains("docs/rollouts.md"),
        "{note}"
    );
    check_narrow_table(&client).await;
    // The roll the controller holds for the paused one, approved from its row, as alice.
    click(&client, Locator::Css("button.approve")).await;
    // What was approved, for a person: the workload, what it rolls for and when; no digest.
    let outcome = wait_for_text(
        &client,
        ".approve-outcome",
        ": rollsafe watch rolls Deployment paused for the current Secret db; it awaited approval since 2026-12-03T06:00:00Z.",
    )
    .await;
    assert!(outcome.starts_with("Approved at 20"), "{outcome}");
    assert!(!outcome.contains("v1:abc"), "no digest: {outcome}");
    let rows = wait_for_text(&client, "#consumer-rows", "Approved at").await;
    assert!(!rows.contains("Not approved"), "{rows}");
    let paused = f
        .emulator
        .get_object("deployments", Some(NS), "paused")
        .unwrap();
    assert_eq!(
        paused["metadata"]["annotations"]["rollsafe.dev/approved"],
        "v1:abc"
    );
    let approval = f
        .emulator
        .requests_for("patch", "deployments")
        .into_iter()
        .find(|r| r.name.as_deref() == Some("paused"))
        .unwrap();
    assert_eq!(approval.impersonated_user.as_deref(), Some(alice));
    assert_eq!(
        approval.query_param("fieldManager").as_deref(),
        Some("rollsafe-approve")
    );
    let audit = std::fs::read_to_string(&f.audit_file).unwrap();
    let approvals: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["action"] == "workload.approve")
        .collect();
    assert_eq!(approvals.len(), 2, "intent and result: {audit}");
    assert_eq!(approvals[0]["stage"], "intent");
    assert_eq!(approvals[1]["result"], "allow");
    assert_eq!(
        approvals[1]["approval"],
        json!({"kind": "Deployment", "workload": "paused", "digest": "v1:abc"})
    );
    // The confirmation says what happens to the paused one, in words.
    click(&client, Locator::Css("#restart")).await;
    let text = wait_for_text(&client, "#confirm-text", "This patches").await;
    assert_eq!(
        text,
        format!(
            "This patches 3 workloads in {NS}. 2 roll now. \
             Deployment paused is paused: it rolls when it is resumed."
        )
    );
    check_view(
        &client,
        "confirm",
        &[
            ("#sign-out", Shown::Enabled),
            ("#restart", Shown::Enabled),
            ("#confirm-cancel", Shown::Enabled),
            ("#confirm-ok", Shown::Enabled),
        ],
    )
    .await;
    click(&client, Locator::Css("#confirm-cancel")).await;
    if let Some(axe) = &axe {
        violations.extend(accessibility_violations(&client, axe).await);
    }

    // Restart: confirmation naming how many are patched, then the report.
    restart(&client).await;
    // The contract's result: its message, then (once following ends) its status as what was
    // requested.
    wait_for_text(
        &client,
        "#report-message",
        "Rollout requested for 3 of 3 matched workloads.",
    )
    .await;
    let report = wait_for_text(&client, "#report-body", "Requested").await;
    assert!(report.contains("Deployment api"), "{report}");
    // The report marks the one the patch does not roll now, as the preview said.
    assert!(
        report.contains(
            "Deployment paused — will not roll now: Deployment paused is paused: it rolls when it is resumed."
        ),
        "{report}"
    );
    // The report follows the rollout: in today's emulator status follows spec at once, so
    // each rolling workload is complete and the paused one deferred, with its reason.
    let summary = wait_for_text(&client, "#rollout-summary", "Rollout finished").await;
    assert_eq!(summary, "Rollout finished: 2 complete, 1 deferred.");
    // The heading says how it ended; the contract's result stays as what was requested.
    assert_eq!(
        wait_for_text(&client, "#report-title", "Rollout").await,
        "Rollout finished"
    );
    assert_eq!(
        wait_for_text(&client, "#report-result", "Restart result").await,
        "Restart result: requested."
    );
    // Under the bars, what the bars are; not the contract's "not verified".
    let note = wait_for_text(&client, "#report-note", "The bars follow").await;
    assert_eq!(
        note,
        "The result above counts the pod-template patches Kubernetes acknowledged. The bars \
         follow each requested rollout as Kubernetes reports it: replicas updated to the new \
         template, and ready. Whether the application took up the new credentials is not checked."
    );
    assert!(!note.contains("not verified"), "{note}");
    for (workload, text) in [
        ("Deployment/api", "complete: 1 of 1 updated, 1 ready"),
        ("Deployment/web", "complete: 1 of 1 updated, 1 ready"),
        ("Deployment/paused", "deferred: the Deployment is paused"),
    ] {
        let row = format!("#rollout-list [data-workload=\"{workload}\"] .rollout-state");
        assert_eq!(wait_for_text(&client, &row, text).await, text, "{workload}");
        assert_shown_bar(&client, workload).await;
    }
    let complete = bar(&client, "Deployment/api").await;
    assert_eq!(
        (complete["value"].as_f64(), complete["max"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    let focused = client
        .active_element()
        .await
        .unwrap()
        .attr("id")
        .await
        .unwrap();
    assert_eq!(
        focused.as_deref(),
        Some("report"),
        "focus moves to the report"
    );
    screenshot(&client, "4-requested").await;
    if let Some(axe) = &axe {
        violations.extend(accessibility_violations(&client, axe).await);
    }

    // A partial result: each failure with its code and guidance.
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .name("web")
            .always()
            .then(FaultAction::status(409)),
    );
    restart(&client).await;
    wait_for_text(&client, "#report-message", "1 patch request failed").await;
    assert_eq!(
        wait_for_text(&client, "#report-result", "Restart result").await,
        "Restart result: partial."
    );
    let report = wait_for_text(&client, "#report-body", "Failed").await;
    assert!(
        report.contains("Deployment web: conflict (HTTP 409)"),
        "{report}"
    );
    screenshot(&client, "5-partial").await;
    // Readable on a phone: the same report at 390 px.
    client.set_window_size(390, 844).await.unwrap();
    screenshot(&client, "5-partial-phone").await;
    let width: i64 = client
        .execute("return document.documentElement.scrollWidth", vec![])
        .await
        .unwrap()
        .as_i64()
        .unwrap();
    assert!(
        width <= 390,
        "no horizontal scrolling on a phone: {width}px"
    );
    client.set_window_size(1280, 1000).await.unwrap();
    if let Some(axe) = &axe {
        violations.extend(accessibility_violations(&client, axe).await);
    }
    assert!(violations.is_empty(), "accessibility: {violations:#?}");
    if let Some(axe) = &axe {
        // The check can fail: an unlabelled input is caught.
        client
            .execute(
                "const i = document.createElement('input'); i.id = 'unlabelled'; document.getElementById('main').append(i);",
                vec![],
            )
            .await
            .unwrap();
        let caught = accessibility_violations(&client, axe).await;
        assert!(
            caught.iter().any(|v| v.contains("#unlabelled")),
            "{caught:?}"
        );
        client
            .execute("document.getElementById('unlabelled').remove();", vec![])
            .await
            .unwrap();
    }

    // A failed one.
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .always()
            .then(FaultAction::status(503)),
    );
    restart(&client).await;
    wait_for_text(&client, "#report-title", "Result: failed").await;
    wait_for_text(&client, "#report-message", "No rollout was requested").await;
    screenshot(&client, "6-failed").await;

    // A Secret no workload consumes: the button is there, and looks disabled.
    client.goto(&format!("{url}/#/{NS}/locked")).await.unwrap();
    wait_for_text(
        &client,
        "#detail-status",
        "No workloads reference this Secret",
    )
    .await;
    check_view(
        &client,
        "no-consumers",
        &[("#sign-out", Shown::Enabled), ("#restart", Shown::Disabled)],
    )
    .await;

    // A history snapshot's URL reads exactly like a missing Secret's.
    client.goto(&format!("{url}/#/{NS}/db-v1")).await.unwrap();
    let history = wait_for_text(&client, "#detail-error", "not found").await;
    client.goto(&format!("{url}/#/{NS}/nope")).await.unwrap();
    let missing = wait_for_text(&client, "#detail-error", "not found").await;
    assert_eq!(
        history.replace("db-v1", "NAME"),
        missing.replace("nope", "NAME")
    );
    screenshot(&client, "7-not-found").await;
    check_view(&client, "not-found", &[("#sign-out", Shown::Enabled)]).await;
    client
        .goto(&format!("{url}/#/{NS}/Not_A_Name"))
        .await
        .unwrap();
    wait_for_text(&client, "#detail-error", " ").await;
    check_view(&client, "invalid-name", &[("#sign-out", Shown::Enabled)]).await;

    // Sign out, then a user the ACL refuses on `locked`.
    client.goto(&format!("{url}/#/")).await.unwrap();
    wait_for_text(&client, "#who-name", alice).await;
    click(&client, Locator::Css("#sign-out")).await;
    wait_for_text(&client, "#sign-in-title", "Sign in").await;
    // A bad token: said to be invalid or expired.
    sign_in(&client, &url, "not-a-session-token").await;
    assert_eq!(
        wait_for_text(&client, "#sign-in-error", "invalid").await,
        "This token is invalid or has expired. Ask for a new one (rollsafe token), or sign in \
         with your identity provider."
    );
    sign_in(&client, &url, &token("bob@x.io", &["developers"])).await;
    wait_for_text(&client, "#who-name", "bob@x.io").await;
    client.goto(&format!("{url}/#/{NS}/locked")).await.unwrap();
    // A refused read says what was refused.
    assert_eq!(
        wait_for_text(&client, "#detail-error", "You may not see").await,
        format!(
            "You may not see or restart the consumers of {NS}/locked: its access rules do not \
             let you modify this Secret."
        )
    );
    screenshot(&client, "8-refused").await;
    // A refused preview offers no restart (and so no second refusal).
    check_view(&client, "forbidden", &[("#sign-out", Shown::Enabled)]).await;

    let source = client.source().await.unwrap();
    assert!(
        !source.contains(SECRET_VALUE),
        "no Secret value in the page"
    );

    // With the restart flag off: the note, and no button.
    click(&client, Locator::Css("#sign-out")).await;
    wait_for_text(&client, "#sign-in-title", "Sign in").await;
    let off = Fixture::start_seeded(cluster(), None, |s| {
        s.admins.groups = vec!["platform".into()];
        s.restart_enabled = false;
    })
    .await;
    let off_url = format!("http://{}", off.api);
    sign_in(
        &client,
        &off_url,
        &token("alice@x.io", &["platform", "developers"]),
    )
    .await;
    wait_for_text(&client, "#who-name", "alice@x.io").await;
    client.goto(&format!("{off_url}/#/{NS}/db")).await.unwrap();
    wait_for_text(&client, "#restart-disabled", "Restarting is disabled").await;
    check_view(
        &client,
        "restart-disabled",
        &[("#sign-out", Shown::Enabled)],
    )
    .await;

    client.close().await.unwrap();
    drop(driver);
    drop(provider);
    off.stop().await;
    f.stop().await;
}

/// A Secret whose consumers roll out slowly (`slow`) and fail (`failing`, whose new pods wait
/// in CrashLoopBackOff until its progress deadline passes).
fn rolling_cluster() -> Vec<Value> {
    let mut objects = seed();
    objects.push(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "rolling", "namespace": NS}, "stringData": {"k": SECRET_VALUE}}));
    for (name, deadline) in [("slow", 600), ("failing", 100)] {
        let mut deployment = workload("Deployment", name, "rolling");
        deployment["spec"]["replicas"] = json!(3);
        deployment["spec"]["progressDeadlineSeconds"] = json!(deadline);
        objects.push(deployment);
    }
    // A Secret whose one consumer rolls out quickly, and one whose StatefulSet crash-loops.
    for (secret, kind, name) in [
        ("quick", "Deployment", "quick"),
        ("crashing-config", "StatefulSet", "crashing"),
    ] {
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": NS}, "stringData": {"k": SECRET_VALUE}}));
        let mut consumer = workload(kind, name, secret);
        consumer["spec"]["replicas"] = json!(2);
        objects.push(consumer);
    }
    // The platform group may list pods (the page reads a rollout's pods as the caller).
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "pod-readers", "namespace": NS},
        "subjects": [{"kind": "Group", "name": "platform", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "pod-reader", "apiGroup": "rbac.authorization.k8s.io"}}));
    objects
}

/// Polls until `workload`'s row is in `state`, returning every distinct bar value seen on the
/// way (as WebDriver displayed it) and the row as it is then.
async fn wait_for_state(client: &Client, workload: &str, state: &str) -> (Vec<f64>, Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut values: Vec<f64> = Vec::new();
    loop {
        let shown = bar(client, workload).await;
        if shown["displayed"] == true
            && let Some(value) = shown["value"].as_f64()
            && values.last() != Some(&value)
        {
            values.push(value);
        }
        if shown["state"] == state {
            return (values, shown);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{workload} never {state}: {values:?} {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_follows_a_slow_and_a_failing_rollout() {
    let Some(driver_path) = chromedriver_or_skip() else {
        return;
    };
    let f = Fixture::start_seeded(rolling_cluster(), None, |s| {
        s.admins.groups = vec!["platform".into()];
    })
    .await;
    // Pods take a second to become ready; `failing`'s 100 s deadline becomes one second.
    f.emulator
        .change_settings(rollsafe_emulator::RolloutPaceChange {
            pod_ready_millis: Some(1000),
            progress_deadline_scale: Some(0.01),
        })
        .unwrap();
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .name("failing")
            .always()
            .then(FaultAction::rollout_fails(
                "CrashLoopBackOff",
                "back-off restarting failed container",
            )),
    );
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .name("crashing")
            .always()
            .then(FaultAction::rollout_fails(
                "CrashLoopBackOff",
                "back-off restarting failed container",
            )),
    );
    let url = format!("http://{}", f.api);
    let driver = start_driver(&driver_path).await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;
    sign_in(
        &client,
        &url,
        &token("alice@x.io", &["platform", "developers"]),
    )
    .await;
    wait_for_text(&client, "#who-name", "alice@x.io").await;
    client.goto(&format!("{url}/#/{NS}/rolling")).await.unwrap();
    let rows = wait_for_text(&client, "#consumer-rows", "Deployment slow").await;
    // No controller has published its settings here: never guessed, said unknown, and why.
    let source = wait_for_text(&client, "#controller-settings", "unknown").await;
    assert_eq!(
        source,
        format!(
            "Controller settings unknown — the Lease {NS}/rollsafe-watch carries no \
             rollsafe.dev/settings: is rollsafe watch running with that Lease? What depends on \
             them is shown as unknown."
        )
    );
    assert!(
        rows.contains(
            "Unknown: watched only if rollsafe watch runs with --all, and its settings are unknown."
        ),
        "{rows}"
    );
    assert!(!rows.contains("Not opted in"), "{rows}");
    restart(&client).await;
    wait_for_text(&client, "#report-message", "Rollout requested for 2 of 2").await;
    assert_shown_bar(&client, "Deployment/slow").await;
    wait_for_text(&client, "#rollout-summary", "Rolling out").await;

    // The slow one: the bar is seen part-way, then full, and the words say complete.
    let (values, slow) = wait_for_state(&client, "Deployment/slow", "complete").await;
    assert!(
        values.iter().any(|v| *v > 0.0 && *v < 3.0),
        "a moving bar: {values:?}"
    );
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "it only moves up: {values:?}"
    );
    assert_eq!(slow["text"], "complete: 3 of 3 updated, 3 ready", "{slow}");
    assert_eq!(
        (slow["value"].as_f64(), slow["max"].as_f64()),
        (Some(3.0), Some(3.0))
    );
    assert_eq!(slow["displayed"], true);
    screenshot(&client, "9-rollout-complete").await;

    // The failing one ends stalled, in red, with Kubernetes' reason in view.
    let (_, failing) = wait_for_state(&client, "Deployment/failing", "stalled").await;
    let text = failing["text"].as_str().unwrap();
    assert!(
        text.starts_with("stalled: ProgressDeadlineExceeded — ReplicaSet \"failing-")
            && text.contains("has timed out progressing."),
        "{failing}"
    );
    let words = wait_for_text(
        &client,
        "#rollout-list [data-workload=\"Deployment/failing\"] .rollout-state",
        "ProgressDeadlineExceeded",
    )
    .await;
    assert_eq!(words, text, "the reason is displayed");
    assert_eq!(
        failing["color"], "rgb(179, 38, 30)",
        "stalled is red: {failing}"
    );
    // Once following ends, the heading and the summary say it stalled, in red; the contract's
    // result stays in view as what was requested.
    let summary = wait_for_text(&client, "#rollout-summary", "Rollout stalled").await;
    assert_eq!(summary, "Rollout stalled: 1 complete, 1 stalled.");
    assert_eq!(
        wait_for_text(&client, "#report-title", "Rollout").await,
        "Rollout stalled"
    );
    assert_eq!(color(&client, "#report-title").await, "rgb(179, 38, 30)");
    assert_eq!(color(&client, "#rollout-summary").await, "rgb(179, 38, 30)");
    assert_eq!(
        wait_for_text(&client, "#report-result", "Restart result").await,
        "Restart result: requested."
    );
    screenshot(&client, "10-rollout-stalled").await;
    if let Some(axe) = axe_source() {
        let violations = accessibility_violations(&client, &axe).await;
        assert!(violations.is_empty(), "accessibility: {violations:#?}");
    }
    // Finished: no more reads of the rollout.
    let reads = || {
        f.emulator
            .requests()
            .iter()
            .filter(|r| r.is("list", "deployments"))
            .count()
    };
    let before = reads();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(reads(), before, "the page stopped polling");

    // A rollout that completes: the heading says so, in green.
    client.goto(&format!("{url}/#/{NS}/quick")).await.unwrap();
    wait_for_text(&client, "#consumer-rows", "Deployment quick").await;
    restart(&client).await;
    assert_eq!(
        wait_for_text(&client, "#rollout-summary", "Rollout complete").await,
        "Rollout complete: 1 complete."
    );
    assert_eq!(
        wait_for_text(&client, "#report-title", "Rollout").await,
        "Rollout complete"
    );
    assert_eq!(color(&client, "#report-title").await, "rgb(19, 115, 51)");

    // A crash-looping StatefulSet: no progress condition, so `progressing` for the whole
    // deadline; beside it, within seconds, what its new pods wait for (alice may list pods).
    let crashing = "#rollout-list [data-workload=\"StatefulSet/crashing\"]";
    client
        .goto(&format!("{url}/#/{NS}/crashing-config"))
        .await
        .unwrap();
    wait_for_text(&client, "#consumer-rows", "StatefulSet crashing").await;
    restart(&client).await;
    let note = wait_for_text(
        &client,
        &format!("{crashing} .rollout-pods"),
        "New pods: CrashLoopBackOff.",
    )
    .await;
    assert_eq!(note, "New pods: CrashLoopBackOff.");
    let state = wait_for_text(
        &client,
        &format!("{crashing} .rollout-state"),
        "progressing",
    )
    .await;
    assert!(
        state.starts_with("progressing: "),
        "a note, not a verdict: {state}"
    );
    screenshot(&client, "11-crash-looping").await;
    // Bob may not list pods: the page says why it cannot show them.
    click(&client, Locator::Css("#sign-out")).await;
    wait_for_text(&client, "#sign-in-title", "Sign in").await;
    sign_in(&client, &url, &token("bob@x.io", &["developers"])).await;
    wait_for_text(&client, "#who-name", "bob@x.io").await;
    client
        .goto(&format!("{url}/#/{NS}/crashing-config"))
        .await
        .unwrap();
    wait_for_text(&client, "#consumer-rows", "StatefulSet crashing").await;
    restart(&client).await;
    assert_eq!(
        wait_for_text(&client, &format!("{crashing} .rollout-pods"), "not shown").await,
        format!("New pods: not shown, you may not list pods in {NS}.")
    );

    client.close().await.unwrap();
    drop(driver);
    f.stop().await;
}

/// The computed colour of the element `css` finds.
async fn color(client: &Client, css: &str) -> Value {
    client
        .execute(
            "return getComputedStyle(document.querySelector(arguments[0])).color;",
            vec![json!(css)],
        )
        .await
        .unwrap()
}

/// A Secret `db` consumed by the seed's Deployments, a StatefulSet an operator's resource
/// controls, pods a custom resource owns directly and a standalone pod; the `platform` group
/// may list pods, `developers` may not.
fn owners_cluster() -> Vec<Value> {
    let mut objects = seed();
    let mut kafka = workload("StatefulSet", "kafka", "db");
    kafka["metadata"]["ownerReferences"] = json!([{"apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "Kafka", "name": "my-cluster", "uid": "7d1e0c52-0000-4000-8000-000000000001",
        "controller": true}]);
    objects.push(kafka);
    let group = json!([{"apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup", "name": "kafka",
        "uid": "7d1e0c52-0000-4000-8000-000000000002", "controller": true}]);
    for (name, owners) in [
        ("kafka-0", group.clone()),
        ("kafka-1", group.clone()),
        ("debug", json!([])),
    ] {
        objects.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "ownerReferences": owners},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                "envFrom": [{"secretRef": {"name": "db"}}]}]}}));
    }
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "secret-lister"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "secret-listers"},
        "subjects": [{"kind": "Group", "name": "developers", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": "secret-lister", "apiGroup": "rbac.authorization.k8s.io"}}));
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "pod-readers", "namespace": NS},
        "subjects": [{"kind": "Group", "name": "platform", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "pod-reader", "apiGroup": "rbac.authorization.k8s.io"}}));
    objects
}

/// The operator of a workload, how it is restarted, and the pods no workload owns are on the
/// page; a person who may not list pods sees that said instead, and the rest unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_owned_and_pod_level_consumers_are_shown() {
    let Some(driver_path) = chromedriver_or_skip() else {
        return;
    };
    let f = Fixture::start_seeded(owners_cluster(), None, |s| {
        s.admins.groups = vec!["platform".into()];
    })
    .await;
    let url = format!("http://{}", f.api);
    let driver = start_driver(&driver_path).await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;
    sign_in(
        &client,
        &url,
        &token("alice@x.io", &["platform", "developers"]),
    )
    .await;
    wait_for_text(&client, "#who-name", "alice@x.io").await;
    client.goto(&format!("{url}/#/{NS}/db")).await.unwrap();
    wait_for_text(&client, "#consumer-rows", "StatefulSet kafka").await;
    let kafka = row_text(&client, "StatefulSet/kafka").await;
    assert!(
        kafka.starts_with(
            "StatefulSet kafka\n\
             StatefulSet/kafka is owned by Kafka/my-cluster (an operator's resource).\n\
             Restart: a template patch is not the way to restart it (its operator may revert one): \
             restart it by eviction (rollsafe.dev/strategy: evict, or rollsafe restart-consumers \
             --strategy evict).\n"
        ),
        "{kafka}"
    );
    let api = row_text(&client, "Deployment/api").await;
    assert!(
        !api.contains("owned by") && !api.contains("Restart:"),
        "{api}"
    );
    let pods = wait_for_text(&client, "#pod-consumer-rows", "kafka-0").await;
    let rows: Vec<&str> = pods.lines().collect();
    assert_eq!(
        rows,
        [
            "kafka-0, kafka-1 PodGroup/kafka (an operator's resource) owned by PodGroup/kafka (an \
             operator's resource), not by a Deployment, StatefulSet or DaemonSet: a template patch \
             does not reach them; rollsafe restart-consumers --strategy evict evicts them one at a \
             time, PodDisruptionBudgets holding, and PodGroup/kafka recreates them.",
            "debug None (standalone) standalone: nothing recreates it, not evicted.",
        ],
        "{pods}"
    );
    assert_eq!(
        wait_for_text(&client, "#detail-status", "pods outside").await,
        "3 workloads reference this Secret. 3 pods outside them consume it."
    );
    wait_for_text(&client, "#pod-consumers-note", "patch pod templates only").await;
    assert_eq!(
        color(&client, "#pod-consumer-rows tr:last-child td:last-child").await,
        color(&client, ".no-roll").await,
        "not evicted: in the danger colour"
    );
    screenshot(&client, "owners-1-consumers").await;
    if let Some(axe) = axe_source() {
        let violations = accessibility_violations(&client, &axe).await;
        assert!(violations.is_empty(), "{violations:?}");
    }
    // The confirmation says the patch goes to the operator's template all the same.
    click(&client, Locator::Css("#restart")).await;
    let confirm = wait_for_text(&client, "#confirm-text", "This patches").await;
    assert!(
        confirm.ends_with(
            "StatefulSet kafka: the patch goes to the template all the same (this page does not evict)."
        ),
        "{confirm}"
    );
    click(&client, Locator::Css("#confirm-cancel")).await;

    // Bob may not list pods: said, with the rule; the workloads are shown as before.
    click(&client, Locator::Css("#sign-out")).await;
    wait_for_text(&client, "#sign-in-title", "Sign in").await;
    sign_in(&client, &url, &token("bob@x.io", &["developers"])).await;
    wait_for_text(&client, "#who-name", "bob@x.io").await;
    client.goto(&format!("{url}/#/{NS}/db")).await.unwrap();
    wait_for_text(&client, "#consumer-rows", "StatefulSet kafka").await;
    assert_eq!(
        wait_for_text(&client, "#pod-consumers-status", "not readable").await,
        "Pods: not readable: the identity may not list pods in this namespace, so pods that \
         consume the Secret outside a Deployment, StatefulSet or DaemonSet are not shown (RBAC: \
         list pods) (forbidden)"
    );
    let table = client.find(Locator::Css("#pod-consumers")).await.unwrap();
    assert!(!table.is_displayed().await.unwrap());
    assert_eq!(
        wait_for_text(&client, "#detail-status", "reference").await,
        "3 workloads reference this Secret."
    );
    screenshot(&client, "owners-2-pods-not-readable").await;

    client.close().await.unwrap();
    drop(driver);
    f.stop().await;
}
