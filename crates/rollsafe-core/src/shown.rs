//! Text read from the cluster as rollsafe shows it (an annotation value, an Event note):
//! control characters dropped and the length capped, so nobody's value can forge a line of
//! output or flood it.

/// The most characters of an annotation value or Event note shown.
pub const MAX_SHOWN: usize = 512;

/// A value shown: control characters dropped, at most [`MAX_SHOWN`] characters.
pub fn shown(value: &str) -> String {
    shown_within(value, MAX_SHOWN)
}

/// A value shown: control characters dropped, at most `max` characters.
pub fn shown_within(value: &str, max: usize) -> String {
    value
        .chars()
        .filter(|c| !c.is_control())
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_control_characters_and_caps() {
        assert_eq!(shown("a\nb\u{1b}[31mc"), "ab[31mc");
        assert_eq!(shown(&"x".repeat(600)).chars().count(), MAX_SHOWN);
        assert_eq!(shown_within("äöü", 2), "äö");
    }
}
