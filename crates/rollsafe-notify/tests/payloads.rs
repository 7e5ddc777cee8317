//! Each format delivered to a local receiver that checks the body the way its service does.

#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

mod common;

use std::time::Duration;

use common::{Logs, Receiver, Reply, TOKEN, VALUE_LOOKALIKE, sample, wait_until};
use prometheus_client::registry::Registry;
use rollsafe_notify::payload::{GOOGLE_CHAT_TEXT_LIMIT, SLACK_HEADER_LIMIT, SLACK_TEXT_LIMIT};
use rollsafe_notify::{
    Cause, DeliveryResult, Format, Notification, Notifier, NotifyMetrics, Outcome, payload,
};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(20);

/// Checks a body as a service would.
type Validator = fn(&Value) -> Result<(), String>;

fn str_at<'a>(value: &'a Value, pointer: &str) -> Result<&'a str, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{pointer} is not a string"))
}

fn array_at<'a>(value: &'a Value, pointer: &str) -> Result<&'a Vec<Value>, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{pointer} is not an array"))
}

fn at_most(text: &str, limit: usize, what: &str) -> Result<(), String> {
    let n = text.chars().count();
    if n == 0 || n > limit {
        return Err(format!("{what}: {n} characters, expected 1..={limit}"));
    }
    Ok(())
}

/// Slack's mrkdwn: `&`, `<`, `>` only as entities, `<…>` only as `<http(s)://…|text>` links.
fn check_mrkdwn(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after.find('>').ok_or("an unclosed <")?;
        let inner = &after[..close];
        let (url, label) = inner.split_once('|').ok_or("a <…> that is not a link")?;
        if !(url.starts_with("https://") || url.starts_with("http://")) || label.is_empty() {
            return Err(format!("a <…> that is not a link: {inner}"));
        }
        if inner.matches('|').count() != 1 {
            return Err("a | inside a link".to_owned());
        }
        rest = &after[close + 1..];
    }
    let outside_links: String = {
        let mut out = String::new();
        let mut depth = false;
        for ch in text.chars() {
            match ch {
                '<' => depth = true,
                '>' if depth => depth = false,
                ch if !depth => out.push(ch),
                _ => {}
            }
        }
        out
    };
    if outside_links.contains('>') {
        return Err("a raw >".to_owned());
    }
    for (at, _) in text.match_indices('&') {
        let tail = &text[at..];
        if !(tail.starts_with("&amp;") || tail.starts_with("&lt;") || tail.starts_with("&gt;")) {
            return Err("a raw &".to_owned());
        }
    }
    Ok(())
}

/// As Slack's Incoming Webhooks and Block Kit accept a message.
fn slack_shape(body: &Value) -> Result<(), String> {
    let text = str_at(body, "/text")?;
    at_most(text, 40_000, "text")?;
    check_mrkdwn(text)?;
    let blocks = array_at(body, "/blocks")?;
    if blocks.is_empty() || blocks.len() > 50 {
        return Err("1 to 50 blocks".to_owned());
    }
    let types: Vec<&str> = blocks
        .iter()
        .map(|b| b.get("type").and_then(Value::as_str).unwrap_or(""))
        .collect();
    if types != ["header", "section", "context"] {
        return Err(format!("blocks {types:?}"));
    }
    if str_at(&blocks[0], "/text/type")? != "plain_text" {
        return Err("a header's text is plain_text".to_owned());
    }
    at_most(
        str_at(&blocks[0], "/text/text")?,
        SLACK_HEADER_LIMIT,
        "header",
    )?;
    if str_at(&blocks[1], "/text/type")? != "mrkdwn" {
        return Err("section text type".to_owned());
    }
    let section = str_at(&blocks[1], "/text/text")?;
    at_most(section, SLACK_TEXT_LIMIT, "section")?;
    check_mrkdwn(section)?;
    let elements = array_at(&blocks[2], "/elements")?;
    if elements.is_empty() || elements.len() > 10 {
        return Err("1 to 10 context elements".to_owned());
    }
    for element in elements {
        if str_at(element, "/type")? != "mrkdwn" {
            return Err("context element type".to_owned());
        }
        let text = str_at(element, "/text")?;
        at_most(text, SLACK_TEXT_LIMIT, "context")?;
        check_mrkdwn(text)?;
    }
    Ok(())
}

/// As a Teams Workflows webhook ("Post to a channel when a webhook request is received")
/// accepts an Adaptive Card message.
fn teams_shape(body: &Value) -> Result<(), String> {
    if str_at(body, "/type")? != "message" {
        return Err("type is not message".to_owned());
    }
    let attachments = array_at(body, "/attachments")?;
    if attachments.len() != 1 {
        return Err("one attachment".to_owned());
    }
    let attachment = &attachments[0];
    if str_at(attachment, "/contentType")? != "application/vnd.microsoft.card.adaptive" {
        return Err("contentType".to_owned());
    }
    if attachment.get("contentUrl") != Some(&Value::Null) {
        return Err("contentUrl is null".to_owned());
    }
    let card = attachment.get("content").ok_or("no content")?;
    if str_at(card, "/$schema")? != "http://adaptivecards.io/schemas/adaptive-card.json" {
        return Err("$schema".to_owned());
    }
    if str_at(card, "/type")? != "AdaptiveCard" || str_at(card, "/version")? != "1.4" {
        return Err("type/version".to_owned());
    }
    for element in array_at(card, "/body")? {
        match str_at(element, "/type")? {
            "TextBlock" => {
                str_at(element, "/text")?;
                if element.get("wrap") != Some(&Value::Bool(true)) {
                    return Err("TextBlock wraps".to_owned());
                }
            }
            "FactSet" => {
                for fact in array_at(element, "/facts")? {
                    str_at(fact, "/title")?;
                    str_at(fact, "/value")?;
                }
            }
            other => return Err(format!("unexpected element {other}")),
        }
    }
    if let Some(actions) = card.get("actions") {
        for action in actions.as_array().ok_or("actions is not an array")? {
            if str_at(action, "/type")? != "Action.OpenUrl" {
                return Err("action type".to_owned());
            }
            str_at(action, "/title")?;
            if !str_at(action, "/url")?.starts_with("https://") {
                return Err("action url".to_owned());
            }
        }
    }
    Ok(())
}

/// As a Google Chat incoming webhook accepts a text message.
fn google_chat_shape(body: &Value) -> Result<(), String> {
    let object = body.as_object().ok_or("not an object")?;
    if object.keys().ne(["text"].iter()) {
        return Err(format!("keys {:?}", object.keys().collect::<Vec<_>>()));
    }
    let text = str_at(body, "/text")?;
    at_most(text, GOOGLE_CHAT_TEXT_LIMIT, "text")?;
    // `<…>` only as `<url|text>` links (a `<users/all>` would mention everyone).
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after.find('>').ok_or("an unclosed <")?;
        let (url, label) = after[..close].split_once('|').ok_or("a <…> not a link")?;
        if !url.starts_with("https://") || label.is_empty() {
            return Err("a <…> not a link".to_owned());
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// rollsafe's JSON document.
fn json_shape(body: &Value) -> Result<(), String> {
    let object = body.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let expected = [
        "outcome",
        "title",
        "cluster",
        "namespace",
        "workload",
        "causes",
        "summary",
        "describe",
        "link",
        "at",
    ];
    if keys != expected {
        return Err(format!("keys {keys:?}"));
    }
    for pointer in [
        "/outcome",
        "/title",
        "/namespace",
        "/workload/kind",
        "/workload/name",
        "/summary",
        "/describe",
        "/at",
    ] {
        str_at(body, pointer)?;
    }
    str_at(body, "/at")?
        .parse::<jiff::Timestamp>()
        .map_err(|_| "at is not RFC 3339")?;
    for cause in array_at(body, "/causes")? {
        str_at(cause, "/kind")?;
        str_at(cause, "/name")?;
        for key in array_at(cause, "/keys")? {
            key.as_str().ok_or("a key is not a string")?;
        }
    }
    Ok(())
}

/// Every text of `body` taken together.
fn all_text(body: &Value) -> String {
    let mut out = String::new();
    fn walk(value: &Value, out: &mut String) {
        match value {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(body, &mut out);
    out
}

/// Delivers [`sample`] (with `summary`) to a validating receiver; returns the body received.
async fn deliver(format: Format, validate: Validator) -> Value {
    let logs = Logs::capture();
    let receiver = Receiver::always(Reply::Validate(validate)).await;
    let metrics = NotifyMetrics::default();
    let notifier = Notifier::start(vec![receiver.sink(format)], metrics.clone());
    let mut n = sample();
    n.summary = "Rolled for changes to Secret/db <!channel> & ConfigMap/settings".to_owned();
    notifier.notify(n);
    wait_until(DEADLINE, "one message sent or failed", || {
        metrics.total(format, DeliveryResult::Sent) + metrics.total(format, DeliveryResult::Failed)
            > 0
    })
    .await;
    assert_eq!(receiver.complaints(), Vec::<String>::new());
    assert_eq!(metrics.total(format, DeliveryResult::Sent), 1);

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    // The full URL is what is sent to.
    assert_eq!(
        request.target,
        format!("/services/T0001/B0001/{TOKEN}?token={TOKEN}")
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.header("user-agent"),
        Some(format!("rollsafe-notify/{}", env!("CARGO_PKG_VERSION")).as_str())
    );

    let body = request.json();
    let text = all_text(&body);
    for named in [
        "prod-eu",
        "shop",
        "web",
        "Deployment",
        "Secret/db",
        "password",
        "username",
        "ConfigMap/settings",
        "kubectl describe -n shop deployment/web",
    ] {
        assert!(text.contains(named), "{format}: {named} missing in\n{text}");
    }
    assert!(!text.contains(VALUE_LOOKALIKE));
    assert!(!String::from_utf8_lossy(&request.body).contains(TOKEN));

    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut exposition = String::new();
    prometheus_client::encoding::text::encode(&mut exposition, &registry).unwrap();
    let line = format!(
        "rollsafe_notify_messages_total{{format=\"{}\",result=\"sent\"}} 1",
        format.as_str()
    );
    assert!(exposition.contains(&line), "{line} in\n{exposition}");
    assert!(exposition.contains("rollsafe_notify_queue_depth 0"));
    assert!(!exposition.contains(TOKEN));
    logs.assert_no_secret();
    body
}

#[tokio::test]
async fn slack() {
    let body = deliver(Format::Slack, slack_shape).await;
    assert_eq!(body["blocks"][0]["text"]["text"], "Rolled");
    let section = body["blocks"][1]["text"]["text"].as_str().unwrap();
    assert!(
        section.contains("Secret/db &lt;!channel&gt; &amp; ConfigMap/settings"),
        "{section}"
    );
    assert!(section.contains("*Cluster:* prod-eu"), "{section}");
    assert!(section.contains("*Changed:* Secret/db (password, username), ConfigMap/settings"));
    assert!(
        section.ends_with(
            "\n<https://rollsafe.example/ui/workloads?ns=shop&amp;name=web|Open in rollsafe>"
        ),
        "{section}"
    );
    assert_eq!(
        body["blocks"][2]["elements"][0]["text"],
        "Inspect: `kubectl describe -n shop deployment/web`"
    );
    let fallback = body["text"].as_str().unwrap();
    assert!(
        fallback.starts_with("Rolled: Rolled for changes"),
        "{fallback}"
    );
    assert!(fallback.contains("&lt;!channel&gt;"));
}

#[tokio::test]
async fn teams() {
    let body = deliver(Format::Teams, teams_shape).await;
    let card = &body["attachments"][0]["content"];
    assert_eq!(card["body"][0]["text"], "Rolled");
    assert_eq!(card["body"][0]["size"], "Medium");
    assert_eq!(card["body"][0]["weight"], "Bolder");
    assert_eq!(
        card["body"][1]["text"],
        "Rolled for changes to Secret/db <!channel> & ConfigMap/settings"
    );
    assert_eq!(
        card["body"][2]["facts"],
        serde_json::json!([
            {"title": "Cluster", "value": "prod-eu"},
            {"title": "Workload", "value": "Deployment shop/web"},
            {"title": "Changed", "value": "Secret/db (password, username), ConfigMap/settings"},
            {"title": "Inspect", "value": "kubectl describe -n shop deployment/web"},
        ])
    );
    assert_eq!(
        card["actions"],
        serde_json::json!([{
            "type": "Action.OpenUrl",
            "title": "Open in rollsafe",
            "url": "https://rollsafe.example/ui/workloads?ns=shop&name=web",
        }])
    );
}

#[tokio::test]
async fn google_chat() {
    let body = deliver(Format::GoogleChat, google_chat_shape).await;
    let text = body["text"].as_str().unwrap();
    assert_eq!(
        text,
        "*Rolled*\n\
         Rolled for changes to Secret/db \u{2039}!channel\u{203a} & ConfigMap/settings\n\
         *Cluster:* prod-eu\n\
         *Workload:* Deployment shop/web\n\
         *Changed:* Secret/db (password, username), ConfigMap/settings\n\
         *Inspect:* `kubectl describe -n shop deployment/web`\n\
         <https://rollsafe.example/ui/workloads?ns=shop&name=web|Open in rollsafe>"
    );
}

#[tokio::test]
async fn json() {
    let body = deliver(Format::Json, json_shape).await;
    assert_eq!(
        body["link"],
        "https://rollsafe.example/ui/workloads?ns=shop&name=web"
    );
    assert_eq!(
        body["causes"][0]["keys"],
        serde_json::json!(["password", "username"])
    );
}

#[test]
fn json_document_is_pinned() {
    insta::assert_json_snapshot!("json_rolled", payload(Format::Json, &sample()));
    let mut bare = sample();
    bare.outcome = Outcome::RolloutStalled;
    bare.cluster = None;
    bare.link = None;
    bare.causes.clear();
    bare.summary = "Rollout stalled: ProgressDeadlineExceeded".to_owned();
    insta::assert_json_snapshot!("json_bare", payload(Format::Json, &bare));
}

/// A notification far beyond every limit: hundreds of objects with long key lists.
fn huge() -> Notification {
    let mut n = sample();
    n.summary = "&<>".repeat(2000);
    n.causes = (0..400)
        .map(|i| Cause {
            kind: "Secret".to_owned(),
            name: format!("object-{i:03}-{}", "x".repeat(60)),
            keys: (0..20).map(|k| format!("key-{k}&<>")).collect(),
        })
        .collect();
    n
}

#[test]
fn limits_hold() {
    for outcome in Outcome::ALL {
        let mut n = huge();
        n.outcome = outcome;
        slack_shape(&payload(Format::Slack, &n)).unwrap();
        teams_shape(&payload(Format::Teams, &n)).unwrap();
        google_chat_shape(&payload(Format::GoogleChat, &n)).unwrap();
        json_shape(&payload(Format::Json, &n)).unwrap();
        // Cut texts still end with the link.
        let slack = payload(Format::Slack, &n);
        assert!(
            slack["blocks"][1]["text"]["text"]
                .as_str()
                .unwrap()
                .ends_with("|Open in rollsafe>")
        );
        let chat = payload(Format::GoogleChat, &n);
        assert!(
            chat["text"]
                .as_str()
                .unwrap()
                .ends_with("|Open in rollsafe>")
        );
    }
}

#[test]
fn without_link_cluster_or_causes() {
    let mut n = sample();
    n.link = None;
    n.cluster = None;
    n.causes.clear();
    let teams = payload(Format::Teams, &n);
    teams_shape(&teams).unwrap();
    let card = &teams["attachments"][0]["content"];
    assert!(card.get("actions").is_none());
    let titles: Vec<&str> = card["body"][2]["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Workload", "Inspect"]);
    let slack = payload(Format::Slack, &n);
    slack_shape(&slack).unwrap();
    let section = slack["blocks"][1]["text"]["text"].as_str().unwrap();
    assert!(!section.contains("Cluster") && !section.contains("Changed") && !section.contains('<'));
    let chat = payload(Format::GoogleChat, &n);
    google_chat_shape(&chat).unwrap();
    assert!(!chat["text"].as_str().unwrap().contains('<'));
}

#[test]
fn a_link_that_is_not_http_is_left_out() {
    let mut n = sample();
    n.link = Some("javascript:alert(1)".to_owned());
    for format in Format::ALL {
        let text = all_text(&payload(format, &n));
        assert!(!text.contains("javascript"), "{format}");
    }
    assert_eq!(payload(Format::Json, &n)["link"], Value::Null);
}

#[test]
fn the_receivers_refuse_what_the_services_refuse() {
    let n = sample();
    let bodies: Vec<(Format, Value)> = Format::ALL
        .into_iter()
        .map(|format| (format, payload(format, &n)))
        .collect();
    let validators: [(Format, Validator); 4] = [
        (Format::Json, json_shape),
        (Format::Slack, slack_shape),
        (Format::Teams, teams_shape),
        (Format::GoogleChat, google_chat_shape),
    ];
    for (format, validate) in validators {
        for (body_format, body) in &bodies {
            assert_eq!(
                validate(body).is_ok(),
                format == *body_format,
                "{format} validator on a {body_format} body"
            );
        }
    }
    assert!(check_mrkdwn("a <!channel> b").is_err());
    assert!(check_mrkdwn("a & b").is_err());
    assert!(check_mrkdwn("a > b").is_err());
    assert!(check_mrkdwn("a &amp; <https://x|y> &lt;").is_ok());
    let mut slack = payload(Format::Slack, &n);
    slack["blocks"][0]["text"]["text"] = Value::from("x".repeat(SLACK_HEADER_LIMIT + 1));
    assert!(slack_shape(&slack).is_err());
    let chat = serde_json::json!({"text": "hi <users/all>"});
    assert!(google_chat_shape(&chat).is_err());
}
