//! The stdio line framing (`jsonrpc::framing::LineReader`), read in chunks of any size,
//! against a model: the input split at `\n`, each piece longer than the cap reported as
//! too long (and skipped), every other one a line with one trailing `\r` removed.
#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll};

use libfuzzer_sys::fuzz_target;
use mcp_stdio::jsonrpc::framing::{Frame, LineReader};
use tokio::io::{AsyncRead, ReadBuf};

/// Hands out `step` bytes per read, so lines straddle reads.
struct Chunked<'a> {
    data: &'a [u8],
    step: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let n = self.step.min(self.data.len()).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

fn model(data: &[u8], max: usize) -> Vec<Frame> {
    let mut pieces: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop(); // the input ended with a newline (or was empty)
    }
    pieces
        .into_iter()
        .map(|piece| {
            if piece.len() > max {
                Frame::TooLong
            } else {
                let line = piece.strip_suffix(b"\r").unwrap_or(piece);
                Frame::Line(bytes::Bytes::copy_from_slice(line))
            }
        })
        .collect()
}

fuzz_target!(|input: &[u8]| {
    let Some((&shape, data)) = input.split_first() else { return };
    let max = 1 + (shape as usize & 0x3f);
    let step = 1 + (shape as usize >> 6) * 7;
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let frames = runtime.block_on(async {
        let mut reader = LineReader::new(Chunked { data, step }, max);
        let mut frames = Vec::new();
        while let Some(frame) = reader.next().await.unwrap() {
            frames.push(frame);
        }
        frames
    });
    assert_eq!(frames, model(data, max), "max {max}, step {step}");
});
