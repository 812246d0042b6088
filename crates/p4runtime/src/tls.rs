//! P4Runtime over TLS (`p4runtime = "tls:ADDR:PORT"`): the switch's certificate, and every client
//! asked for one its CA signed, checked by the same rules as the OpenFlow channel's `ptls:`
//! (docs/security.md). gRPC over TLS needs ALPN's `h2`. Handshakes run beside the accept loop, so
//! one slow or hostile client does not hold the others; a failed one is logged with its reason.
//! A build without the `tls` feature has the same names, and no configuration reaches them.

#[cfg(feature = "tls")]
pub use built::*;

#[cfg(not(feature = "tls"))]
pub enum Tls {}

#[cfg(feature = "tls")]
mod built {
    use std::io;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;
    use tokio_rustls::rustls::ServerConfig;
    use tonic::transport::server::{Connected, TcpConnectInfo};

    /// How long a client has for its handshake.
    const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
    /// Connections handshaken and not yet taken by the server.
    const READY_QUEUE: usize = 16;

    /// The server's TLS configuration, with gRPC's ALPN.
    pub struct Tls(Arc<ServerConfig>);

    impl Tls {
        /// `config`: the OpenFlow channel's server configuration (certificate, CA, peer rules).
        pub fn new(config: &ServerConfig) -> Tls {
            let mut config = config.clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Tls(Arc::new(config))
        }
    }

    /// A client's connection after its handshake, with its TCP addresses: the server tells a
    /// primary's stream from another connection by the peer's address.
    pub struct TlsConnection {
        stream: tokio_rustls::server::TlsStream<TcpStream>,
        info: TcpConnectInfo,
    }

    impl Connected for TlsConnection {
        type ConnectInfo = TcpConnectInfo;

        fn connect_info(&self) -> TcpConnectInfo {
            self.info.clone()
        }
    }

    impl AsyncRead for TlsConnection {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for TlsConnection {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.stream.is_write_vectored()
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().stream).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
        }
    }

    /// The connections of `listener` that pass their handshake, as the server takes them.
    pub fn incoming(
        listener: TcpListener,
        tls: Tls,
    ) -> tokio_stream::wrappers::ReceiverStream<io::Result<TlsConnection>> {
        let (ready, taken) = mpsc::channel(READY_QUEUE);
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.0);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("P4Runtime: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let info = TcpConnectInfo { local_addr: tcp.local_addr().ok(), remote_addr: Some(peer) };
                let (acceptor, ready) = (acceptor.clone(), ready.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = ready.send(Ok(TlsConnection { stream, info })).await;
                        }
                        Ok(Err(e)) => tracing::warn!(%peer, "P4Runtime: TLS handshake refused: {e}"),
                        Err(_) => tracing::warn!(%peer, "P4Runtime: TLS handshake took over {HANDSHAKE_TIMEOUT:?}"),
                    }
                });
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(taken)
    }
}
