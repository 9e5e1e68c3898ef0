//! Terminal noise removed from a raw log line: ANSI escape sequences and carriage returns
//! (a TTY's output, colour codes of the engines' loggers); invalid UTF-8 becomes U+FFFD.

use std::borrow::Cow;

/// Removes ANSI escape sequences and carriage returns; invalid UTF-8 becomes U+FFFD.
pub fn clean(raw: &[u8]) -> Cow<'_, str> {
    // The strict UTF-8 check first: several times faster than the lossy one on long lines.
    let text = match std::str::from_utf8(raw) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(raw),
    };
    let b = text.as_bytes();
    let Some(first) = memchr::memchr2(0x1b, b'\r', b) else {
        return text;
    };
    // A TTY's line end (`\r` last, the only code): the text is the line before it, borrowed
    // (the prefilter's occurrences on the raw line stay valid for it).
    if first + 1 == b.len() && b[first] == b'\r' {
        if let Cow::Borrowed(s) = text {
            return Cow::Borrowed(&s[..first]);
        }
    }
    // Byte by byte between the escapes (copied in runs): a CSI (ESC [ params final-byte)
    // goes up to a byte in '@'..='~'; another escape takes the next character with it.
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    out.extend_from_slice(&b[..first]);
    let mut i = first;
    while i < b.len() {
        match b[i] {
            b'\r' => i += 1,
            0x1b => {
                i += 1;
                if b.get(i) == Some(&b'[') {
                    i += 1;
                    while i < b.len() {
                        let d = b[i];
                        i += 1;
                        if (b'@'..=b'~').contains(&d) {
                            break;
                        }
                    }
                } else if i < b.len() {
                    i += utf8_len(b[i]);
                }
            }
            _ => {
                let run = memchr::memchr2(0x1b, b'\r', &b[i..]).unwrap_or(b.len() - i);
                out.extend_from_slice(&b[i..i + run]);
                i += run;
            }
        }
    }
    // Only whole characters were left out.
    Cow::Owned(
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// Length of the UTF-8 character starting with byte `lead`.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean_by_chars(raw: &[u8]) -> String {
        let s = String::from_utf8_lossy(raw);
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\x1b' => {
                    if chars.peek() == Some(&'[') {
                        chars.next();
                        for d in chars.by_ref() {
                            if ('@'..='~').contains(&d) {
                                break;
                            }
                        }
                    } else {
                        chars.next();
                    }
                }
                '\r' => {}
                _ => out.push(c),
            }
        }
        out
    }

    #[test]
    fn cleaning_by_bytes_is_cleaning_by_characters() {
        let cases: &[&[u8]] = &[
            b"plain",
            b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO x\r",
            b"a\x1b\x1b[31mb",
            "a\x1b\u{e9}b\x1b[\u{e9}1mc".as_bytes(),
            b"\x1b",
            b"\x1b[12",
            b"x\r\r\ry\x1bZz",
            b"bad \xff\xfe utf8 \x1b[0m\r",
            b"\x1b\xff after",
        ];
        for c in cases {
            assert_eq!(clean(c), clean_by_chars(c), "{c:?}");
        }
        // A final `\r` alone leaves the line borrowed.
        assert!(matches!(
            clean(b"(EngineCore pid=1) ERROR x\r"),
            Cow::Borrowed("(EngineCore pid=1) ERROR x")
        ));
        assert!(matches!(clean(b"a\rb\r"), Cow::Owned(_)));
        {}
    }
}
