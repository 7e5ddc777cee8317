//! The budgeted, paged inventory of one workload kind in one namespace.
//!
//! Each kind is listed with `limit=100` and no `resourceVersion` (a consistent read that
//! honours `limit`), following `continue` to the end. Per kind at most [`MAX_PAGES`] pages,
//! [`MAX_OBJECTS`] raw objects and [`MAX_BYTES`] bytes of response JSON are accepted; the body
//! of a page is streamed and reading stops the moment the byte budget is passed, so memory
//! stays proportional to the budget.
//!
//! Anything inconsistent makes the kind incomplete ([`Incomplete`]): a page over the limit, a
//! non-final page under it, a repeated or malformed continue token, a 410 on a continue, a body
//! that is not a list of the expected kind, an item without a valid `metadata.name`, duplicate
//! names, a list `resourceVersion` that changes between pages, a truncated body, or a budget
//! overrun. [`PageChecker`] holds these rules without I/O; [`list_kind`] drives it over HTTP.

use std::collections::HashSet;

use http::{Method, Request, StatusCode};
use kube::client::Body;
use rollsafe_core::failure::{Failure, TransportFailure};
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::reference::{self, Reference};
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::workload::WorkloadKind;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::{Instrument, debug, debug_span, warn};

use crate::transport::{self, BodyError, Timeouts};

/// Objects per page requested with `limit`.
pub const PAGE_SIZE: usize = 100;
/// The most pages read for one kind.
pub const MAX_PAGES: usize = 100;
/// The most objects accepted for one kind.
pub const MAX_OBJECTS: usize = 2_000;
/// The most bytes of response JSON read for one kind.
pub const MAX_BYTES: u64 = 32 * 1024 * 1024;
/// The longest continue token accepted as well-formed.
pub const MAX_CONTINUE_TOKEN_LEN: usize = 8 * 1024;

/// The limits of one kind's inventory. [`Budget::default`] is the contract's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// `limit` on each request, and the exact size of every non-final page.
    pub page_size: usize,
    /// The most pages.
    pub max_pages: usize,
    /// The most objects.
    pub max_objects: usize,
    /// The most bytes of response bodies.
    pub max_bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            page_size: PAGE_SIZE,
            max_pages: MAX_PAGES,
            max_objects: MAX_OBJECTS,
            max_bytes: MAX_BYTES,
        }
    }
}

/// Why a kind's inventory is not complete. For logs and tests; the contract shows only the
/// classified [`Failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incomplete {
    /// The API server answered with an error status.
    Http(u16),
    /// 410 Gone on a continue request: the token expired.
    ContinueExpired,
    /// 400 on a continue request: the server rejected the token.
    ContinueRejected,
    /// No response: the connection failed or timed out.
    Transport(TransportFailure),
    /// A 2xx other than 200, or a body that is not JSON, not a list of the expected kind, or
    /// whose `items` is not an array of objects.
    NotAList,
    /// A page had more items than the limit.
    PageOverLimit,
    /// A page that was not the last had fewer items than the limit.
    ShortPage,
    /// The continue token is not a string of printable ASCII of at most
    /// [`MAX_CONTINUE_TOKEN_LEN`] characters.
    MalformedContinue,
    /// The continue token was already used in this inventory.
    RepeatedContinue,
    /// The list's `metadata.resourceVersion` changed between pages.
    ResourceVersionChanged,
    /// An item without a `metadata.name` that is a valid object name.
    MissingName,
    /// Two items with the same name.
    DuplicateName,
    /// More pages than the budget allows.
    PageBudget,
    /// More objects than the budget allows.
    ObjectBudget,
    /// More response bytes than the budget allows.
    ByteBudget,
    /// The body broke off after a 200.
    TruncatedBody,
    /// The whole inventory took longer than its time limit.
    Timeout,
}

impl Incomplete {
    /// The contract failure for this reason.
    pub fn failure(self) -> Failure {
        match self {
            Incomplete::Http(status) => Failure::from_status(status),
            Incomplete::ContinueExpired => Failure::incomplete_list(Some(410)),
            Incomplete::ContinueRejected => Failure::incomplete_list(Some(400)),
            // Classified like any other request (DESIGN "Classification"): a list that may have
            // reached the server and got no answer is `unconfirmed`, one never sent is
            // `unavailable`.
            Incomplete::Transport(failure) => Failure::from_transport(failure),
            Incomplete::Timeout => Failure::from_transport(TransportFailure::AfterSend),
            _ => Failure::incomplete_list(None),
        }
    }

    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Incomplete::Http(_) => "http_error",
            Incomplete::ContinueExpired => "continue_expired",
            Incomplete::ContinueRejected => "continue_rejected",
            Incomplete::Transport(TransportFailure::NotSent) => "not_sent",
            Incomplete::Transport(TransportFailure::AfterSend) => "no_response",
            Incomplete::NotAList => "not_a_list",
            Incomplete::PageOverLimit => "page_over_limit",
            Incomplete::ShortPage => "short_page",
            Incomplete::MalformedContinue => "malformed_continue",
            Incomplete::RepeatedContinue => "repeated_continue",
            Incomplete::ResourceVersionChanged => "resource_version_changed",
            Incomplete::MissingName => "missing_name",
            Incomplete::DuplicateName => "duplicate_name",
            Incomplete::PageBudget => "page_budget",
            Incomplete::ObjectBudget => "object_budget",
            Incomplete::ByteBudget => "byte_budget",
            Incomplete::TruncatedBody => "truncated_body",
            Incomplete::Timeout => "timeout",
        }
    }
}

/// A listed workload that references the Secret.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    /// The workload's kind.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// The references to the Secret that made it match, in document order.
    pub references: Vec<Reference>,
    /// The listed object, as inspected (the patch tests its uid and resourceVersion).
    pub(crate) object: Value,
}

impl Match {
    /// The listed object, as inspected.
    pub fn object(&self) -> &Value {
        &self.object
    }
}

/// How far one kind's inventory got.
#[derive(Debug, Clone, PartialEq)]
pub enum InventoryStatus {
    /// Every page was read and consistent.
    Complete {
        /// The workloads that reference the Secret, by name.
        matches: Vec<Match>,
    },
    /// The inventory failed; nothing from it may be patched.
    Incomplete {
        /// Why.
        reason: Incomplete,
        /// The classified failure for `discoveryFailures`.
        failure: Failure,
    },
}

/// One kind's inventory.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    /// The kind listed.
    pub kind: WorkloadKind,
    /// Pages received (including one that failed a check).
    pub pages: usize,
    /// Objects accepted.
    pub objects: usize,
    /// Response body bytes read, including those of a body abandoned over budget (reading
    /// stops at the first chunk past the budget, or before reading when the declared length
    /// is already past it).
    pub bytes: u64,
    /// The outcome.
    pub status: InventoryStatus,
}

impl Inventory {
    /// Whether every page was read and consistent.
    pub fn is_complete(&self) -> bool {
        matches!(self.status, InventoryStatus::Complete { .. })
    }

    /// The matches of a complete inventory; none for an incomplete one.
    pub fn matches(&self) -> &[Match] {
        match &self.status {
            InventoryStatus::Complete { matches } => matches,
            InventoryStatus::Incomplete { .. } => &[],
        }
    }
}

/// A list page as read: its own fields, each item left as raw JSON text.
#[derive(Deserialize)]
struct PageView<'a> {
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default, rename = "apiVersion")]
    api_version: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
    /// Absent: `None`; `null`: `Some(None)`; an array of items: `Some(Some(items))`.
    #[serde(default, borrow, deserialize_with = "present")]
    items: Option<Option<Vec<&'a RawValue>>>,
}

/// Marks a field that is present (even as `null`), so that absent and `null` differ.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// The only field of an item read before deciding whether to parse it in full.
#[derive(Deserialize)]
struct ItemHead {
    #[serde(default)]
    metadata: Option<MetaHead>,
}

#[derive(Deserialize)]
struct MetaHead {
    #[serde(default)]
    name: Option<String>,
}

/// What to do after a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Request the next page with this continue token.
    Continue(String),
    /// That was the last page.
    Done,
}

/// The consistency and budget rules of one kind's inventory, page by page, without I/O.
#[derive(Debug)]
pub(crate) struct PageChecker {
    kind: WorkloadKind,
    secret: String,
    budget: Budget,
    pages: usize,
    objects: usize,
    bytes: u64,
    names: HashSet<String>,
    tokens: HashSet<String>,
    resource_version: Option<String>,
    matches: Vec<Match>,
}

impl PageChecker {
    /// A checker for the inventory of `kind`, matching workloads that consume `secret`.
    pub(crate) fn new(kind: WorkloadKind, secret: &str, budget: Budget) -> Self {
        Self {
            kind,
            secret: secret.to_owned(),
            budget,
            pages: 0,
            objects: 0,
            bytes: 0,
            names: HashSet::new(),
            tokens: HashSet::new(),
            resource_version: None,
            matches: Vec::new(),
        }
    }

    /// Bytes of response body the next page may still use.
    pub(crate) fn remaining_bytes(&self) -> u64 {
        self.budget.max_bytes.saturating_sub(self.bytes)
    }

    /// Counts bytes read from a body that was then abandoned (over budget or broken).
    pub(crate) fn count_bytes(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Checks one page body (already known to be within the byte budget) and collects its
    /// matches.
    pub(crate) fn accept(&mut self, body: &[u8]) -> Result<Next, Incomplete> {
        self.pages += 1;
        self.count_bytes(body.len() as u64);
        if self.bytes > self.budget.max_bytes {
            return Err(Incomplete::ByteBudget);
        }
        // The page is read as a view: its own fields, and each item as raw JSON text. An item is
        // parsed in full only when its text can hold a reference to the Secret (see
        // `accept_item`), so memory and time stay near a plain typed list.
        if body.trim_ascii_start().first() != Some(&b'{') {
            return Err(Incomplete::NotAList);
        }
        let page: PageView<'_> = serde_json::from_slice(body).map_err(|_| Incomplete::NotAList)?;
        self.check_list_shape(&page)?;
        let metadata = page.metadata.as_ref().and_then(Value::as_object);
        let token = match metadata.and_then(|m| m.get("continue")) {
            None | Some(Value::Null) => None,
            Some(Value::String(token)) if token.is_empty() => None,
            Some(Value::String(token)) => Some(token.clone()),
            Some(_) => return Err(Incomplete::MalformedContinue),
        };
        let resource_version = metadata
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty());
        match (&self.resource_version, resource_version) {
            (None, Some(rv)) if self.pages == 1 => self.resource_version = Some(rv.to_owned()),
            (Some(first), Some(rv)) if first != rv => {
                return Err(Incomplete::ResourceVersionChanged);
            }
            (Some(_), None) | (None, Some(_)) => return Err(Incomplete::ResourceVersionChanged),
            _ => {}
        }
        let items: &[&RawValue] = match &page.items {
            Some(Some(items)) => items,
            Some(None) => &[],
            None => return Err(Incomplete::NotAList),
        };
        if items.len() > self.budget.page_size {
            return Err(Incomplete::PageOverLimit);
        }
        if token.is_some() && items.len() < self.budget.page_size {
            return Err(Incomplete::ShortPage);
        }
        self.objects += items.len();
        if self.objects > self.budget.max_objects {
            return Err(Incomplete::ObjectBudget);
        }
        for item in items {
            self.accept_raw_item(item)?;
        }
        match token {
            None => Ok(Next::Done),
            Some(token) => {
                if token.len() > MAX_CONTINUE_TOKEN_LEN
                    || !token.bytes().all(|b| b.is_ascii_graphic())
                {
                    return Err(Incomplete::MalformedContinue);
                }
                if !self.tokens.insert(token.clone()) {
                    return Err(Incomplete::RepeatedContinue);
                }
                if self.pages >= self.budget.max_pages {
                    return Err(Incomplete::PageBudget);
                }
                Ok(Next::Continue(token))
            }
        }
    }

    fn check_list_shape(&self, page: &PageView<'_>) -> Result<(), Incomplete> {
        let kind = page.kind.as_ref().and_then(Value::as_str);
        let api_version = page.api_version.as_ref().and_then(Value::as_str);
        if kind != Some(self.kind.list_kind()) || api_version != Some("apps/v1") {
            return Err(Incomplete::NotAList);
        }
        match &page.metadata {
            None | Some(Value::Object(_)) => Ok(()),
            Some(_) => Err(Incomplete::NotAList),
        }
    }

    /// One item as raw JSON. The common case — an object with a string `metadata.name` — reads
    /// only the name; the item is parsed in full only when its text can hold a reference to the
    /// Secret: a JSON string equal to a Secret name (lower-case alphanumerics, `-`, `.`) appears
    /// in the text as `"<name>"` unless it is written with a `\u` escape, so an item whose text
    /// has neither cannot match. Anything unusual goes the full way, with the same rules.
    fn accept_raw_item(&mut self, item: &RawValue) -> Result<(), Incomplete> {
        let text = item.get();
        if !text.starts_with('{') {
            return Err(Incomplete::NotAList);
        }
        let name = match serde_json::from_str::<ItemHead>(text) {
            Ok(ItemHead {
                metadata: Some(MetaHead { name: Some(name) }),
            }) if is_dns1123_subdomain(&name) => name,
            _ => return self.accept_full_item(text),
        };
        let quoted = format!("\"{}\"", self.secret);
        if !text.contains(&quoted) && !text.contains("\\u") {
            if !self.names.insert(name) {
                return Err(Incomplete::DuplicateName);
            }
            return Ok(());
        }
        self.accept_full_item(text)
    }

    fn accept_full_item(&mut self, text: &str) -> Result<(), Incomplete> {
        let item: Value = serde_json::from_str(text).map_err(|_| Incomplete::NotAList)?;
        self.accept_item(&item)
    }

    fn accept_item(&mut self, item: &Value) -> Result<(), Incomplete> {
        if !item.is_object() {
            return Err(Incomplete::NotAList);
        }
        let name = item
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .filter(|name| is_dns1123_subdomain(name))
            .ok_or(Incomplete::MissingName)?;
        if !self.names.insert(name.to_owned()) {
            return Err(Incomplete::DuplicateName);
        }
        let Some(template) = reference::pod_template(item) else {
            return Ok(());
        };
        let references: Vec<Reference> = reference::restart_consumers(template)
            .into_iter()
            .filter(|r| r.name == self.secret)
            .collect();
        if !references.is_empty() {
            self.matches.push(Match {
                kind: self.kind,
                name: name.to_owned(),
                references,
                object: item.clone(),
            });
        }
        Ok(())
    }

    /// The inventory so far, complete.
    pub(crate) fn complete(mut self) -> Inventory {
        self.matches.sort_by(|a, b| a.name.cmp(&b.name));
        Inventory {
            kind: self.kind,
            pages: self.pages,
            objects: self.objects,
            bytes: self.bytes,
            status: InventoryStatus::Complete {
                matches: self.matches,
            },
        }
    }

    /// The inventory so far, incomplete for `reason`; its matches are dropped.
    pub(crate) fn incomplete(self, reason: Incomplete) -> Inventory {
        Inventory {
            kind: self.kind,
            pages: self.pages,
            objects: self.objects,
            bytes: self.bytes,
            status: InventoryStatus::Incomplete {
                reason,
                failure: reason.failure(),
            },
        }
    }
}

/// The list path of one page.
pub(crate) fn page_path(
    kind: WorkloadKind,
    namespace: &str,
    page_size: usize,
    token: Option<&str>,
) -> String {
    let mut path = format!(
        "/apis/apps/v1/namespaces/{namespace}/{}?limit={page_size}",
        kind.plural()
    );
    if let Some(token) = token {
        path.push_str("&continue=");
        path.push_str(&transport::encode_query_value(token));
    }
    path
}

/// Lists one kind in `namespace` with `client`, under `budget` and `timeouts`, and collects the
/// workloads that consume `secret`.
pub(crate) async fn list_kind(
    client: &kube::Client,
    kind: WorkloadKind,
    namespace: &Namespace,
    secret: &SecretName,
    budget: Budget,
    timeouts: Timeouts,
) -> Inventory {
    let span = debug_span!("inventory", kind = kind.as_str(), %namespace);
    async move {
        let mut checker = PageChecker::new(kind, secret.as_str(), budget);
        let paging = page_all(
            client,
            kind,
            namespace.as_str(),
            budget,
            timeouts,
            &mut checker,
        );
        let outcome = match tokio::time::timeout(timeouts.inventory, paging).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Incomplete::Timeout),
        };
        let inventory = match outcome {
            Ok(()) => checker.complete(),
            Err(reason) => checker.incomplete(reason),
        };
        match &inventory.status {
            InventoryStatus::Complete { matches } => debug!(
                pages = inventory.pages,
                objects = inventory.objects,
                bytes = inventory.bytes,
                matches = matches.len(),
                "inventory complete"
            ),
            InventoryStatus::Incomplete { reason, failure } => warn!(
                pages = inventory.pages,
                objects = inventory.objects,
                bytes = inventory.bytes,
                reason = reason.as_str(),
                code = failure.code.as_str(),
                http_status = failure.http_status,
                "inventory incomplete"
            ),
        }
        inventory
    }
    .instrument(span)
    .await
}

async fn page_all(
    client: &kube::Client,
    kind: WorkloadKind,
    namespace: &str,
    budget: Budget,
    timeouts: Timeouts,
    checker: &mut PageChecker,
) -> Result<(), Incomplete> {
    let mut token: Option<String> = None;
    loop {
        let path = page_path(kind, namespace, budget.page_size, token.as_deref());
        let fetched = tokio::time::timeout(
            timeouts.list_page,
            fetch_page(client, &path, token.is_some(), checker.remaining_bytes()),
        )
        .await;
        let body = match fetched {
            Ok(Ok(body)) => body,
            Ok(Err((reason, read))) => {
                checker.count_bytes(read);
                return Err(reason);
            }
            Err(_) => return Err(Incomplete::Timeout),
        };
        match checker.accept(&body)? {
            Next::Done => return Ok(()),
            Next::Continue(next) => token = Some(next),
        }
    }
}

/// One GET of a list page, its body read within `limit` bytes. On error, also the number of
/// body bytes read before giving up (0 when unknown).
async fn fetch_page(
    client: &kube::Client,
    path: &str,
    is_continue: bool,
    limit: u64,
) -> Result<Vec<u8>, (Incomplete, u64)> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::empty())
        .map_err(|_| (Incomplete::Transport(TransportFailure::NotSent), 0))?;
    let response = transport::send_once(client, request)
        .await
        .map_err(|failure| (Incomplete::Transport(failure), 0))?;
    let status = response.status();
    debug!(status = status.as_u16(), is_continue, "list page");
    if status != StatusCode::OK {
        let reason = match status.as_u16() {
            410 if is_continue => Incomplete::ContinueExpired,
            400 if is_continue => Incomplete::ContinueRejected,
            _ if status.is_success() => Incomplete::NotAList,
            code => Incomplete::Http(code),
        };
        transport::drain(response.into_body()).await;
        return Err((reason, 0));
    }
    match transport::read_limited(response.into_body(), limit).await {
        Ok(body) => Ok(body),
        Err(BodyError::OverLimit { read }) => Err((Incomplete::ByteBudget, read)),
        Err(BodyError::Broken) => Err((Incomplete::TruncatedBody, 0)),
    }
}

#[cfg(test)]
mod tests;
