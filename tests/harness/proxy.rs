//! A TCP proxy for one directed pair of nodes: all of one node's traffic to another goes
//! through it, so a test can cut and heal that direction (a network partition on one machine).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    /// Where the proxy listens (what the source node dials).
    pub addr: String,
    cut: Arc<watch::Sender<bool>>,
    /// Connections dropped by a cut or refused while cut.
    broken: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl Proxy {
    /// Forward connections to `target` until cut.
    pub fn start(target: &str) -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a proxy runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a proxy port");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let (cut, _) = watch::channel(false);
        let cut = Arc::new(cut);
        let target = target.to_string();
        let state = cut.clone();
        let broken = Arc::new(AtomicU64::new(0));
        let count = broken.clone();
        runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((inbound, _)) = listener.accept().await {
                let mut cut = state.subscribe();
                if *cut.borrow() {
                    // Partitioned: the connection is dropped at once.
                    drop(inbound);
                    count.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let target = target.clone();
                let count = count.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (mut a, mut b) = (inbound, outbound);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
                        _ = cut.wait_for(|c| *c) => {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        Proxy {
            addr,
            cut,
            broken,
            _runtime: runtime,
        }
    }

    /// Drop every connection and refuse new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn heal(&self) {
        self.cut.send_replace(false);
    }

    /// How many connections a cut dropped or refused so far: a cut nobody tried to cross
    /// shows as none.
    pub fn broken(&self) -> u64 {
        self.broken.load(Ordering::Relaxed)
    }
}
