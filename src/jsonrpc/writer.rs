//! The single owner of stdout: whole lines only, flushed as they come, never interleaved.

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

enum Item {
    Line(Vec<u8>),
    Flush(oneshot::Sender<()>),
}

/// A handle for queueing messages to the one stdout writer task.
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

/// Starts the writer task over `out`. It ends when every [`Outbox`] is dropped (after
/// writing what was queued) or when the output breaks (a host that went away: BrokenPipe).
pub fn spawn<W>(out: W, capacity: usize) -> (Outbox, tokio::task::JoinHandle<std::io::Result<()>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(capacity);
    (Outbox { tx }, tokio::spawn(write_lines(out, rx)))
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut out: W,
    mut rx: mpsc::Receiver<Item>,
) -> std::io::Result<()> {
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut waiting = Vec::new();
    while let Some(item) = rx.recv().await {
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
            out.write_all(&batch).await?;
            out.flush().await?;
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_each_message_as_one_line() {
        let (client, mut server) = tokio::io::duplex(1024);
        let (outbox, task) = spawn(client, 8);
        outbox.send(b"{\"a\":1}".to_vec()).await;
        outbox.send(b"{\"b\":2}".to_vec()).await;
        outbox.flush().await;
        drop(outbox);
        task.await.unwrap().unwrap();
        let mut got = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut server, &mut got)
            .await
            .unwrap();
        assert_eq!(got, "{\"a\":1}\n{\"b\":2}\n");
    }
}
