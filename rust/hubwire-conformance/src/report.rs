//! Known-failure lists and the summary: a table of language × role ×
//! transport and the line `N passed, N failed`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::case::Role;

/// One entry of a known-failing list.
#[derive(Debug)]
struct Entry {
    glob: String,
    transport: Option<String>,
    line: usize,
}

/// The known-failing list of one language and role
/// (`conformance/known-failing/<lang>-<role>.txt`).
#[derive(Debug, Default)]
pub struct KnownFailing {
    entries: Vec<Entry>,
    /// The file, for messages.
    pub file: String,
}

impl KnownFailing {
    /// Loads the list; a missing file is an empty list.
    pub fn load(dir: &Path, lang: &str, role: Role) -> KnownFailing {
        let path = dir.join(format!("{lang}-{}.txt", role.name()));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let entries = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
            .filter(|(_, l)| !l.is_empty())
            .map(|(line, l)| match l.split_once('@') {
                Some((g, t)) => Entry { glob: g.to_string(), transport: Some(t.to_string()), line },
                None => Entry { glob: l.to_string(), transport: None, line },
            })
            .collect();
        KnownFailing { entries, file: path.display().to_string() }
    }

    /// The entry (its line number) that lists this case on this transport.
    pub fn lists(&self, name: &str, transport: &str) -> Option<usize> {
        self.entries.iter().find(|e| glob(&e.glob, name) && e.transport.as_deref().is_none_or(|t| t == transport)).map(|e| e.line)
    }
}

/// `*` matches any run of characters, `?` one character.
pub fn glob(pattern: &str, s: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], s) || (!s.is_empty() && go(p, &s[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    go(&p, &s)
}

/// How one case went on one transport.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// It held.
    Pass,
    /// It failed, and is not listed.
    Fail(String),
    /// It failed, as its list says.
    KnownFail,
    /// It is listed as failing but passed: the list is stale.
    UnexpectedPass(usize),
}

/// Counts per (lang, role, transport).
#[derive(Default)]
pub struct Summary {
    rows: BTreeMap<(String, Role, String), [usize; 3]>,
}

impl Summary {
    /// Records one outcome.
    pub fn add(&mut self, lang: &str, role: Role, transport: &str, o: &Outcome) {
        let row = self.rows.entry((lang.to_string(), role, transport.to_string())).or_default();
        match o {
            Outcome::Pass => row[0] += 1,
            Outcome::Fail(_) | Outcome::UnexpectedPass(_) => row[1] += 1,
            Outcome::KnownFail => row[2] += 1,
        }
    }

    /// Total (passed, failed).
    pub fn totals(&self) -> (usize, usize) {
        self.rows.values().fold((0, 0), |(p, f), r| (p + r[0], f + r[1]))
    }

    /// The table and the closing line.
    pub fn print(&self) {
        println!();
        println!("{:<8} {:<9} {:<10} {:>7} {:>7} {:>14}", "lang", "role", "transport", "passed", "failed", "known-failing");
        for ((lang, role, t), r) in &self.rows {
            println!("{:<8} {:<9} {:<10} {:>7} {:>7} {:>14}", lang, role.name(), t, r[0], r[1], r[2]);
        }
        let (p, f) = self.totals();
        println!();
        println!("conformance: {p} passed, {f} failed");
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("unary/*", "unary/echo-raw"));
        assert!(glob("*", ""));
        assert!(glob("stream/?erver/*", "stream/server/cancel"));
        assert!(!glob("unary/*", "stream/unary"));
        assert!(!glob("a", "ab"));
    }
}
