//! Newline-delimited framing: a stdin reader that survives bad lines, and one-line output.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder};

/// One unit read from a newline-delimited stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line without its terminator (a trailing `\r` removed, so CRLF is tolerated).
    Line(Bytes),
    /// A line longer than the limit; its bytes were discarded up to the next newline.
    TooLong,
}

/// Reads lines with a length cap and keeps going after an over-long one.
///
/// A tokio-util `FramedRead` ends for good after its first decoder error, which would turn
/// one oversized message into a dead relay. So the decoder is driven by hand here.
pub struct LineReader<R> {
    inner: R,
    codec: AnyDelimiterCodec,
    buf: BytesMut,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max_line: usize) -> Self {
        Self {
            inner,
            codec: AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max_line),
            buf: BytesMut::with_capacity(8 * 1024),
            eof: false,
        }
    }

    /// The next frame, or `None` at end of input.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let decoded = if self.eof {
                self.codec.decode_eof(&mut self.buf)
            } else {
                self.codec.decode(&mut self.buf)
            };
            match decoded {
                Ok(Some(line)) => return Ok(Some(Frame::Line(strip_cr(line)))),
                Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => {
                    return Ok(Some(Frame::TooLong));
                }
                Err(AnyDelimiterCodecError::Io(e)) => return Err(e),
                Ok(None) if self.eof => return Ok(None),
                Ok(None) => {}
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(64 * 1024);
            }
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                self.eof = true;
            }
        }
    }
}

fn strip_cr(line: Bytes) -> Bytes {
    match line.last() {
        Some(b'\r') => line.slice(..line.len() - 1),
        _ => line,
    }
}

/// Trims surrounding whitespace; `None` for a blank line.
pub fn trimmed(line: &[u8]) -> Option<&[u8]> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace())?;
    Some(&line[start..=end])
}

const LINE_SEPARATOR: &[u8] = "\u{2028}".as_bytes();
const PARAGRAPH_SEPARATOR: &[u8] = "\u{2029}".as_bytes();

/// Makes one valid JSON text safe to write as a single stdio line.
///
/// Bytes are returned unchanged when nothing needs editing (the common case). Otherwise
/// whitespace outside strings is dropped (a pretty-printed upstream body becomes one line)
/// and raw U+2028/U+2029 are escaped, which some JavaScript hosts treat as line breaks.
/// Numbers, key order, escapes and unknown fields are never touched. The input must already
/// be known to be valid JSON: inside strings raw control characters cannot occur.
pub fn one_line(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let json = trimmed(json).unwrap_or(json);
    // memchr scans a word at a time: this check runs on every message, the edit rarely.
    let has_break = memchr::memchr2(b'\n', b'\r', json).is_some();
    let has_separator = memchr::memmem::find(json, LINE_SEPARATOR).is_some()
        || memchr::memmem::find(json, PARAGRAPH_SEPARATOR).is_some();
    if !has_break && !has_separator {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = Vec::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            } else if b == 0xE2 && json[i..].starts_with(LINE_SEPARATOR) {
                out.extend_from_slice(b"\\u2028");
                i += 3;
                continue;
            } else if b == 0xE2 && json[i..].starts_with(PARAGRAPH_SEPARATOR) {
                out.extend_from_slice(b"\\u2029");
                i += 3;
                continue;
            }
            out.push(b);
        } else if b == b'"' {
            in_string = true;
            out.push(b);
        } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            out.push(b);
        }
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(frame) = reader.next().await.unwrap() {
            out.push(frame);
        }
        out
    }

    #[tokio::test]
    async fn keeps_reading_after_an_over_long_line() {
        let got = frames(b"ok\r\n0123456789abcdef\nlast", 8).await;
        assert_eq!(
            got,
            vec![
                Frame::Line("ok".into()),
                Frame::TooLong,
                Frame::Line("last".into())
            ]
        );
    }

    #[test]
    fn compacts_pretty_json_without_touching_values() {
        let pretty = b"{\n  \"id\": 12345678901234567890123,\n  \"s\": \"a b\\n \\\" c\",\n  \"n\": 1.0e0\n}\n";
        assert_eq!(
            &*one_line(pretty),
            br#"{"id":12345678901234567890123,"s":"a b\n \" c","n":1.0e0}"#
        );
    }

    #[test]
    fn escapes_line_and_paragraph_separators() {
        let input = "{\"s\":\"a\u{2028}b\u{2029}\"}".as_bytes();
        assert_eq!(&*one_line(input), br#"{"s":"a\u2028b\u2029"}"#);
    }

    #[test]
    fn forwards_clean_lines_unchanged() {
        let line = br#"{"b":1,"a":"x y"}"#;
        assert!(matches!(one_line(line), std::borrow::Cow::Borrowed(_)));
    }
}
