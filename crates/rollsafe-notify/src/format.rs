//! The payload formats a sink can speak.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// The shape of the request body sent to a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// rollsafe's own JSON document (docs/notifications.md).
    Json,
    /// A Slack Incoming Webhook message with Block Kit blocks.
    Slack,
    /// A Microsoft Teams Workflows webhook message carrying an Adaptive Card.
    Teams,
    /// A Google Chat incoming webhook text message.
    GoogleChat,
}

impl Format {
    /// Every format, in documentation order.
    pub const ALL: [Format; 4] = [
        Format::Json,
        Format::Slack,
        Format::Teams,
        Format::GoogleChat,
    ];

    /// `json`, `slack`, `teams` or `googlechat`: the flag's value and the metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Slack => "slack",
            Format::Teams => "teams",
            Format::GoogleChat => "googlechat",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is not one of [`Format::ALL`].
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// Not `json`, `slack`, `teams` or `googlechat`.
    #[error("the notification format is not one of json, slack, teams, googlechat")]
    Unknown,
}

impl FormatError {
    /// A static code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            FormatError::Unknown => "unknown_format",
        }
    }
}

impl FromStr for Format {
    type Err = FormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.as_str() == s)
            .ok_or(FormatError::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for format in Format::ALL {
            assert_eq!(format.to_string().parse::<Format>().unwrap(), format);
        }
        for bad in ["", "JSON", "google-chat", "msteams", " slack"] {
            assert_eq!(bad.parse::<Format>().unwrap_err().code(), "unknown_format");
        }
    }
}
