//! The shared-memory segment of `spec/PROTOCOL.md` §11.4.1: a sealed
//! `memfd` holding a 4096-byte control page and two byte rings, mapped
//! into both processes. This file makes, checks and maps it; `ring.rs`
//! moves bytes through it.
//!
//! Control page, little-endian, offsets from the start:
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `hw-shm\0\0` |
//! | 8 | 4 | layout, 2 (1 is read too) |
//! | 12 | 4 | data offset, 4096 |
//! | 16, 20 | 4 + 4 | `cap0`, `cap1` |
//! | 24 | 8 | size, `4096 + cap0 + cap1` |
//! | 128 + 256·r | 8, 4, 4, 8 | ring r: `written`, `closed`, `writer_waiting`, `origin` (the writer's block) |
//! | 256 + 256·r | 8, 4 | ring r: `read`, `reader_waiting` (the reader's block) |

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// The segment's first eight bytes.
pub const MAGIC: [u8; 8] = *b"hw-shm\0\0";
/// The layout this code writes: 2, whose writers may rewind their ring
/// (`origin`, §11.4.1). It reads layout 1 too, whose writers never do:
/// the segments of an earlier hubwire.
pub const LAYOUT: u32 = 2;
/// Where ring 0's data starts: the control page's size.
pub const DATA_OFFSET: usize = 4096;
/// The smallest ring a segment may have.
pub const MIN_CAP: usize = 4096;
/// The largest ring a segment may have (1 GiB).
pub const MAX_CAP: usize = 1 << 30;
/// The header's size in the vectors: the first 128 bytes.
pub const HEADER_LEN: usize = 128;

/// Where ring `r`'s writer block starts.
pub(super) fn writer_block(r: usize) -> usize {
    128 + 256 * r
}

/// Where ring `r`'s reader block starts.
pub(super) fn reader_block(r: usize) -> usize {
    256 + 256 * r
}

/// The header of a segment with rings of `cap0` and `cap1` bytes.
pub fn header(cap0: usize, cap1: usize) -> [u8; HEADER_LEN] {
    header_of(cap0, cap1, LAYOUT)
}

fn header_of(cap0: usize, cap1: usize, layout: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&layout.to_le_bytes());
    h[12..16].copy_from_slice(&(DATA_OFFSET as u32).to_le_bytes());
    h[16..20].copy_from_slice(&(cap0 as u32).to_le_bytes());
    h[20..24].copy_from_slice(&(cap1 as u32).to_le_bytes());
    h[24..32].copy_from_slice(&((DATA_OFFSET + cap0 + cap1) as u64).to_le_bytes());
    h
}

fn valid_cap(cap: usize) -> bool {
    cap.is_power_of_two() && (MIN_CAP..=MAX_CAP).contains(&cap)
}

/// Checks a header against the size of the file it came from (§11.4.1);
/// the two ring sizes, or why the segment is refused.
pub fn check_header(h: &[u8], file_size: u64) -> Result<(usize, usize), String> {
    check(h, file_size).map(|(caps, _)| caps)
}

/// [`check_header`], with the layout.
fn check(h: &[u8], file_size: u64) -> Result<((usize, usize), u32), String> {
    let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
    if h.len() < HEADER_LEN || h[0..8] != MAGIC {
        return Err("not a hubwire shared-memory segment (bad magic)".into());
    }
    if !(1..=LAYOUT).contains(&u32_at(8)) {
        return Err(format!("segment layout {} (we read layouts 1 to {LAYOUT})", u32_at(8)));
    }
    if u32_at(12) as usize != DATA_OFFSET {
        return Err(format!("segment data offset {} (must be {DATA_OFFSET})", u32_at(12)));
    }
    let (cap0, cap1) = (u32_at(16) as usize, u32_at(20) as usize);
    if !valid_cap(cap0) || !valid_cap(cap1) {
        return Err(format!("ring sizes {cap0} and {cap1} (each a power of two, {MIN_CAP} to {MAX_CAP})"));
    }
    let size = u64::from_le_bytes(h[24..32].try_into().expect("8 bytes"));
    let want = (DATA_OFFSET + cap0 + cap1) as u64;
    if size != want {
        return Err(format!("segment size field {size}, its rings need {want}"));
    }
    if file_size != size {
        return Err(format!("segment is {file_size} bytes, its header says {size}"));
    }
    Ok(((cap0, cap1), u32_at(8)))
}

/// A mapped segment. Unmapped on drop.
pub struct Segment {
    base: NonNull<u8>,
    size: usize,
    caps: [usize; 2],
    layout: u32,
}

// SAFETY: the mapping is plain shared memory; every access to the control
// words is atomic, and each ring's data is written by one side only while
// its counters say it is free (ring.rs).
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

impl Segment {
    /// Makes a new segment (zeroed, header written, sealed to its size)
    /// and maps it: the dialer's side of an offer.
    pub fn create(cap0: usize, cap1: usize) -> io::Result<(Segment, OwnedFd)> {
        Segment::create_layout(cap0, cap1, LAYOUT)
    }

    /// [`Segment::create`] in an earlier layout (1 to [`LAYOUT`]): what an
    /// earlier hubwire offers, for tests and the conformance suite.
    pub fn create_layout(cap0: usize, cap1: usize, layout: u32) -> io::Result<(Segment, OwnedFd)> {
        if !(1..=LAYOUT).contains(&layout) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("layout {layout}: we write 1 to {LAYOUT}")));
        }
        if !valid_cap(cap0) || !valid_cap(cap1) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("ring sizes {cap0}, {cap1}: powers of two from {MIN_CAP}")));
        }
        let size = DATA_OFFSET + cap0 + cap1;
        // SAFETY: plain system calls; the descriptor is ours from here on.
        let fd = unsafe {
            let raw = libc::memfd_create(c"hubwire-shm".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            OwnedFd::from_raw_fd(raw)
        };
        // SAFETY: as above, on the descriptor we own.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) < 0
                || libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        let seg = Segment::map(&fd, size, [cap0, cap1], layout)?;
        // SAFETY: the mapping is at least a page; nobody else sees it yet.
        unsafe { std::ptr::copy_nonoverlapping(header_of(cap0, cap1, layout).as_ptr(), seg.base.as_ptr(), HEADER_LEN) };
        Ok((seg, fd))
    }

    /// Checks and maps a segment the peer offered: seals, size, header,
    /// control words all zero (§11.4.1). The error says why it is refused.
    pub fn open(fd: &OwnedFd) -> Result<Segment, String> {
        // SAFETY: fcntl and fstat on a descriptor we own, into a local.
        let (seals, file_size) = unsafe {
            let seals = libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS);
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) < 0 {
                return Err(format!("cannot stat the segment: {}", io::Error::last_os_error()));
            }
            (seals, st.st_size as u64)
        };
        if seals < 0 || seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW) != libc::F_SEAL_SHRINK | libc::F_SEAL_GROW {
            return Err("the segment is not sealed against shrinking and growing".into());
        }
        if file_size < DATA_OFFSET as u64 {
            return Err(format!("segment is {file_size} bytes, smaller than its control page"));
        }
        let mut h = [0u8; HEADER_LEN];
        // SAFETY: pread into a local buffer of its size.
        let n = unsafe { libc::pread(fd.as_raw_fd(), h.as_mut_ptr() as *mut libc::c_void, HEADER_LEN, 0) };
        if n != HEADER_LEN as isize {
            return Err("cannot read the segment's header".into());
        }
        let ((cap0, cap1), layout) = check(&h, file_size)?;
        let seg = Segment::map(fd, file_size as usize, [cap0, cap1], layout).map_err(|e| format!("cannot map the segment: {e}"))?;
        for r in 0..2 {
            for (off, len) in [(writer_block(r), 24), (reader_block(r), 16)] {
                // SAFETY: within the control page; read as plain bytes once.
                let block = unsafe { std::slice::from_raw_parts(seg.base.as_ptr().add(off), len) };
                if block.iter().any(|&b| b != 0) {
                    return Err(format!("ring {r}'s control words are not zero"));
                }
            }
        }
        Ok(seg)
    }

    fn map(fd: &OwnedFd, size: usize, caps: [usize; 2], layout: u32) -> io::Result<Segment> {
        // SAFETY: a shared mapping of a file we hold, of its sealed size.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Segment { base: NonNull::new(p as *mut u8).expect("mmap never returns null"), size, caps, layout })
    }

    /// The segment's layout: 2, or 1 for a peer whose writers never
    /// rewind (and ours must not either: it reads without `origin`).
    pub fn layout(&self) -> u32 {
        self.layout
    }

    /// Ring `r`'s data size.
    pub fn cap(&self, r: usize) -> usize {
        self.caps[r]
    }

    /// The mapping's start.
    pub(super) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Where ring `r`'s data starts.
    pub(super) fn data(&self, r: usize) -> *mut u8 {
        // SAFETY: within the mapping, whose size is DATA_OFFSET + cap0 + cap1.
        unsafe { self.base.as_ptr().add(DATA_OFFSET + if r == 0 { 0 } else { self.caps[0] }) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this size and is no
        // longer used: the Segment is its only owner.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.size) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// `spec/vectors/upgrade.json` `segment`: the valid headers are what
    /// [`header`] writes and are accepted with their ring sizes; the
    /// others are refused.
    #[test]
    fn segment_vectors() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/upgrade.json")).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let cases = doc["segment"].as_array().unwrap();
        assert!(cases.len() >= 5);
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let h = unhex(c["header_hex"].as_str().unwrap());
            let size = c["file_size"].as_u64().unwrap();
            if c["valid"].as_bool().unwrap() {
                let caps = (c["cap0"].as_u64().unwrap() as usize, c["cap1"].as_u64().unwrap() as usize);
                let layout = c["layout"].as_u64().unwrap() as u32;
                assert_eq!(check(&h, size), Ok((caps, layout)), "{name}");
                assert_eq!(header_of(caps.0, caps.1, layout).to_vec(), h, "{name}: the header we write");
            } else {
                assert!(check_header(&h, size).is_err(), "{name}: accepted");
            }
        }
    }

    #[test]
    fn a_created_segment_is_sealed_and_opens_with_its_sizes() {
        let (seg, fd) = Segment::create(4096, 8192).unwrap();
        let other = Segment::open(&fd).unwrap();
        assert_eq!((other.cap(0), other.cap(1), other.layout()), (4096, 8192, LAYOUT));
        let (_old, fd1) = Segment::create_layout(4096, 4096, 1).unwrap();
        assert_eq!(Segment::open(&fd1).unwrap().layout(), 1, "an earlier hubwire's segment opens");
        // SAFETY: ftruncate on our descriptor; it must fail (sealed).
        assert!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) } < 0, "the size is sealed");
        // The two mappings are the same memory.
        unsafe { *seg.data(1) = 42 };
        assert_eq!(unsafe { *other.data(1) }, 42);
    }

    #[test]
    fn an_unsealed_or_wrong_file_is_refused() {
        // SAFETY: a memfd we own, without seals.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"x".as_ptr(), libc::MFD_CLOEXEC)) };
        unsafe { libc::ftruncate(fd.as_raw_fd(), 12288) };
        assert!(Segment::open(&fd).err().unwrap().contains("sealed"));
        let (_seg, fd) = Segment::create(4096, 4096).unwrap();
        // Control words not zero: a segment already in use.
        unsafe { libc::pwrite(fd.as_raw_fd(), [1u8].as_ptr() as *const libc::c_void, 1, writer_block(1) as libc::off_t) };
        assert!(Segment::open(&fd).err().unwrap().contains("not zero"));
        let (_seg, fd) = Segment::create(4096, 4096).unwrap();
        // `origin`, the writer block's last word, counts too.
        unsafe { libc::pwrite(fd.as_raw_fd(), [1u8].as_ptr() as *const libc::c_void, 1, (writer_block(0) + 16) as libc::off_t) };
        assert!(Segment::open(&fd).err().unwrap().contains("not zero"));
    }
}
