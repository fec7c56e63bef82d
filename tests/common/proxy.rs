//! A raw HTTP proxy fake on 127.0.0.1:0 that records the first request head it gets (a
//! `CONNECT` for a tunnel) and refuses it with 403.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

pub struct RefusingProxy {
    pub addr: SocketAddr,
    /// The request head, once it arrived.
    pub head: oneshot::Receiver<String>,
}

impl RefusingProxy {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (head_tx, head) = oneshot::channel::<String>();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.unwrap() == 1 {
                head.push(byte[0]);
            }
            let _ = head_tx.send(String::from_utf8_lossy(&head).into_owned());
            let _ = socket
                .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
                .await;
        });
        Self { addr, head }
    }
}
