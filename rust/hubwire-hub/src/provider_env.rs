//! The environment a spawned provider gets: a minimal one, not the hub's.
//! The hub's environment may hold its own secrets (a cloud key, a token)
//! that no provider should see, so a provider gets only what locates
//! things and sets the locale ([`BASE`]), the protocol's own variables
//! ([`PROTOCOL`]; `HUBWIRE_FD` is set by the spawn itself), the variables
//! its `env_pass` names (from the hub's environment, when set there), and
//! its `env` table (which wins).

use std::collections::BTreeMap;

/// Passed on from the hub's environment when set.
pub const BASE: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR"];
/// Prefixes passed on from the hub's environment (the locale's parts).
pub const BASE_PREFIXES: &[&str] = &["LC_"];
/// The protocol's variables a provider's runtime reads (spec/PROTOCOL.md
/// §10; `HUBWIRE_WAIT` picks how its reader waits). Never `HUBWIRE_TOKEN`.
pub const PROTOCOL: &[&str] = &["HUBWIRE_WAIT"];

/// The environment for a provider with `env_pass` and `env`, from the
/// hub's own.
pub fn build(env_pass: &[String], env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    from(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))), env_pass, env)
}

/// [`build`] from a given environment (`hub`), for tests.
pub fn from(hub: impl Iterator<Item = (String, String)>, env_pass: &[String], env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out: BTreeMap<String, String> = hub
        .filter(|(k, _)| {
            BASE.contains(&k.as_str())
                || PROTOCOL.contains(&k.as_str())
                || BASE_PREFIXES.iter().any(|p| k.starts_with(p))
                || env_pass.iter().any(|n| n == k)
        })
        .collect();
    out.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_base_the_passed_and_the_configured_variables_go_through() {
        let hub = [("PATH", "/bin"), ("LC_ALL", "C"), ("SECRET", "x"), ("NODE_PATH", "/n"), ("HUBWIRE_TOKEN", "t"), ("HOME", "/h")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = BTreeMap::from([("HOME".to_string(), "/other".to_string()), ("MINE".to_string(), "1".to_string())]);
        let got = from(hub.into_iter(), &["NODE_PATH".into(), "UNSET".into()], &env);
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HOME", "LC_ALL", "MINE", "NODE_PATH", "PATH"]);
        assert!(got.contains(&("HOME".into(), "/other".into())), "the config's env wins");
    }
}
