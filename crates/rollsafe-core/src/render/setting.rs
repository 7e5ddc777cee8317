//! The referenced-config rollout setting: `--referenced-config-rollout[=BOOL]`, else the
//! `REFERENCED_CONFIG_ROLLOUT` environment variable, else off.

use thiserror::Error;

/// The environment variable that holds the setting when the flag is not given.
pub const ENV_VAR: &str = "REFERENCED_CONFIG_ROLLOUT";

/// Go's `strconv.ParseBool`: exactly `1 t T TRUE true True` and `0 f F FALSE false False`.
/// No trimming, no other spellings.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The environment variable holds something that is not a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{ENV_VAR}: invalid boolean value {value:?} (accepted: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)"
)]
pub struct SettingError {
    /// The offending value (lossily decoded when it is not UTF-8).
    pub value: String,
}

/// Resolves the setting. The environment value is always checked, so a value that is not a
/// boolean is an error even when the flag is given; the flag wins over a valid environment
/// value; an unset or empty variable means unset.
pub fn resolve(flag: Option<bool>, env: Option<&std::ffi::OsStr>) -> Result<bool, SettingError> {
    let from_env = match env {
        None => None,
        Some(raw) if raw.is_empty() => None,
        Some(raw) => match raw.to_str().and_then(parse_go_bool) {
            Some(value) => Some(value),
            None => {
                return Err(SettingError {
                    value: raw.to_string_lossy().into_owned(),
                });
            }
        },
    };
    Ok(flag.or(from_env).unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn go_parse_bool_table() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(text), Some(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(text), Some(false), "{text}");
        }
        for text in [
            "", " true", "true ", "yes", "no", "on", "off", "tRUE", "FaLsE", "y", "2", "01", "TrUe",
        ] {
            assert_eq!(parse_go_bool(text), None, "{text:?}");
        }
    }

    #[test]
    fn precedence_and_env_validation() {
        let env = |s: &'static str| Some(OsStr::new(s));
        assert_eq!(resolve(None, None), Ok(false));
        assert_eq!(resolve(None, env("")), Ok(false));
        assert_eq!(resolve(None, env("T")), Ok(true));
        assert_eq!(resolve(Some(false), env("true")), Ok(false));
        assert_eq!(resolve(Some(true), env("0")), Ok(true));
        assert_eq!(resolve(Some(true), None), Ok(true));
        let error = resolve(Some(true), env("yes")).unwrap_err();
        assert_eq!(error.value, "yes");
        assert!(
            error
                .to_string()
                .starts_with("REFERENCED_CONFIG_ROLLOUT: invalid boolean value \"yes\"")
        );
        assert!(resolve(Some(false), env(" true")).is_err());
    }
}
