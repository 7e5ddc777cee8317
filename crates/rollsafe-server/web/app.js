// rollsafe's page. No framework and no inline code (the server's Content-Security-Policy
// forbids it). Text from the server is set with textContent only, never parsed as HTML.
"use strict";

// Every state-changing call carries it; the server refuses a cookie-authenticated one without it.
const CSRF = { "X-Rollsafe-CSRF": "1" };

const $ = (id) => document.getElementById(id);
let config = { restartEnabled: false };

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function show(section) {
  for (const id of ["sign-in", "secrets", "detail"]) $(id).hidden = id !== section;
}

async function api(method, path, headers) {
  const response = await fetch(path, {
    method,
    headers: Object.assign({ Accept: "application/json" }, headers || {}),
    credentials: "same-origin",
  });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  return { status: response.status, body };
}

// The contract's texts (clients key on them), said for a person where the page knows more.
const AUTHENTICATION_REQUIRED = "Authentication required";
const NOT_ALLOWED = "You are not allowed to modify this secret";

function errorText(result) {
  if (result.status === 401 && result.body && result.body.error === AUTHENTICATION_REQUIRED) {
    return "Your session is invalid or has expired: sign in again.";
  }
  if (result.body && typeof result.body.error === "string") {
    return result.body.requestId ? `${result.body.error} (request ${result.body.requestId})` : result.body.error;
  }
  return `The server answered HTTP ${result.status}.`;
}

// ---- sign-in ---------------------------------------------------------------------------------

async function whoAmI() {
  const me = await api("GET", "/api/me");
  if (me.status !== 200) {
    $("who").hidden = true;
    show("sign-in");
    $("oidc-sign-in").hidden = !config.oidc;
    $("token").focus();
    return false;
  }
  $("who-name").textContent = me.body.email;
  $("who").hidden = false;
  return true;
}

$("token-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("sign-in-error").textContent = "";
  const token = $("token").value.trim();
  const result = await api("POST", "/auth/session", Object.assign({ Authorization: `Bearer ${token}` }, CSRF));
  $("token").value = "";
  if (result.status !== 204) {
    $("sign-in-error").textContent = result.status === 401
      ? "This token is invalid or has expired. Ask for a new one (rollsafe token), or sign in with your identity provider."
      : errorText(result);
    return;
  }
  await route();
});

$("sign-out").addEventListener("click", async () => {
  await api("POST", "/auth/logout", CSRF);
  location.hash = "#/";
  await route();
});

// ---- the list of Secrets -----------------------------------------------------------------------

async function showSecrets(namespace) {
  show("secrets");
  const namespaces = await api("GET", "/api/namespaces");
  const select = $("namespace");
  select.replaceChildren();
  if (namespaces.status !== 200) {
    $("secrets-status").textContent = errorText(namespaces);
    return;
  }
  for (const ns of namespaces.body.namespaces) {
    const option = el("option", ns);
    option.value = ns;
    select.append(option);
  }
  const chosen = namespace && namespaces.body.namespaces.includes(namespace) ? namespace : namespaces.body.namespaces[0];
  if (!chosen) {
    $("secrets-status").textContent = "No namespace is in scope for you.";
    return;
  }
  select.value = chosen;
  const list = $("secret-list");
  list.replaceChildren();
  $("secrets-status").textContent = "Loading…";
  const secrets = await api("GET", `/api/namespaces/${encodeURIComponent(chosen)}/secrets`);
  if (secrets.status !== 200) {
    $("secrets-status").textContent = errorText(secrets);
    return;
  }
  $("secrets-status").textContent = `${secrets.body.secrets.length} Secret${secrets.body.secrets.length === 1 ? "" : "s"} in ${chosen}.`;
  for (const secret of secrets.body.secrets) {
    const link = el("a", secret.name);
    link.href = `#/${encodeURIComponent(chosen)}/${encodeURIComponent(secret.name)}`;
    const item = el("li");
    item.append(link);
    list.append(item);
  }
}

$("namespace").addEventListener("change", () => {
  location.hash = `#/${encodeURIComponent($("namespace").value)}`;
});

// ---- a Secret's consumers ----------------------------------------------------------------------

function describeReference(reference) {
  const where = [];
  if (reference.containerList && reference.container !== undefined) {
    where.push(`${reference.containerList} ${reference.container === null ? "(unnamed)" : reference.container}`);
  }
  switch (reference.via) {
    case "env": where.push(`env ${reference.env} ← key ${reference.key}`); break;
    case "envFrom": where.push("envFrom"); break;
    case "volume": where.push(`volume ${reference.volume}`); break;
    case "projectedVolume": where.push(`projected volume ${reference.volume}`); break;
    case "imagePullSecret": where.push("imagePullSecrets"); break;
    default: where.push(reference.via);
  }
  return where.join(": ") + (reference.optional ? " (optional)" : "");
}

let current = null;

async function showDetail(namespace, name) {
  stopFollowing();
  show("detail");
  current = { namespace, name, workloads: [] };
  $("detail-title").textContent = `${namespace}/${name}`;
  $("detail-error").textContent = "";
  $("detail-status").textContent = "Looking for consumers…";
  $("controller-settings").textContent = "";
  $("report").hidden = true;
  $("consumers").hidden = true;
  $("restart").hidden = true;
  $("progressive-note").hidden = true;
  $("restart-disabled").hidden = true;
  $("inventory-warnings").replaceChildren();
  $("pod-consumers").hidden = true;
  $("pod-consumers-status").hidden = true;
  $("pod-consumers-note").hidden = true;
  const result = await api("GET", `/api/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}/consumers`);
  if (result.status !== 200) {
    $("detail-status").textContent = "";
    // The ACL refused a read: say what was refused, and why.
    $("detail-error").textContent = result.status === 403 && result.body && result.body.error === NOT_ALLOWED
      ? `You may not see or restart the consumers of ${namespace}/${name}: its access rules do not let you modify this Secret.`
      : errorText(result);
    return;
  }
  const preview = result.body;
  current.workloads = preview.workloads;
  for (const [kind, inventory] of Object.entries(preview.inventories)) {
    if (!inventory.complete) {
      $("inventory-warnings").append(el("p", `${kind}: ${inventory.message} (${inventory.code})`, "warning"));
    }
  }
  $("controller-settings").textContent = settingsText(preview.controller);
  const rows = $("consumer-rows");
  rows.replaceChildren();
  for (const workload of preview.workloads) {
    const row = el("tr");
    const name = el("td", `${workload.kind} ${workload.name}`);
    // An operator's workload names its owner; one restarted otherwise than by a template patch
    // says how (the preview's words).
    if (workload.operatorOwner) {
      name.append(el("p", `${workload.kind}/${workload.name} is owned by ${ownerText(workload.operatorOwner)} (an operator's resource).`, "hint owned-by"));
    }
    if (workload.restartBy) name.append(el("p", `Restart: ${workload.restartBy.reason}.`, "hint restart-by"));
    row.append(name);
    // On a narrow screen the header row is off-screen: each cell names its column (app.css).
    const refs = el("td");
    refs.dataset.label = "References";
    const list = el("ul");
    for (const reference of workload.references) list.append(el("li", describeReference(reference)));
    refs.append(list);
    row.append(refs);
    const rolls = workload.rollsNow ? el("td", rollsNowText(workload)) : el("td", `No: ${workload.deferralReason}`, "no-roll");
    rolls.dataset.label = "Rolls now";
    row.append(rolls);
    // What rollsafe watch does with it, under its published settings: watched or not, the
    // flap stop's halt, the roll it holds, and what its rolls wait for.
    const watched = el("td", watchedText(workload, preview), workload.halted ? "no-roll" : undefined);
    if (workload.halted) {
      watched.textContent += ` Halted by rollsafe watch: ${workload.halted} Remove the rollsafe.dev/halted annotation to resume.`;
    }
    if (workload.pending) watched.textContent += ` ${pendingText(workload, preview.namespace)}`;
    else if (workload.controller && workload.controller.watched !== "no") {
      watched.textContent += holdsText(workload.controller, preview.namespace);
    }
    // A roll awaiting approval: approved here as the signed-in user, behind a restart's gates.
    if (workload.pending && workload.pending.heldBy === "approval" && config.restartEnabled) {
      const button = el("button", "Approve", "approve");
      button.type = "button";
      button.setAttribute("aria-label", `Approve the roll of ${workload.kind} ${workload.name}`);
      const outcome = el("span", "", "approve-outcome");
      outcome.setAttribute("role", "status");
      button.addEventListener("click", () => approve(preview, workload, button, outcome));
      watched.append(" ", button, " ", outcome);
    }
    watched.dataset.label = "Watched";
    row.append(watched);
    row.dataset.workload = `${workload.kind}/${workload.name}`;
    rows.append(row);
  }
  const count = preview.workloads.length;
  const notNow = preview.workloads.filter((w) => !w.rollsNow).length;
  const pods = showPodConsumers(preview);
  $("detail-status").textContent = (count === 0
    ? "No workloads reference this Secret."
    : `${count} workload${count === 1 ? "" : "s"} reference${count === 1 ? "s" : ""} this Secret` +
      (notNow ? `; ${notNow} will not roll now.` : ".")) +
    (pods ? ` ${pods} pod${pods === 1 ? "" : "s"} outside them consume${pods === 1 ? "s" : ""} it.` : "");
  $("pod-consumers-note").hidden = !(pods || preview.workloads.some((w) => w.restartBy));
  $("consumers").hidden = count === 0;
  $("restart").hidden = !config.restartEnabled;
  $("progressive-note").hidden = !config.restartEnabled;
  $("restart").disabled = count === 0;
  $("restart-disabled").hidden = config.restartEnabled;
}

// `Kind/name` of an owner.
function ownerText(owner) {
  return `${owner.kind}/${owner.name}`;
}

// The pods that consume the Secret outside the three kinds (the preview's `podConsumers`), one
// row per owner, or why they could not be read. Returns how many pods there are.
function showPodConsumers(preview) {
  const rows = $("pod-consumer-rows");
  rows.replaceChildren();
  const pods = preview.podConsumers;
  if (!pods) return 0;
  if (pods.state !== "read") {
    const status = $("pod-consumers-status");
    status.textContent = `Pods: ${pods.message} (${pods.code})`;
    status.hidden = false;
    return 0;
  }
  let count = 0;
  for (const group of pods.groups) {
    count += group.count;
    const row = el("tr");
    const more = group.count - group.pods.length;
    const names = el("td", group.pods.join(", ") + (more > 0 ? ` and ${more} more` : ""));
    names.dataset.label = "Pods";
    row.append(names);
    const owner = el("td", group.owner
      ? `${ownerText(group.owner)}${group.operator ? " (an operator's resource)" : ""}`
      : "None (standalone)");
    owner.dataset.label = "Owner";
    row.append(owner);
    const restart = el("td", `${group.reason}.`, group.restart === "evict" ? undefined : "no-roll");
    restart.dataset.label = "Restarted";
    row.append(restart);
    row.dataset.owner = group.owner ? ownerText(group.owner) : "";
    rows.append(row);
  }
  $("pod-consumers").hidden = pods.groups.length === 0;
  return count;
}

// Approves the roll rollsafe watch holds for `workload`: once, as the signed-in user.
async function approve(preview, workload, button, outcome) {
  button.disabled = true;
  outcome.textContent = "Approving…";
  const path = `/api/namespaces/${encodeURIComponent(preview.namespace)}/secrets/${encodeURIComponent(preview.secret)}` +
    `/consumers/${encodeURIComponent(workload.kind)}/${encodeURIComponent(workload.name)}/approve`;
  const result = await api("POST", path, CSRF);
  if (result.status === 200 && result.body) {
    outcome.textContent = approvedText(result.body);
    return;
  }
  outcome.textContent = `Not approved: ${errorText(result)}`;
  button.disabled = false;
}

// What was approved, for a person: the workload, the objects whose content it rolls for, and
// when — not the digest.
function approvedText(approved) {
  const objects = (approved.consumes || []).map((o) => o.replace("/", " "));
  const what = objects.length ? ` for the current ${objects.join(", ")}` : "";
  const since = approved.since ? `; it awaited approval since ${approved.since}` : "";
  return `Approved at ${approved.approvedAt}: rollsafe watch rolls ${approved.kind} ${approved.name}${what}${since}.`;
}

// A roll rollsafe watch holds for a workload (the preview's `pending`): a restart window, or an
// approval, with the command that gives it.
function pendingText(workload, namespace) {
  const pending = workload.pending;
  if (pending.heldBy === "approval") {
    const since = pending.since ? ` since ${pending.since}` : "";
    return `Roll pending: awaits approval${since}; approve with rollsafe approve -n ${namespace} ${workload.kind.toLowerCase()}/${workload.name}.`;
  }
  return pending.until
    ? `Roll pending: held by a restart window until ${pending.until}.`
    : "Roll pending: held by a restart window until the window is changed.";
}

// Where the controller's settings the Watched column is judged under came from (the preview's
// `controller`): published on its Lease, or unknown with a fixed sentence saying why.
function settingsText(controller) {
  if (!controller) return "";
  if (controller.settings !== "published") {
    const end = /[.?]$/.test(controller.message) ? "" : ".";
    return `Controller settings unknown — ${controller.message}${end} What depends on them is shown as unknown.`;
  }
  let text = `Watched as rollsafe watch's settings say, as the controller published them at ${controller.at} (Lease ${controller.lease}).`;
  if (controller.selector) text += ` It watches only workloads matching --selector ${controller.selector}.`;
  if (controller.namespaceSelector) text += ` It watches only namespaces matching --namespace-selector ${controller.namespaceSelector}.`;
  if (controller.sourceSelector) text += ` It watches only Secrets matching --source-selector ${controller.sourceSelector}.`;
  if (controller.dryRun) text += " It runs with --dry-run: it patches nothing.";
  return text;
}

// Whether rollsafe watch rolls a workload when this Secret changes: the preview's judgement
// under the controller's published settings (`controller`), else its own annotation (`watch`).
function watchedText(workload, preview) {
  const c = workload.controller;
  if (!c) return watchText(workload.watch);
  switch (c.because) {
    case "opted_in": return "Yes.";
    case "all": return "Yes: rollsafe watch runs with --all (no rollsafe.dev/watch needed).";
    case "reloader_compat": return "Yes: its Reloader annotations opt it in (rollsafe watch runs with --reloader-compat).";
    case "not_opted_in": return "No: not opted in (no rollsafe.dev/watch, and rollsafe watch runs without --all).";
    case "reloader_ignored": return "No: its Reloader annotations opt it in only under --reloader-compat, and rollsafe watch runs without it (and without --all).";
    case "reloader_not_listed": return "No: its Reloader annotations do not name this Secret.";
    case "reloader_search": return "Unknown: its Reloader annotations take Secrets marked reloader.stakater.com/match, which is not read here.";
    case "namespace_not_watched": return `No: rollsafe watch does not watch namespace ${preview.namespace}.`;
    case "kind_ignored": return "No: rollsafe watch ignores Secrets (--ignore-kind Secret).";
    case "settings_unknown":
      switch (workload.watch) {
        case "opted_in": return "Unknown: opted in by its rollsafe.dev/watch, but rollsafe watch's settings are unknown.";
        case "reloader": return "Unknown: its Reloader annotations opt it in only under --reloader-compat, and rollsafe watch's settings are unknown.";
        default: return "Unknown: watched only if rollsafe watch runs with --all, and its settings are unknown.";
      }
    default: return watchText(workload.watch);
  }
}

// What rollsafe watch's rolls of a watched workload wait for, when none is held yet.
function holdsText(c, namespace) {
  let text = "";
  if (c.approval === "namespace") text += ` Each roll awaits approval (rollsafe watch runs with --require-approval ${namespace}).`;
  if (c.approval === "workload") text += " Each roll awaits approval (its rollsafe.dev/approval).";
  if (c.restartWindow) {
    const from = c.restartWindow.from === "workload" ? "its rollsafe.dev/restart-window" : "rollsafe watch's --restart-window";
    text += ` It rolls only inside the restart window ${c.restartWindow.window} (${from}).`;
  }
  return text;
}

// Whether a restart from this page rolls the workload's pods now, said so that it agrees with
// the Watched column: a restart waits for neither an approval nor a restart window, and
// settles a roll the controller holds.
function rollsNowText(workload) {
  if (workload.pending) {
    return workload.pending.heldBy === "approval"
      ? "Yes, when restarted here: a restart needs no approval, and settles the roll rollsafe watch holds for one."
      : "Yes, when restarted here: a restart waits for no restart window, and settles the roll rollsafe watch holds.";
  }
  const c = workload.controller;
  if (c && c.watched !== "no" && (c.approval || c.restartWindow)) {
    return "Yes, when restarted here: a restart waits for no approval or restart window (rollsafe watch's own rolls do).";
  }
  return "Yes";
}

// Whether rollsafe watch rolls a workload when this Secret changes (the preview's `watch`),
// from a server that does not judge it under the controller's settings.
function watchText(watch) {
  switch (watch) {
    case "opted_in": return "Yes.";
    case "not_listed": return "Not for this Secret: its rollsafe.dev/watch list does not name it.";
    case "opted_out": return "No: opted out (rollsafe.dev/watch: \"false\").";
    case "invalid": return "No: its rollsafe.dev/watch value is not understood.";
    case "reloader": return "Reloader annotations: watched as they say when rollsafe watch runs with --reloader-compat.";
    default: return "Not opted in (watched only when rollsafe watch runs with --all).";
  }
}

// What happens to a workload that is patched but does not roll now, in words.
function whenItRolls(workload) {
  const who = `${workload.kind} ${workload.name}`;
  switch (workload.deferral) {
    case "paused": return `${who} is paused: it rolls when it is resumed.`;
    case "on_delete": return `${who} replaces each pod only when that pod is deleted (OnDelete).`;
    case "partition": return `${who} rolls only when its rollingUpdate partition is lowered.`;
    default: return `${who} does not roll now: ${workload.deferralReason}.`;
  }
}

$("restart").addEventListener("click", () => {
  // Never offered without a preview to act on (a refused one, or no consumers).
  if (!current || current.workloads.length === 0 || $("restart").hidden || $("restart").disabled) return;
  const count = current.workloads.length;
  const notNow = current.workloads.filter((w) => !w.rollsNow);
  const evicted = current.workloads.filter((w) => w.restartBy);
  $("confirm-text").textContent =
    `This patches ${count} workload${count === 1 ? "" : "s"} in ${current.namespace}.` +
    (notNow.length ? ` ${count - notNow.length} roll${count - notNow.length === 1 ? "s" : ""} now. ` +
      notNow.map(whenItRolls).join(" ") : "") +
    (evicted.length ? ` ${evicted.map((w) => `${w.kind} ${w.name}`).join(", ")}: ` +
      "the patch goes to the template all the same (this page does not evict)." : "");
  $("confirm").showModal();
  $("confirm-cancel").focus();
});

$("confirm").addEventListener("close", async () => {
  if ($("confirm").returnValue !== "confirm") {
    $("restart").focus();
    return;
  }
  $("restart").disabled = true;
  stopFollowing();
  const { namespace, name } = current;
  const result = await api("POST", `/api/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}/restart-consumers`, CSRF);
  $("restart").disabled = false;
  showReport(result, namespace, name);
});

function showReport(result, namespace, name) {
  const report = $("report");
  const body = $("report-body");
  body.replaceChildren();
  report.hidden = false;
  $("report-result").hidden = true;
  if (!result.body || typeof result.body.status !== "string") {
    $("report-title").textContent = "Refused";
    $("report-title").className = "status-failed";
    $("report-message").textContent = errorText(result);
    $("report-note").textContent = "";
    report.focus();
    return;
  }
  const r = result.body;
  $("report-title").textContent = `Result: ${r.status}`;
  $("report-title").className = `status-${r.status}`;
  report.dataset.status = r.status;
  delete report.dataset.rollout;
  $("report-message").textContent = r.message;
  if (r.requested.length) {
    body.append(el("h3", "Requested"));
    const list = el("ul", null, "rollout-list");
    list.id = "rollout-list";
    const followed = [];
    for (const w of r.requested) {
      // The preview knows which ones the patch does not roll now; the result does not say.
      const previewed = current.workloads.find((c) => c.kind === w.kind && c.name === w.name);
      const item = el("li");
      item.append(el("span", `${w.kind} ${w.name}`, "workload"));
      if (previewed && !previewed.rollsNow) {
        item.append(" ", el("span", `— will not roll now: ${whenItRolls(previewed)}`, "no-roll"));
        item.dataset.deferred = previewed.deferral;
      }
      item.dataset.workload = `${w.kind}/${w.name}`;
      list.append(item);
      followed.push(rolloutRow(item, w));
    }
    body.append(list);
    // Announced politely, and only when it changes: the bars themselves are not live.
    const summary = el("p", "Following the rollout…", "rollout-summary");
    summary.id = "rollout-summary";
    summary.setAttribute("role", "status");
    summary.setAttribute("aria-live", "polite");
    body.append(summary);
    follow(namespace, name, followed, summary, list, r);
  }
  if (r.failures.length) {
    body.append(el("h3", "Failed"));
    const list = el("ul");
    for (const f of r.failures) {
      list.append(el("li", `${f.kind} ${f.name}: ${f.code}${f.httpStatus ? ` (HTTP ${f.httpStatus})` : ""}. ${f.message}`));
    }
    body.append(list);
  }
  if (r.discoveryFailures.length) {
    body.append(el("h3", "Not listed"));
    const list = el("ul");
    for (const f of r.discoveryFailures) {
      list.append(el("li", `${f.kind}: ${f.code}${f.httpStatus ? ` (HTTP ${f.httpStatus})` : ""}. ${f.message}`));
    }
    body.append(list);
  }
  // With bars, say what they are; the contract's note speaks of the result alone.
  $("report-note").textContent = r.requested.length
    ? "The result above counts the pod-template patches Kubernetes acknowledged. The bars follow " +
      "each requested rollout as Kubernetes reports it: replicas updated to the new template, and " +
      "ready. Whether the application took up the new credentials is not checked."
    : r.note;
  report.focus();
}

// When following ends: the heading says how the rollout ended (stalled in red, complete in
// green), and the contract's result stays in view as what was requested.
function finishReport(rows, r) {
  const states = rows.map((row) => row.item.dataset.state);
  const ended = states.includes("stalled") ? "stalled"
    : states.every((state) => state === "complete") ? "complete"
    : "finished";
  const title = $("report-title");
  title.textContent = `Rollout ${ended}`;
  title.className = `rollout-${ended}`;
  $("report").dataset.rollout = ended;
  const requested = $("report-result");
  requested.replaceChildren("Restart result: ", el("span", r.status, `status-${r.status}`), ".");
  requested.hidden = false;
  return ended;
}

// ---- following a restart's rollout -------------------------------------------------------------
//
// After a restart the report polls GET …/rollout every second and shows each requested
// workload's state. The route is stateless, so the page keeps what it needs across reads, as the
// core's Follower does for the CLI: the restart annotation's value (`restartedAt`) from the first
// read after the restart (a later different value is `superseded`), and when a StatefulSet's or
// DaemonSet's counts last moved (no progress for the progress deadline is `stalled`). It stops
// when every requested workload is final, or after FOLLOW_LIMIT_MS, saying so.

const POLL_MS = 1000;
const FOLLOW_LIMIT_MS = 15 * 60 * 1000;
// A StatefulSet or DaemonSet has no progress condition: the Deployment default deadline.
const PROGRESS_DEADLINE_MS = 600 * 1000;
const FINAL = new Set(["complete", "deferred", "stalled", "superseded", "gone"]);

// Bumped by stopFollowing: a poll of an earlier generation does nothing more.
let following = 0;

function stopFollowing() {
  following += 1;
}

// One requested workload's line: a bar of updated of desired, with words beside it.
function rolloutRow(item, workload) {
  const bar = el("progress");
  bar.max = 1;
  bar.value = 0;
  bar.setAttribute("aria-label", `${workload.kind} ${workload.name}: waiting for the first reading`);
  const state = el("span", "waiting for the first reading…", "rollout-state");
  // What the new pods say, beside the progress: a note, not a verdict.
  const note = el("span", "", "rollout-pods hint");
  note.hidden = true;
  const line = el("div", null, "rollout-line");
  line.append(bar, " ", state, " ", note);
  item.append(line);
  item.dataset.state = "";
  return { kind: workload.kind, name: workload.name, item, bar, state, note, pinned: undefined, moved: null, final: false };
}

// Where one workload stands, in words, from the route's entry and the page's memory.
function rolloutText(row, w, status) {
  const p = w && w.progress;
  const counts = p ? `${Math.max(p.updated, 0)} of ${Math.max(p.desired, 0)} updated, ${Math.max(p.ready, 0)} ready` : "";
  switch (status) {
    case "complete": return counts ? `complete: ${counts}` : "complete";
    case "pending": return "pending: waiting for its controller to observe the change";
    case "progressing": return `progressing: ${counts}`;
    case "deferred": return `deferred: ${w.deferralReason || w.deferral || "it rolls on its own trigger"}`;
    case "superseded": return "superseded: someone else's rollout replaced this one";
    case "gone": return "gone: deleted or replaced";
    case "stalled": {
      const reason = w.reason || {};
      const parts = [reason.reason || "no progress"];
      if (reason.message) parts.push(reason.message);
      if (reason.podReason) parts.push(`pods: ${reason.podReason}`);
      return `stalled: ${parts.join(" — ")}${counts ? ` (${counts})` : ""}`;
    }
    default: return status;
  }
}

// What the new pods of a rollout in progress say (the rollout view's `pods`), or why the page
// cannot say it.
function podsText(pods, namespace) {
  if (!pods) return "";
  if (pods.notRead === "forbidden") return `New pods: not shown, you may not list pods in ${namespace}.`;
  if (pods.notRead) return "New pods: could not be read this time.";
  return pods.reason ? `New pods: ${pods.reason}.` : "";
}

// Applies one read to a row; returns its state.
function observeRow(row, view, now) {
  const inventory = view.inventories[row.kind];
  const w = view.workloads.find((x) => x.kind === row.kind && x.name === row.name);
  let status;
  if (!w) {
    // Not listed this time because its kind could not be listed: nothing is known.
    if (inventory && !inventory.complete) {
      row.state.textContent = `not listed this time: ${inventory.message}`;
      return row.item.dataset.state;
    }
    status = "gone";
  } else {
    const marker = w.restartedAt === undefined ? null : w.restartedAt;
    if (row.pinned === undefined) row.pinned = marker;
    if (marker !== row.pinned) {
      status = "superseded";
    } else {
      status = w.state;
      // No progress condition on these kinds: the page keeps when their counts last moved.
      if (status === "progressing" && row.kind !== "Deployment") {
        const key = JSON.stringify([w.observedGeneration, w.progress]);
        if (!row.moved || row.moved.key !== key) row.moved = { key, at: now };
        else if (now - row.moved.at >= PROGRESS_DEADLINE_MS) {
          status = "stalled";
          w.reason = { reason: "NoProgress", message: "no progress within the progress deadline" };
        }
      } else {
        row.moved = null;
      }
    }
  }
  const p = w && w.progress;
  const desired = p ? Math.max(p.desired, 0) : 0;
  const updated = p ? Math.min(Math.max(p.updated, 0), desired) : 0;
  const text = rolloutText(row, w, status);
  if (p && desired > 0) {
    row.bar.max = desired;
    row.bar.value = status === "complete" ? desired : updated;
    row.bar.hidden = false;
  } else {
    // Nothing to count (gone, or no replicas): the words say it.
    row.bar.hidden = true;
  }
  row.bar.setAttribute("aria-label", `${row.kind} ${row.name}: ${text}`);
  row.state.textContent = text;
  const note = status === "progressing" ? podsText(w && w.pods, view.namespace) : "";
  setIfChanged(row.note, note);
  row.note.hidden = note === "";
  row.item.dataset.state = status;
  row.item.classList.toggle("rollout-stalled", status === "stalled");
  row.item.classList.toggle("rollout-complete", status === "complete");
  row.final = FINAL.has(status);
  return status;
}

// The core's display order (RolloutState::ALL).
const STATE_ORDER = ["waiting", "pending", "progressing", "complete", "stalled", "deferred", "superseded", "gone"];

function countsText(rows) {
  const counts = new Map();
  for (const row of rows) {
    const state = row.item.dataset.state || "waiting";
    counts.set(state, (counts.get(state) || 0) + 1);
  }
  return STATE_ORDER.filter((state) => counts.has(state)).map((state) => `${counts.get(state)} ${state}`).join(", ");
}

function setIfChanged(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

async function follow(namespace, name, rows, summary, list, r) {
  stopFollowing();
  const generation = following;
  const started = Date.now();
  const path = `/api/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}/rollout`;
  list.dataset.following = "yes";
  for (;;) {
    let result;
    try {
      result = await api("GET", path);
    } catch (_) {
      result = { status: 0, body: null };
    }
    if (generation !== following) return;
    const now = Date.now();
    if (result.status === 200 && result.body && Array.isArray(result.body.workloads)) {
      for (const row of rows) if (!row.final) observeRow(row, result.body, now);
      if (rows.every((row) => row.final)) {
        const ended = finishReport(rows, r);
        setIfChanged(summary, `Rollout ${ended}: ${countsText(rows)}.`);
        summary.className = `rollout-summary rollout-${ended}`;
        list.dataset.following = "done";
        return;
      }
      setIfChanged(summary, `Rolling out: ${countsText(rows)}.`);
    } else if ([400, 401, 403, 404].includes(result.status)) {
      // Not something a later read fixes (signed out, refused, the Secret deleted).
      setIfChanged(summary, `Stopped following the rollout: ${errorText(result)}`);
      list.dataset.following = "stopped";
      return;
    } else {
      const why = result.status === 0 ? "the server could not be reached" : errorText(result);
      setIfChanged(summary, `The rollout could not be read (${why}); trying again.`);
    }
    if (now - started >= FOLLOW_LIMIT_MS) {
      setIfChanged(summary, `Stopped following after 15 minutes: ${countsText(rows)}. ` +
        "Reload the page to see where they stand, or run kubectl rollout status.");
      list.dataset.following = "timed_out";
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (generation !== following) return;
  }
}

// ---- routing -----------------------------------------------------------------------------------

async function route() {
  if (!(await whoAmI())) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length >= 2) await showDetail(parts[0], parts[1]);
  else await showSecrets(parts[0]);
  $("main").focus();
}

window.addEventListener("hashchange", route);

(async () => {
  const answer = await api("GET", "/api/config");
  if (answer.status === 200) config = answer.body;
  await route();
})();
