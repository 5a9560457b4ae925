//! [`Name`]: a method name as a REQUEST carries it (`spec/PROTOCOL.md`
//! §5.2: 1–255 bytes of UTF-8).
//!
//! A decoded name is a slice of the frame it came in, not a copy: as a
//! `String` it cost an allocation, a copy and a free per call served —
//! 6 % of the instructions of a 16 B unary call, both sides together
//! (callgrind: 4,863 → 4,555). It is checked as UTF-8 once, when it is
//! made, so reading it as `&str` costs nothing.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// A method name: UTF-8, shared with the frame it was decoded from.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Name(Bytes);

impl Name {
    /// `bytes` as a name, if they are UTF-8.
    pub fn from_utf8(bytes: Bytes) -> Result<Name, std::str::Utf8Error> {
        // Method names are nearly always ASCII, and for a few bytes the
        // ASCII test is a fraction of the general check (callgrind, a
        // 4-byte name: 69 instructions in `from_utf8`).
        if !bytes.is_ascii() {
            std::str::from_utf8(&bytes)?;
        }
        Ok(Name(bytes))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // SAFETY: checked as UTF-8 when made (`from_utf8`, or a `str`).
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(Bytes::from(s.into_bytes()))
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_checked_once_and_reads_as_its_str() {
        let frame = Bytes::from_static(b"echo and more");
        let n = Name::from_utf8(frame.slice(..4)).unwrap();
        assert_eq!(n, "echo");
        assert_eq!(n.len(), 4, "derefs to str");
        assert_eq!(format!("{n} {n:?}"), "echo \"echo\"");
        assert_eq!(Name::from("echo"), n);
        assert_eq!(Name::from(String::from("echo")), n);
        assert!(Name::from_utf8(Bytes::from_static(b"\xff\xfe")).is_err(), "not UTF-8");
        assert!(Name::from_utf8(Bytes::from_static(b"e\xc3")).is_err(), "a sequence cut short");
        assert_eq!(Name::from_utf8(Bytes::from_static("écho".as_bytes())).unwrap(), "écho", "UTF-8 beyond ASCII");
    }
}
