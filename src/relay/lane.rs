//! The ordered lane for what the host sends that needs no answer: notifications, and its
//! answers to server-initiated requests. One POST at a time keeps them in the host's order.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::link::Link;

/// Queues messages for the lane. Bounded: a full lane slows the stdin reader down.
#[derive(Clone)]
pub struct Lane {
    tx: mpsc::Sender<Bytes>,
}

impl Lane {
    pub fn spawn(link: Arc<Link>, capacity: usize) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx }, tokio::spawn(drain(link, rx)))
    }

    pub async fn push(&self, message: Bytes) {
        let _ = self.tx.send(message).await;
    }
}

async fn drain(link: Arc<Link>, mut rx: mpsc::Receiver<Bytes>) {
    while let Some(message) = rx.recv().await {
        link.deliver(message).await;
    }
}
