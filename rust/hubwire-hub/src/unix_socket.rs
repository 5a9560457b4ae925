//! The hub's Unix socket: created with `unix_mode` (and `unix_group`)
//! whatever the umask, never in place of a file that is not a socket, and
//! every connection's uid read from the kernel (`SO_PEERCRED`).
//!
//! How the mode is set before anyone can connect: the socket is bound
//! (which creates the file, with the umask's mode), then the file is
//! chmod-ed and chown-ed, and only then does `listen(2)` start accepting.
//! Until `listen`, a `connect` to the path fails with `ECONNREFUSED`, so no
//! peer ever connects through the umask's mode. This needs no change of the
//! process-wide umask (other threads are running) and no private directory
//! to rename from (a rename onto the path would replace whatever is there).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use hubwire::transport::fd::FdTransport;
use hubwire::transport::DynTransport;

/// Why the socket could not be made: said in the config error's words.
pub type Refusal = String;

/// Connections waiting to be accepted (the `listen(2)` backlog).
const BACKLOG: i32 = 1024;

/// A listening Unix socket; its file is removed on drop.
pub struct UnixSocket {
    inner: tokio::net::UnixListener,
    path: PathBuf,
}

impl UnixSocket {
    /// Binds `path` with permission bits `mode` and group `group`. A stale
    /// socket file (nobody listening) is replaced; any other file, or a
    /// socket someone is listening on, is refused.
    pub fn bind(path: &Path, mode: u32, group: Option<u32>) -> Result<UnixSocket, Refusal> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot look at it: {e}")),
            Ok(m) if !m.file_type().is_socket() => {
                return Err(format!("exists and is not a socket ({}); the hub only ever replaces a stale socket", kind(&m)))
            }
            Ok(_) if std::os::unix::net::UnixStream::connect(path).is_ok() => {
                return Err("another process is already listening there".into())
            }
            Ok(_) => std::fs::remove_file(path).map_err(|e| format!("cannot remove the stale socket: {e}"))?,
        }
        let fd = make(path, mode, group).map_err(|e| e.to_string())?;
        let std = std::os::unix::net::UnixListener::from(fd);
        std.set_nonblocking(true).map_err(|e| e.to_string())?;
        let inner = tokio::net::UnixListener::from_std(std).map_err(|e| e.to_string())?;
        Ok(UnixSocket { inner, path: path.to_path_buf() })
    }

    /// Accepts one connection: its transport and the peer's uid.
    pub async fn accept(&self) -> io::Result<(DynTransport, u32)> {
        let (stream, _) = self.inner.accept().await?;
        let uid = stream.peer_cred()?.uid();
        let std = stream.into_std()?;
        std.set_nonblocking(true)?;
        let t = FdTransport::new(std, format!("unix:{} (uid {uid})", self.path.display()))?;
        Ok((std::sync::Arc::new(t), uid))
    }

    /// `unix:PATH`, for logs.
    pub fn describe(&self) -> String {
        format!("unix:{}", self.path.display())
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What a non-socket at the path is, for the refusal.
fn kind(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// socket, bind, chmod (and chown), then listen: see the module comment.
fn make(path: &Path, mode: u32, group: Option<u32>) -> io::Result<OwnedFd> {
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: sockaddr_un is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = cpath.as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::other(format!(
            "the path is {} bytes long; a socket path must be under {}",
            bytes.len(),
            addr.sun_path.len()
        )));
    }
    for (dst, b) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *b as libc::c_char;
    }
    // SAFETY: plain syscalls on a descriptor we own and memory we prepared.
    unsafe {
        let raw = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(raw);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::bind(fd.as_raw_fd(), &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) != 0 {
            return Err(io::Error::last_os_error());
        }
        let undo = |e: io::Error| {
            libc::unlink(cpath.as_ptr());
            e
        };
        if libc::chmod(cpath.as_ptr(), mode as libc::mode_t) != 0 {
            return Err(undo(io::Error::other(format!("chmod {mode:04o}: {}", io::Error::last_os_error()))));
        }
        if let Some(gid) = group {
            if libc::chown(cpath.as_ptr(), u32::MAX, gid) != 0 {
                return Err(undo(io::Error::other(format!("chown to group {gid}: {}", io::Error::last_os_error()))));
            }
        }
        if libc::listen(fd.as_raw_fd(), BACKLOG) != 0 {
            return Err(undo(io::Error::last_os_error()));
        }
        Ok(fd)
    }
}

/// Whether a peer with `uid` may use a socket of `mode`: listed in
/// `allow`, or with `allow` unset, the hub's own uid or root for an
/// owner-only mode, anyone otherwise (the mode and group have decided).
pub fn uid_allowed(uid: u32, allow: Option<&[u32]>, mode: u32, own: u32) -> bool {
    match allow {
        Some(list) => list.contains(&uid),
        None if mode & 0o077 == 0 => uid == own || uid == 0,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_allowed_by_the_list_or_else_by_the_mode() {
        assert!(uid_allowed(1000, None, 0o600, 1000));
        assert!(uid_allowed(0, None, 0o600, 1000), "root may, as it may anyway");
        assert!(!uid_allowed(1001, None, 0o600, 1000));
        assert!(uid_allowed(1001, None, 0o660, 1000), "a group mode lets the group decide");
        assert!(!uid_allowed(1000, Some(&[1001]), 0o600, 1000), "a list replaces the defaults");
        assert!(uid_allowed(1001, Some(&[1001]), 0o600, 1000));
    }
}
