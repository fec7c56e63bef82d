//! The single owner of stdout: whole lines only, flushed as they come, never interleaved.
//!
//! It is a task on the runtime when stdout can be polled (a pipe or socket), and otherwise a
//! dedicated OS thread doing plain blocking writes: tokio's async stdout would hand every
//! write to the blocking pool, which costs more CPU than the relaying itself.

use std::io::Write;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::stdio::Output;

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

/// Starts the one writer of stdout. It ends when every [`Outbox`] is dropped (after
/// writing what was queued) or when the output breaks (a host that went away: BrokenPipe);
/// the returned receiver fires then. A polled output needs the tokio runtime.
pub fn spawn(out: Output, capacity: usize) -> (Outbox, oneshot::Receiver<std::io::Result<()>>) {
    match out {
        Output::Polled(out) => spawn_task(out, capacity),
        Output::Threaded(out) => spawn_thread(out, capacity),
    }
}

/// The writer as a task on the current runtime, over a non-blocking `out`.
pub fn spawn_task<W>(out: W, capacity: usize) -> (Outbox, oneshot::Receiver<std::io::Result<()>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(capacity);
    let (ended, ended_rx) = oneshot::channel();
    tokio::spawn(async move {
        let _ = ended.send(write_lines_async(out, rx).await);
    });
    (Outbox { tx }, ended_rx)
}

/// The writer as a dedicated thread doing blocking writes to `out`.
pub fn spawn_thread<W>(out: W, capacity: usize) -> (Outbox, oneshot::Receiver<std::io::Result<()>>)
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

/// Lines and flush requests taken from the queue for one write.
struct Batch {
    bytes: Vec<u8>,
    waiting: Vec<oneshot::Sender<()>>,
}

impl Batch {
    fn new() -> Self {
        Batch {
            bytes: Vec::with_capacity(64 * 1024),
            waiting: Vec::new(),
        }
    }

    /// Takes `first` and whatever else is already queued, so a burst becomes one write;
    /// never waits for more, so no message is held back.
    fn gather(&mut self, first: Item, rx: &mut mpsc::Receiver<Item>) {
        self.bytes.clear();
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Item::Line(line) => {
                    self.bytes.extend_from_slice(&line);
                    self.bytes.push(b'\n');
                }
                Item::Flush(done) => self.waiting.push(done),
            }
            if self.bytes.len() < 256 * 1024 {
                next = rx.try_recv().ok();
            }
        }
    }

    /// Tells the flush requests in this batch that their lines are out.
    fn written(&mut self) {
        for done in self.waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

fn write_lines<W: Write>(mut out: W, mut rx: mpsc::Receiver<Item>) -> std::io::Result<()> {
    let mut batch = Batch::new();
    while let Some(item) = rx.blocking_recv() {
        batch.gather(item, &mut rx);
        if !batch.bytes.is_empty() {
            out.write_all(&batch.bytes)?;
            out.flush()?;
        }
        batch.written();
    }
    out.flush()
}

async fn write_lines_async<W>(mut out: W, mut rx: mpsc::Receiver<Item>) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut batch = Batch::new();
    while let Some(item) = rx.recv().await {
        batch.gather(item, &mut rx);
        if !batch.bytes.is_empty() {
            out.write_all(&batch.bytes).await?;
            out.flush().await?;
        }
        batch.written();
    }
    out.flush().await
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
        let (outbox, ended) = spawn_thread(out.clone(), 8);
        outbox.send(b"{\"a\":1}".to_vec()).await;
        outbox.send(b"{\"b\":2}".to_vec()).await;
        outbox.flush().await;
        assert_eq!(&*out.0.lock().unwrap(), b"{\"a\":1}\n{\"b\":2}\n");
        drop(outbox);
        ended.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn the_task_writer_writes_the_same_lines_and_ends_on_a_broken_pipe() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let (outbox, ended) = spawn_task(ours, 8);
        outbox.send(b"{\"a\":1}".to_vec()).await;
        outbox.flush().await;
        let mut got = vec![0u8; 8];
        tokio::io::AsyncReadExt::read_exact(&mut theirs, &mut got)
            .await
            .unwrap();
        assert_eq!(got, b"{\"a\":1}\n");
        drop(theirs);
        outbox.send(b"{\"b\":2}".to_vec()).await;
        assert!(
            ended.await.unwrap().is_err(),
            "a closed reader ends the writer"
        );
    }
}
