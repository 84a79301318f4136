//! Bytes both ways between the job and its destination, counted as they
//! pass, until both sides are done, or until the phase the connection was
//! opened in ends (a setup-phase connection does not live into the agent
//! phase) or the proxy stops: then both sides are closed.

use std::sync::atomic::{AtomicU64, Ordering};

use paddock_protocol::EgressPhase;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The relay's buffer per direction.
const BUFFER: usize = 64 * 1024;

/// What a relay carried and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relayed {
    pub up: u64,
    pub down: u64,
    /// Closed because the phase changed (or the proxy stopped).
    pub cut: bool,
}

/// Relays between `client` and `upstream` until both directions end or
/// `phase` changes from what it was when the connection was checked.
pub async fn relay<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut C,
    upstream: &mut TcpStream,
    phase: &mut watch::Receiver<EgressPhase>,
) -> Relayed {
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let cut = {
        let (mut client_r, mut client_w) = tokio::io::split(client);
        let (mut up_r, mut up_w) = upstream.split();
        let both = async {
            tokio::join!(
                pump(&mut client_r, &mut up_w, &up),
                pump(&mut up_r, &mut client_w, &down)
            )
        };
        tokio::select! {
            _ = both => false,
            _ = phase.changed() => true,
        }
    };
    Relayed {
        up: up.load(Ordering::Relaxed),
        down: down.load(Ordering::Relaxed),
        cut,
    }
}

/// Copies `from` to `to` until `from` ends or either fails, then shuts
/// `to`'s writing side.
async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    from: &mut R,
    to: &mut W,
    count: &AtomicU64,
) {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        count.fetch_add(n as u64, Ordering::Relaxed);
    }
    let _ = to.shutdown().await;
}
