//! Text from peers, made safe for a terminal. Method names, docs, error
//! messages, failure reasons and stderr lines come from providers and
//! clients; printed raw, an escape sequence in one could clear the screen,
//! retitle the window or fake output. [`printable`] shows every control
//! character (C0, DEL, C1: `char::is_control`) as a Rust escape
//! (`\u{1b}`, `\n`), leaving all other text, non-ASCII included, as it is.

use std::borrow::Cow;

/// `s` with its control characters escaped (see the module comment).
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_left_alone() {
        assert_eq!(printable("\u{1b}[2Jred.echo"), "\\u{1b}[2Jred.echo");
        assert_eq!(printable("a\u{7}b\u{9b}c\u{7f}"), "a\\u{7}b\\u{9b}c\\u{7f}");
        assert_eq!(printable("line\nnext\tcol"), "line\\nnext\\tcol");
        assert!(matches!(printable("héllo wörld ✓"), Cow::Borrowed("héllo wörld ✓")));
    }
}
