//! Who the hub trusts (`docs/security.md`, `docs/hub.md` "Authentication").
//!
//! * The **token**: `[hub] token_file` (its first line) or the hub's
//!   `HUBWIRE_TOKEN`. When set, TCP and WebSocket clients must send it in
//!   their HELLO (`spec/PROTOCOL.md` §4.4; the runtime checks it with
//!   `ConnectionOptions::require_token`) and HTTP requests as
//!   `Authorization: Bearer <token>` ([`bearer_matches`]).
//! * **Trust**: a trusted caller sees private status (argv, pids, stderr
//!   tails). A connection is trusted when its listener says so: the Unix
//!   socket always (its peers are checked by the file mode and uid), TCP,
//!   WebSocket and HTTP only when a token is configured (every connection
//!   that got through has then proved it holds it). A listener that
//!   authenticates connections another way (a client certificate) picks
//!   per connection whether it is trusted (the hub's `Clients::serve`).

use std::path::Path;

use hubwire::frame::hello::MAX_TOKEN;
use hubwire::Token;

/// The environment variable holding the token: read by the hub when its
/// config has no `token_file`, and by the CLI when it dials over TCP.
pub const TOKEN_ENV: &str = "HUBWIRE_TOKEN";

/// Reads a token file: the first line, surrounding whitespace removed.
/// Refused (with why, never with the token) if group or others have any
/// access to it, or if the token is empty or longer than 4096 bytes.
pub fn read_token_file(path: &Path) -> Result<Token, String> {
    let open = crate::trust::private_mode(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Some(mode) = open {
        return Err(format!("{} is accessible by group or others (mode {mode:04o}); make it private: chmod 600", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    token_of(text.lines().next().unwrap_or(""), &path.display().to_string())
}

/// The token of the hub's or the CLI's environment, if set.
pub fn token_from_env() -> Result<Option<Token>, String> {
    match std::env::var(TOKEN_ENV) {
        Ok(v) => token_of(&v, TOKEN_ENV).map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{TOKEN_ENV} is not valid UTF-8")),
    }
}

fn token_of(line: &str, from: &str) -> Result<Token, String> {
    let t = line.trim();
    if t.is_empty() {
        return Err(format!("the token in {from} is empty"));
    }
    if t.len() > MAX_TOKEN {
        return Err(format!("the token in {from} is {} bytes, over the limit of {MAX_TOKEN}", t.len()));
    }
    Ok(Token(t.to_string()))
}

/// Whether an `Authorization` header value is `Bearer <token>` (the scheme
/// in any ASCII case, RFC 9110 §11.1), the token compared in constant time.
pub fn bearer_matches(header: Option<&[u8]>, token: &Token) -> bool {
    let Some(h) = header else { return false };
    let Some((scheme, rest)) = h.split_first_chunk::<7>() else { return false };
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return false;
    }
    match std::str::from_utf8(rest.trim_ascii()) {
        Ok(got) => Token(got.to_string()).matches(token),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_bearer_scheme_is_case_blind_and_the_token_exact() {
        let t = Token("s3cret".into());
        assert!(bearer_matches(Some(b"Bearer s3cret"), &t));
        assert!(bearer_matches(Some(b"bearer  s3cret "), &t));
        for bad in [&b"Bearer s3cre"[..], b"Bearer s3crett", b"Basic s3cret", b"s3cret", b"Bearer", b""] {
            assert!(!bearer_matches(Some(bad), &t), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(!bearer_matches(None, &t));
    }

    #[test]
    fn a_token_file_must_be_private_and_not_empty() {
        // Removed when dropped, whether the test passes or fails.
        let dir = hubwire_tests::harness::TempDir::new("auth");
        let f = dir.0.join("token");
        std::fs::write(&f, "  tok-1 \nignored\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token_file(&f).unwrap(), Token("tok-1".into()));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_token_file(&f).unwrap_err();
        assert!(e.contains("mode 0640") && !e.contains("tok-1"), "{e}");
        std::fs::write(&f, "\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(read_token_file(&f).unwrap_err().contains("empty"));
    }
}
