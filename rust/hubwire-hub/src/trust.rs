//! Whether the config file can be trusted: the config says which programs
//! the hub runs, so whoever can change it can make the hub run anything
//! with the hub's rights. A config writable by group or others, or reached
//! through a symlink owned by another user (who can point it anywhere), is
//! refused unless `--allow-insecure-config` says it is meant. Secrets the
//! config names (a token file, a TLS key) must be private to the hub's
//! user ([`private_mode`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Symlinks followed before giving up (as the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Checks `path` and every symlink on the way to the file it names: each
/// link must be owned by us or root, the file must not be writable by
/// group or others. `Err` is why, in one line (without the path).
pub fn check_config(path: &Path) -> Result<(), String> {
    // SAFETY: getuid has no preconditions.
    let own = unsafe { libc::getuid() };
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let m = std::fs::symlink_metadata(&at).map_err(|e| format!("cannot read the config: {e}"))?;
        if !m.file_type().is_symlink() {
            let mode = m.mode() & 0o777;
            if mode & 0o022 != 0 {
                let who = if mode & 0o002 != 0 { "anyone" } else { "its group" };
                return Err(format!(
                    "{} is writable by {who} (mode {mode:04o}), who could make the hub run anything: `chmod go-w` it, or pass --allow-insecure-config",
                    shown(path, &at)
                ));
            }
            return Ok(());
        }
        if m.uid() != own && m.uid() != 0 {
            return Err(format!(
                "{} is a symlink owned by uid {}, who can point it anywhere and so choose what the hub runs; use the file itself, or pass --allow-insecure-config",
                shown(path, &at),
                m.uid()
            ));
        }
        let target = std::fs::read_link(&at).map_err(|e| format!("cannot read the symlink {}: {e}", at.display()))?;
        at = at.parent().map_or(target.clone(), |dir| dir.join(&target));
    }
    Err(format!("more than {MAX_LINKS} symlinks on the way to the config"))
}

/// "the config" or "its target PATH": the error already names the file.
fn shown(given: &Path, at: &PathBuf) -> String {
    if at == given {
        "the config".into()
    } else {
        format!("the config's target {}", at.display())
    }
}

/// The permission bits of a secret file (`token_file`, `[hub.tls] key`)
/// when group or others have any access to it (`Ok(Some(mode))`: refuse
/// it), `Ok(None)` when it is private to its owner.
pub fn private_mode(path: &Path) -> std::io::Result<Option<u32>> {
    let mode = std::fs::metadata(path)?.mode() & 0o777;
    Ok((mode & 0o077 != 0).then_some(mode))
}

/// A group by name or number.
pub fn group_id(name: &str) -> Option<u32> {
    if let Ok(gid) = name.parse() {
        return Some(gid);
    }
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: getgrnam_r writes into `grp` and `buf`, both ours and sized
    // as passed; `found` points at `grp` or is null.
    unsafe {
        let mut grp: libc::group = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut found: *mut libc::group = std::ptr::null_mut();
        let rc = libc::getgrnam_r(cname.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut found);
        (rc == 0 && !found.is_null()).then_some(grp.gr_gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_config_writable_by_others_is_refused_and_a_link_of_ours_is_followed() {
        // Removed when dropped, whether the test passes or fails.
        let dir = hubwire_tests::harness::TempDir::new("trust");
        let file = dir.0.join("hubwire.toml");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check_config(&file), Ok(()));
        let link = dir.0.join("link.toml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("hubwire.toml", &link).unwrap();
        assert_eq!(check_config(&link), Ok(()), "our own link, to a good file");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_config(&file).unwrap_err();
        assert!(e.contains("writable by anyone (mode 0666)"), "{e}");
        let e = check_config(&link).unwrap_err();
        assert!(e.contains("target") && e.contains("mode 0666"), "the link's target is checked: {e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(check_config(&file).unwrap_err().contains("writable by its group"));
    }

    #[test]
    fn groups_are_found_by_number_or_name() {
        assert_eq!(group_id("0"), Some(0));
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_id("no-such-group-hubwire"), None);
    }
}
