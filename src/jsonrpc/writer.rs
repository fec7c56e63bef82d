//! The single owner of stdout: whole lines only, flushed as they come, never interleaved.
//!
//! It runs on a dedicated OS thread doing plain blocking writes: tokio's async stdout would
//! hand every write to the blocking pool, which costs more CPU than the relaying itself.

use std::io::Write;

use tokio::sync::{mpsc, oneshot};

enum Item {
    Line(Vec<u8>),
    Flush(oneshot::Sender<()>),
}

/// A handle for queueing messages to the one stdout writer.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Item>,
}

impl Outbox {
    /// Queues one message (a single line of JSON, without its newline). Returns false
    /// when the writer has stopped (stdout closed); there is then nobody left to tell.
    pub async fn send(&self, line: Vec<u8>) -> bool {
        debug_assert!(!line.contains(&b'\n'), "messages must be single lines");
        self.tx.send(Item::Line(line)).await.is_ok()
    }

    /// Waits until everything queued before this call has been written and flushed.
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.tx.send(Item::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

/// Starts the writer thread over `out`. It ends when every [`Outbox`] is dropped (after
/// writing what was queued) or when the output breaks (a host that went away: BrokenPipe);
/// the returned receiver fires then.
pub fn spawn<W>(out: W, capacity: usize) -> (Outbox, oneshot::Receiver<std::io::Result<()>>)
where
    W: Write + Send + 'static,
{
    let (tx, rx) = mpsc::channel(capacity);
    let (ended, ended_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("stdout-writer".into())
        .spawn(move || {
            let _ = ended.send(write_lines(out, rx));
        })
        .expect("spawn the stdout writer thread");
    (Outbox { tx }, ended_rx)
}

fn write_lines<W: Write>(mut out: W, mut rx: mpsc::Receiver<Item>) -> std::io::Result<()> {
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut waiting = Vec::new();
    while let Some(item) = rx.blocking_recv() {
        batch.clear();
        let mut next = Some(item);
        // Coalesce what is already queued into one write, but never hold a message back.
        while let Some(item) = next.take() {
            match item {
                Item::Line(line) => {
                    batch.extend_from_slice(&line);
                    batch.push(b'\n');
                }
                Item::Flush(done) => waiting.push(done),
            }
            if batch.len() < 256 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            out.write_all(&batch)?;
            out.flush()?;
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn writes_each_message_as_one_line() {
        let out = Shared::default();
        let (outbox, ended) = spawn(out.clone(), 8);
        outbox.send(b"{\"a\":1}".to_vec()).await;
        outbox.send(b"{\"b\":2}".to_vec()).await;
        outbox.flush().await;
        assert_eq!(&*out.0.lock().unwrap(), b"{\"a\":1}\n{\"b\":2}\n");
        drop(outbox);
        ended.await.unwrap().unwrap();
    }
}
