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

/// A TCP relay on 127.0.0.1:0 to `target` that records every byte its clients send (the
/// wire between two replicas, as someone on that network sees it).
pub struct RecordingRelay {
    pub addr: SocketAddr,
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl RecordingRelay {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut client_read, mut client_write) = client.split();
                    let (mut server_read, mut server_write) = server.split();
                    let upstream = async {
                        let mut buffer = [0u8; 8192];
                        loop {
                            match client_read.read(&mut buffer).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    recorded.lock().unwrap().extend_from_slice(&buffer[..n]);
                                    if server_write.write_all(&buffer[..n]).await.is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = server_write.shutdown().await;
                    };
                    let downstream = tokio::io::copy(&mut server_read, &mut client_write);
                    let _ = tokio::join!(upstream, downstream);
                });
            }
        });
        Self { addr, seen }
    }

    /// What was recorded so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
}
