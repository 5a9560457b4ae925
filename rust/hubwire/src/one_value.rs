//! What counts as one MessagePack value (`spec/PROTOCOL.md` §6.2): a
//! payload is exactly one value of the data model MessagePack shares with
//! JSON. [`check_msgpack`] walks the bytes once, before any decoder sees
//! them, so every Rust type (even a dynamic one such as `rmpv::Value`)
//! accepts and refuses the same payloads as every other implementation.

/// The deepest nesting of arrays and maps accepted (`spec/PROTOCOL.md`
/// §6.2 lets a receiver refuse deeper values). It also bounds the walk's
/// stack, which a payload of nested one-element arrays could otherwise
/// make 16 times as large as itself.
pub(crate) const MAX_DEPTH: usize = 128;

/// One container being walked: how many elements are left in it, and
/// whether it is a map (whose elements alternate key, value).
struct Open {
    left: u64,
    map: bool,
}

/// Checks that `b` is exactly one MessagePack value: nothing after it, not
/// cut short, no ext types (nor the timestamp), no `0xc1`, only `str` map
/// keys, and valid UTF-8 in every `str`. The error says what was wrong.
///
/// Iterative, with a heap stack of open containers, at most [`MAX_DEPTH`]
/// deep: nesting cannot overflow the thread's stack.
pub(crate) fn check_msgpack(b: &[u8]) -> Result<(), String> {
    let mut open = vec![Open { left: 1, map: false }];
    let mut i = 0usize;
    while let Some(top) = open.last_mut() {
        if top.left == 0 {
            open.pop();
            continue;
        }
        // In a map of n entries `left` counts down from 2n: even means a key is next.
        let key = top.map && top.left % 2 == 0;
        top.left -= 1;
        let t = *b.get(i).ok_or("the payload ends inside the value")?;
        i += 1;
        let is_str = matches!(t, 0xa0..=0xbf | 0xd9..=0xdb);
        if key && !is_str {
            return Err(format!("a map key must be a string, got the type byte 0x{t:02x}"));
        }
        // (bytes of length to read, fixed bytes to skip, container to open)
        let (len_bytes, skip): (usize, usize) = match t {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => {
                push(&mut open, Open { left: 2 * u64::from(t & 0x0f), map: true })?;
                (0, 0)
            }
            0x90..=0x9f => {
                push(&mut open, Open { left: u64::from(t & 0x0f), map: false })?;
                (0, 0)
            }
            0xa0..=0xbf => {
                str_at(b, &mut i, usize::from(t & 0x1f))?;
                (0, 0)
            }
            0xc1 => return Err("0xc1 is not a MessagePack value".into()),
            0xc4 | 0xd9 => (1, 0),
            0xc5 | 0xda => (2, 0),
            0xc6 | 0xdb => (4, 0),
            0xc7..=0xc9 | 0xd4..=0xd8 => return Err(format!("MessagePack ext types are not part of the data model (type byte 0x{t:02x})")),
            0xca | 0xce | 0xd2 => (0, 4),
            0xcb | 0xcf | 0xd3 => (0, 8),
            0xcc | 0xd0 => (0, 1),
            0xcd | 0xd1 => (0, 2),
            0xdc => (2, 0),
            0xdd => (4, 0),
            0xde => (2, 0),
            0xdf => (4, 0),
        };
        if skip > 0 {
            take(b, &mut i, skip)?;
            continue;
        }
        if len_bytes == 0 {
            continue;
        }
        let n = take(b, &mut i, len_bytes)?.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
        match t {
            0xdc | 0xdd => push(&mut open, Open { left: n, map: false })?,
            0xde | 0xdf => push(&mut open, Open { left: 2 * n, map: true })?,
            0xd9..=0xdb => str_at(b, &mut i, n as usize)?,
            _ => {
                take(b, &mut i, n as usize)?;
            }
        }
    }
    if i != b.len() {
        return Err(format!("{} trailing bytes after the value", b.len() - i));
    }
    Ok(())
}

/// Opens a container; an error past [`MAX_DEPTH`] (the root entry at the
/// bottom of the stack is not a container).
fn push(open: &mut Vec<Open>, o: Open) -> Result<(), String> {
    if open.len() > MAX_DEPTH {
        return Err(format!("the value is nested deeper than {MAX_DEPTH} arrays and maps"));
    }
    open.push(o);
    Ok(())
}

/// The next `n` bytes, advancing `i`; an error if the payload is shorter.
fn take<'a>(b: &'a [u8], i: &mut usize, n: usize) -> Result<&'a [u8], String> {
    let end = i.checked_add(n).filter(|&e| e <= b.len()).ok_or("the payload ends inside the value")?;
    let s = &b[*i..end];
    *i = end;
    Ok(s)
}

/// A `str` of `n` bytes at `i`, which must be UTF-8.
fn str_at(b: &[u8], i: &mut usize, n: usize) -> Result<(), String> {
    std::str::from_utf8(take(b, i, n)?).map(|_| ()).map_err(|_| "a string is not valid UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::check_msgpack;

    fn check(hex: &str) -> Result<(), String> {
        let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        check_msgpack(&bytes)
    }

    #[test]
    fn accepts_one_value_of_the_data_model() {
        for ok in [
            "c0",
            "01",
            "ca3fc00000",
            "cb3ff8000000000000",
            "a161",
            "c40100",
            "92c3c2",
            "81a16101",
            "82a16180a162910a",
            "de0001a16101",
            "dc000101",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn nesting_up_to_the_limit() {
        let nested = |n: usize| [vec![0x91u8; n], vec![0xc0]].concat();
        assert_eq!(check_msgpack(&nested(super::MAX_DEPTH)), Ok(()));
        assert!(check_msgpack(&nested(super::MAX_DEPTH + 1)).unwrap_err().contains("nested deeper"));
    }

    #[test]
    fn refuses_what_is_not_one_value() {
        for (bad, why) in [
            ("", "ends inside"),
            ("0102", "trailing"),
            ("80c0", "trailing"),
            ("92c0", "ends inside"),
            ("cd01", "ends inside"),
            ("a3616263ff", "trailing"),
            ("810102", "map key"),
            ("81c4016101", "map key"),
            ("9181c001", "map key"),
            ("d40100", "ext"),
            ("c7020501ff", "ext"),
            ("d6ff00000000", "ext"),
            ("c1", "0xc1"),
            ("a2c328", "UTF-8"),
            ("ddffffffff", "ends inside"),
        ] {
            let e = check(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
