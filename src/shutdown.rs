//! The signals that end a long-running mode (relay, serve): SIGTERM and SIGINT (Ctrl-C on
//! Windows), named for the log.

pub async fn signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// SIGHUP, the operator's "reload the config file". Only listened for where a reload
/// means something: elsewhere SIGHUP keeps its default (the process ends).
pub struct Hangups {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    pub fn new(listen: bool) -> Self {
        #[cfg(unix)]
        {
            let signal = listen
                .then(|| {
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
                })
                .flatten();
            Hangups { signal }
        }
        #[cfg(not(unix))]
        {
            let _ = listen;
            Hangups {}
        }
    }

    /// The next SIGHUP (never, where none is listened for).
    pub async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            signal.recv().await;
            return;
        }
        std::future::pending::<()>().await
    }
}
