//! The request bodies: one [`Notification`] in each [`Format`].
//!
//! Every chat text names the cluster (when set), the namespace, the workload, the changed
//! objects and their key names, the Event's summary, the `kubectl describe` command and the
//! link (when set) — and nothing else. Texts are cut to each service's documented limits.

use serde_json::{Value, json};

use crate::format::Format;
use crate::notification::Notification;

/// Slack: the longest `plain_text` of a header block, in characters.
pub const SLACK_HEADER_LIMIT: usize = 150;
/// Slack: the longest text of a section block or context element (and the fallback `text`
/// kept), in characters.
pub const SLACK_TEXT_LIMIT: usize = 3000;
/// Google Chat: the longest message `text`, in characters.
pub const GOOGLE_CHAT_TEXT_LIMIT: usize = 4096;
/// Microsoft Teams: the longest text of one TextBlock or fact value, in characters (keeps a
/// card well inside the service's 28 KB message limit).
pub const TEAMS_TEXT_LIMIT: usize = 4000;

/// The text of the link in chat messages.
const LINK_TEXT: &str = "Open in rollsafe";

/// The body of the request that delivers `n` to a sink speaking `format`.
pub fn payload(format: Format, n: &Notification) -> Value {
    match format {
        Format::Json => json_payload(n),
        Format::Slack => slack_payload(n),
        Format::Teams => teams_payload(n),
        Format::GoogleChat => google_chat_payload(n),
    }
}

/// The link, when it is an `http` or `https` URL (anything else is left out of every payload).
fn link(n: &Notification) -> Option<&str> {
    n.link.as_deref().filter(|link| {
        let lower = link.get(..8).unwrap_or(link).to_ascii_lowercase();
        (lower.starts_with("https://") || lower.starts_with("http://"))
            && !link.chars().any(char::is_whitespace)
    })
}

fn json_payload(n: &Notification) -> Value {
    let causes: Vec<Value> = n
        .causes
        .iter()
        .map(|cause| json!({"kind": cause.kind, "name": cause.name, "keys": cause.keys}))
        .collect();
    json!({
        "outcome": n.outcome.as_str(),
        "title": n.outcome.title(),
        "cluster": n.cluster,
        "namespace": n.namespace,
        "workload": {"kind": n.workload_kind, "name": n.workload},
        "causes": causes,
        "summary": n.summary,
        "describe": n.describe_command(),
        "link": link(n),
        "at": n.at.to_string(),
    })
}

fn slack_payload(n: &Notification) -> Value {
    let title = n.outcome.title();
    let mut lines = vec![escape_mrkdwn(&n.summary)];
    if let Some(cluster) = &n.cluster {
        lines.push(format!("*Cluster:* {}", escape_mrkdwn(cluster)));
    }
    lines.push(format!(
        "*Workload:* {}",
        escape_mrkdwn(&n.workload_label())
    ));
    if !n.causes.is_empty() {
        lines.push(format!("*Changed:* {}", escape_mrkdwn(&n.causes_label())));
    }
    let link = link(n).map(|url| {
        format!(
            "<{}|{}>",
            escape_mrkdwn(&encode_link_delimiters(url)),
            LINK_TEXT
        )
    });
    let section = with_link(&lines.join("\n"), link.as_deref(), SLACK_TEXT_LIMIT, true);

    let mut fallback = format!("{title}: {} ({}", n.summary, n.workload_label());
    if let Some(cluster) = &n.cluster {
        fallback.push_str(" on ");
        fallback.push_str(cluster);
    }
    fallback.push(')');
    let fallback = truncate_escaped(&escape_mrkdwn(&fallback), SLACK_TEXT_LIMIT);
    let context = truncate_escaped(
        &format!("Inspect: `{}`", escape_mrkdwn(&n.describe_command())),
        SLACK_TEXT_LIMIT,
    );

    json!({
        "text": fallback,
        "blocks": [
            {
                "type": "header",
                "text": {"type": "plain_text", "text": truncate(title, SLACK_HEADER_LIMIT)},
            },
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": section},
            },
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": context}],
            },
        ],
    })
}

fn teams_payload(n: &Notification) -> Value {
    let mut facts = Vec::new();
    if let Some(cluster) = &n.cluster {
        facts.push(fact("Cluster", cluster));
    }
    facts.push(fact("Workload", &n.workload_label()));
    if !n.causes.is_empty() {
        facts.push(fact("Changed", &n.causes_label()));
    }
    facts.push(fact("Inspect", &n.describe_command()));
    let mut content = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {
                "type": "TextBlock",
                "size": "Medium",
                "weight": "Bolder",
                "text": truncate(n.outcome.title(), TEAMS_TEXT_LIMIT),
                "wrap": true,
            },
            {
                "type": "TextBlock",
                "text": truncate(&n.summary, TEAMS_TEXT_LIMIT),
                "wrap": true,
            },
            {"type": "FactSet", "facts": facts},
        ],
    });
    if let (Some(url), Some(card)) = (link(n), content.as_object_mut()) {
        card.insert(
            "actions".to_owned(),
            json!([{"type": "Action.OpenUrl", "title": LINK_TEXT, "url": url}]),
        );
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": content,
        }],
    })
}

fn fact(title: &str, value: &str) -> Value {
    json!({"title": title, "value": truncate(value, TEAMS_TEXT_LIMIT)})
}

fn google_chat_payload(n: &Notification) -> Value {
    let mut lines = vec![
        format!("*{}*", n.outcome.title()),
        neutralize_chat(&n.summary),
    ];
    if let Some(cluster) = &n.cluster {
        lines.push(format!("*Cluster:* {}", neutralize_chat(cluster)));
    }
    lines.push(format!(
        "*Workload:* {}",
        neutralize_chat(&n.workload_label())
    ));
    if !n.causes.is_empty() {
        lines.push(format!("*Changed:* {}", neutralize_chat(&n.causes_label())));
    }
    lines.push(format!(
        "*Inspect:* `{}`",
        neutralize_chat(&n.describe_command())
    ));
    let link = link(n).map(|url| format!("<{}|{}>", encode_link_delimiters(url), LINK_TEXT));
    json!({
        "text": with_link(&lines.join("\n"), link.as_deref(), GOOGLE_CHAT_TEXT_LIMIT, false),
    })
}

/// `body`, cut so that `body`, a new line and `link` fit in `limit` characters. A link longer
/// than half the limit is left out rather than cut (a cut link is a wrong link).
fn with_link(body: &str, link: Option<&str>, limit: usize, escaped: bool) -> String {
    let link = link.filter(|link| link.chars().count() <= limit / 2);
    let budget = match link {
        Some(link) => limit - link.chars().count() - 1,
        None => limit,
    };
    let mut text = if escaped {
        truncate_escaped(body, budget)
    } else {
        truncate(body, budget)
    };
    if let Some(link) = link {
        text.push('\n');
        text.push_str(link);
    }
    text
}

/// Slack's mrkdwn escaping: `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;` (so no text can
/// become a link or a mention).
pub(crate) fn escape_mrkdwn(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            ch => out.push(ch),
        }
    }
    out
}

/// Google Chat documents no escape in text messages: `<` and `>` of the content become `‹`
/// and `›`, so no text can become a link or a mention.
fn neutralize_chat(text: &str) -> String {
    text.replace('<', "\u{2039}").replace('>', "\u{203a}")
}

/// A link's characters that would end `<url|text>` early, percent-encoded.
fn encode_link_delimiters(url: &str) -> String {
    url.replace('|', "%7C")
        .replace('<', "%3C")
        .replace('>', "%3E")
}

/// At most `max` characters: cut ones end in `…`.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// [`truncate`] for escaped text: never ends in half an entity (`&am…`).
pub(crate) fn truncate_escaped(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    if let Some(amp) = out.rfind('&')
        && !out[amp..].contains(';')
    {
        out.truncate(amp);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            escape_mrkdwn("a & b <!channel> c>d"),
            "a &amp; b &lt;!channel&gt; c&gt;d"
        );
        assert_eq!(neutralize_chat("<users/all>"), "\u{2039}users/all\u{203a}");
        assert_eq!(
            encode_link_delimiters("https://x/a|b<c>"),
            "https://x/a%7Cb%3Cc%3E"
        );
    }

    #[test]
    fn truncation() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcd", 3), "ab…");
        assert_eq!(truncate("ééééé", 4).chars().count(), 4);
        // Never half an entity.
        assert_eq!(truncate_escaped("abc&amp;def", 6), "abc…");
        assert_eq!(truncate_escaped("abc&amp;def", 9), "abc&amp;…");
        assert_eq!(truncate_escaped("abcdef", 6), "abcdef");
    }

    #[test]
    fn link_fits_or_is_left_out() {
        let body = "x".repeat(100);
        let text = with_link(&body, Some("<https://l|t>"), 50, false);
        assert_eq!(text.chars().count(), 50);
        assert!(text.ends_with("…\n<https://l|t>"));
        let long = format!("<https://l/{}|t>", "a".repeat(40));
        assert_eq!(with_link("short", Some(&long), 50, false), "short");
    }
}
