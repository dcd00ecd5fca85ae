//! The data layer against bare TCP servers that behave as S3 can and as a
//! server that ignores `Expect` does: what goes on the wire, byte for byte.

use std::fs::File;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::s3::payload::{Buffers, Content, Payload, encoded_length};

const XML_403: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";

struct Archive {
    _dir: tempfile::TempDir,
    file: Arc<File>,
    len: u64,
}

fn archive(len: usize) -> Archive {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("archive");
    let mut data = vec![0; len];
    fastrand::Rng::with_seed(11).fill(&mut data);
    std::fs::write(&path, &data).unwrap();
    Archive {
        file: Arc::new(File::open(&path).unwrap()),
        _dir: dir,
        len: len as u64,
    }
}

fn body(archive: &Archive) -> FileBody {
    let payload = Payload::File {
        offset: 0,
        len: archive.len,
    };
    match payload
        .prepare(&archive.file, &Buffers::default(), &Arc::default())
        .body
    {
        Content::File(body) => body,
        Content::Bytes(_) => unreachable!("a file payload has a file body"),
    }
}

async fn send(wire: &Wire, url: &Url, archive: &Archive, fresh: bool) -> Result<Answer, Error> {
    let request = Request {
        method: "PUT",
        url,
        headers: &[("x-amz-content-sha256", "UNSIGNED".to_owned())],
        content_length: encoded_length(archive.len),
    };
    wire.send(&request, Outgoing::File(&body(archive)), fresh)
        .await
}

/// Reads a request head from `stream`: its text, and bytes after it.
async fn read_head(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = got.split_off(end + 4);
            return (String::from_utf8(got).unwrap(), rest);
        }
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed before its head was complete");
        got.extend_from_slice(&buf[..n]);
    }
}

fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .parse()
        .unwrap()
}

/// Reads the rest of a body of `len` bytes, `rest` already in hand.
async fn read_body(stream: &mut TcpStream, mut rest: Vec<u8>, len: usize) -> Vec<u8> {
    while rest.len() < len {
        let mut buf = vec![0u8; 65536];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the body ended early");
        rest.extend_from_slice(&buf[..n]);
    }
    rest
}

async fn listener() -> (TcpListener, Url) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = Url::parse(&format!(
        "http://{}/bucket/key",
        listener.local_addr().unwrap()
    ))
    .unwrap();
    (listener, url)
}

#[tokio::test]
async fn a_refusal_at_the_headers_is_read_and_no_body_byte_is_sent() {
    let (listener, url) = listener().await;
    let body_bytes = Arc::new(AtomicU64::new(u64::MAX));
    let seen = Arc::clone(&body_bytes);
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let (head, rest) = read_head(&mut stream).await;
        assert!(head.contains("expect: 100-continue\r\n"), "{head}");
        let answer = format!(
            "HTTP/1.1 403 Forbidden\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{XML_403}",
            XML_403.len()
        );
        stream.write_all(answer.as_bytes()).await.unwrap();
        // Everything the client sends from now until it closes.
        let mut after = rest;
        stream.read_to_end(&mut after).await.unwrap();
        seen.store(after.len() as u64, Ordering::SeqCst);
    });
    let wire = Wire::new(&Transport::default());
    let archive = archive(3 * 1024 * 1024);

    let answer = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(answer.status, 403);
    assert!(answer.early);
    assert_eq!(String::from_utf8(answer.body).unwrap(), XML_403);
    // The connection that answered early is closed, not kept.
    assert!(wire.check_out(&Origin::of(&url).unwrap()).is_none());
    server.await.unwrap();
    assert_eq!(body_bytes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn after_100_continue_the_framed_body_follows_and_the_connection_is_kept() {
    let (listener, url) = listener().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        count.fetch_add(1, Ordering::SeqCst);
        let mut bodies = Vec::new();
        for _ in 0..2 {
            let (head, rest) = read_head(&mut stream).await;
            assert!(rest.is_empty(), "no body byte before 100 Continue");
            stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .unwrap();
            let body = read_body(&mut stream, rest, content_length(&head)).await;
            // A chunked answer, as S3 may send.
            stream
                .write_all(b"HTTP/1.1 200 OK\r\netag: \"abc\"\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
                .await
                .unwrap();
            bodies.push(body);
        }
        bodies
    });
    let wire = Wire::new(&Transport::default());
    let archive = archive(200_000);

    for _ in 0..2 {
        let answer = send(&wire, &url, &archive, false).await.unwrap();
        assert_eq!((answer.status, answer.early), (200, false));
        assert_eq!(answer.headers["etag"], "\"abc\"");
        assert_eq!(answer.body, b"abc");
    }

    let bodies = server.await.unwrap();
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for both"
    );
    // The framed body, as `payload` writes it (its tests prove these are
    // the bytes the reqwest route streams too).
    let mut expected = Vec::new();
    body(&archive).write_to(&mut expected).await.unwrap();
    assert_eq!(bodies[0], expected);
    assert_eq!(bodies[1], expected);
}

#[tokio::test]
async fn a_server_that_ignores_expect_gets_the_body_after_the_wait_and_later_at_once() {
    let (listener, url) = listener().await;
    let server = tokio::spawn(async move {
        let mut waits = Vec::new();
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (head, rest) = read_head(&mut stream).await;
            let at = Instant::now();
            let body = read_body(&mut stream, rest, content_length(&head)).await;
            waits.push(at.elapsed());
            assert_eq!(body.len(), content_length(&head));
            stream
                .write_all(b"HTTP/1.1 200 OK\r\netag: \"e\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
        }
        waits
    });
    let wire = Wire::new(&Transport::default());
    let archive = archive(100_000);

    for _ in 0..2 {
        let answer = send(&wire, &url, &archive, false).await.unwrap();
        assert_eq!(answer.status, 200);
    }

    let waits = server.await.unwrap();
    assert!(
        waits[0] >= EXPECT_WAIT - Duration::from_millis(50),
        "{waits:?}"
    );
    assert!(waits[1] < EXPECT_WAIT / 2, "remembered: {waits:?}");
}

#[tokio::test]
async fn a_retry_or_an_idle_connection_the_server_closed_uses_a_new_connection() {
    let (listener, url) = listener().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (head, rest) = read_head(&mut stream).await;
                stream
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .await
                    .unwrap();
                read_body(&mut stream, rest, content_length(&head)).await;
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    .await
                    .unwrap();
                // Keep-alive promised, then closed while idle.
                drop(stream);
            });
        }
    });
    let wire = Wire::new(&Transport::default());
    let archive = archive(10_000);

    send(&wire, &url, &archive, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The pooled connection is dead: the request moves to a new one.
    send(&wire, &url, &archive, false).await.unwrap();
    // A retry never takes the pooled one.
    send(&wire, &url, &archive, true).await.unwrap();

    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn no_server_is_a_connect_error() {
    let (listener, url) = listener().await;
    drop(listener);
    let wire = Wire::new(&Transport::default());
    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();
    assert!(matches!(error, Error::Connect(_)), "{error:?}");
}

#[test]
fn a_proxy_for_the_host_is_tunnelled_or_left_to_reqwest() {
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .https("http://user:secret@proxy.example:3128")
            .http("http://proxy.example:3128")
            .no("localhost,127.0.0.1")
            .build(),
    );
    let url = |s: &str| Url::parse(s).unwrap();
    let tunnel = |auth: Option<&str>| {
        Route::Tunnel(Tunnel {
            host: "proxy.example".into(),
            port: 3128,
            auth: auth.map(str::to_owned),
        })
    };
    // https through an http proxy: a tunnel, the proxy's credentials sent
    // to the proxy alone.
    assert_eq!(
        wire.route(&url("https://bucket.s3.amazonaws.com/k")),
        tunnel(Some("Basic dXNlcjpzZWNyZXQ="))
    );
    assert!(wire.carries(&url("https://bucket.s3.amazonaws.com/k")));
    assert_eq!(
        wire.route(&url("https://127.0.0.1:9000/b/k")),
        Route::Direct
    );
    // Plain http through a proxy: the proxy would read the request itself.
    assert_eq!(
        wire.route(&url("http://bucket.s3.amazonaws.com/k")),
        Route::Reqwest
    );
    // A proxy reached over https is reqwest's.
    wire.proxies = Arc::new(
        Matcher::builder()
            .https("https://proxy.example:3129")
            .build(),
    );
    assert_eq!(
        wire.route(&url("https://bucket.s3.amazonaws.com/k")),
        Route::Reqwest
    );
}

#[test]
fn the_tls_roots_are_the_bundled_ones_plus_the_extra_cas() {
    let ca = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/certs/test-ca.pem"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ca.pem");
    std::fs::write(&file, &ca).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let env = |name: &str| (name == "SSL_CERT_FILE").then(|| file.clone());
    let extra = crate::net::extra_roots(&env).unwrap().ders;
    assert_eq!(extra.len(), 1);
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let bundled = roots.len();
    let (added, _) = roots.add_parsable_certificates(
        extra
            .into_iter()
            .map(rustls::pki_types::CertificateDer::from),
    );
    assert_eq!((added, roots.len()), (1, bundled + 1));
}

/// A TLS server for `localhost` (the test CA's certificate) that takes one
/// PUT, checks that no body byte came before its `100`, and answers 200;
/// it hands back the head, the body's length, and its listener and
/// acceptor for a second connection.
async fn tls_put_server() -> (u16, TlsServer) {
    let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/src/s3/wire/testdata");
    let cert = std::fs::read(format!("{testdata}/localhost.der")).unwrap();
    let key = std::fs::read(format!("{testdata}/localhost-key.pk8.der")).unwrap();
    let server_config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![rustls::pki_types::CertificateDer::from(cert)],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tls.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8(got[..end].to_vec()).unwrap();
        assert_eq!(got.len(), end, "no body byte before 100 Continue");
        tls.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        let mut body = got.split_off(end);
        while body.len() < content_length(&head) {
            let n = tls.read(&mut buf).await.unwrap();
            assert!(n > 0);
            body.extend_from_slice(&buf[..n]);
        }
        tls.write_all(b"HTTP/1.1 200 OK\r\netag: \"t\"\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        tls.flush().await.unwrap();
        (head, body.len(), listener, acceptor)
    });
    (port, server)
}

type TlsServer = tokio::task::JoinHandle<(String, usize, TcpListener, tokio_rustls::TlsAcceptor)>;

fn test_ca_roots() -> Vec<Vec<u8>> {
    let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/src/s3/wire/testdata/ca.pem");
    crate::net::extra_roots(&|name: &str| (name == "SSL_CERT_FILE").then(|| ca.to_owned()))
        .unwrap()
        .ders
}

#[tokio::test]
async fn over_tls_the_extra_ca_is_trusted_and_the_body_waits_for_100() {
    let (port, server) = tls_put_server().await;
    let wire = Wire::new(&Transport {
        tls: Arc::new(crate::net::tls_config(&test_ca_roots())),
        ..Transport::default()
    });
    let url = Url::parse(&format!("https://localhost:{port}/bucket/key")).unwrap();
    let archive = archive(150_000);

    let answer = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["etag"], "\"t\"");
    let (head, body_len, listener, acceptor) = server.await.unwrap();
    assert!(head.starts_with("PUT /bucket/key HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("host: localhost:{port}\r\n")),
        "{head}"
    );
    assert_eq!(body_len as u64, encoded_length(archive.len));
    // Without the extra CA the same server is refused at the handshake.
    let second = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        acceptor.accept(tcp).await.is_err()
    });
    let untrusting = Wire::new(&Transport::default());
    let error = send(&untrusting, &url, &archive, false).await.unwrap_err();
    assert!(matches!(error, Error::Connect(_)), "{error:?}");
    assert!(second.await.unwrap(), "the handshake failed");
}

/// A proxy on loopback that answers one `CONNECT` with `answer` and, on a
/// 200, relays bytes both ways to `port`; it sends the `CONNECT` head it
/// got as soon as it has it.
async fn connect_proxy(
    port: u16,
    answer: &'static str,
) -> (u16, tokio::sync::oneshot::Receiver<String>) {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_port = proxy.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut client, _) = proxy.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(String::from_utf8(got).unwrap());
        client.write_all(answer.as_bytes()).await.unwrap();
        if answer.starts_with("HTTP/1.1 200") {
            let mut upstream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    });
    (proxy_port, rx)
}

#[tokio::test]
async fn through_an_http_proxy_a_tunnel_carries_tls_and_the_body_still_waits_for_100() {
    let (port, server) = tls_put_server().await;
    let (proxy_port, connect) =
        connect_proxy(port, "HTTP/1.1 200 Connection established\r\n\r\n").await;
    let mut wire = Wire::new(&Transport {
        tls: Arc::new(crate::net::tls_config(&test_ca_roots())),
        ..Transport::default()
    });
    wire.proxies = Arc::new(
        Matcher::builder()
            .https(format!("http://ci:pass@127.0.0.1:{proxy_port}"))
            .build(),
    );
    let url = Url::parse(&format!("https://localhost:{port}/bucket/key")).unwrap();
    let archive = archive(150_000);

    let answer = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(answer.status, 200);
    let connect = connect.await.unwrap();
    assert_eq!(
        connect,
        format!(
            "CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\nProxy-Authorization: Basic Y2k6cGFzcw==\r\n\r\n"
        )
    );
    // The server (past the proxy) saw the request itself, its body only
    // after the 100, all of it.
    let (head, body_len, ..) = server.await.unwrap();
    assert!(head.starts_with("PUT /bucket/key HTTP/1.1\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("proxy-authorization"),
        "{head}"
    );
    assert_eq!(body_len as u64, encoded_length(archive.len));
}

#[tokio::test]
async fn a_proxy_that_refuses_the_tunnel_is_a_connect_error_with_its_status() {
    let (proxy_port, _connect) = connect_proxy(
        1,
        "HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n",
    )
    .await;
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .https(format!("http://127.0.0.1:{proxy_port}"))
            .build(),
    );
    let url = Url::parse("https://bucket.s3.amazonaws.com/key").unwrap();

    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();

    let Error::Connect(e) = &error else {
        panic!("{error:?}");
    };
    assert!(
        e.to_string().contains("407 Proxy Authentication Required"),
        "{e}"
    );
}
