//! The data layer against bare TCP servers that behave as S3 can and as a
//! server that ignores `Expect` does: what goes on the wire, byte for byte.

use std::fs::File;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::s3::payload::{Content, Payload, encoded_length};

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
        delivery: None,
    };
    match payload.prepare(&archive.file, &Arc::default()).body {
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
    // The framed body, as `payload` writes it (its tests decode it back to
    // the range and its CRC32 trailer).
    let mut expected = Vec::new();
    body(&archive).write_to(&mut expected).await.unwrap();
    assert_eq!(bodies[0], expected);
    assert_eq!(bodies[1], expected);
}

#[tokio::test]
async fn a_server_that_ignores_expect_gets_the_body_after_the_wait_and_later_at_once() {
    let (listener, url) = listener().await;
    let server = tokio::spawn(async move {
        let mut first_wait = None;
        for _ in 0..2 {
            // Never a `100`: the body comes when the client stops waiting.
            let (mut stream, _) = listener.accept().await.unwrap();
            let (head, rest) = read_head(&mut stream).await;
            let at = Instant::now();
            let body = read_body(&mut stream, rest, content_length(&head)).await;
            first_wait.get_or_insert(at.elapsed());
            assert_eq!(body.len(), content_length(&head));
            stream
                .write_all(b"HTTP/1.1 200 OK\r\netag: \"e\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
        }
        first_wait.unwrap()
    });
    let mut wire = Wire::new(&Transport::default());
    let archive = archive(100_000);

    let answer = send(&wire, &url, &archive, false).await.unwrap();
    assert_eq!(answer.status, 200);
    assert!(wire.waited_in_vain(&url), "remembered");
    // Had the second request waited for its `100` again, it would now wait
    // ten minutes for one that never comes before its body went: the body
    // going out first is what lets it end at all.
    wire.expect_wait = Duration::from_secs(600);
    let second = tokio::time::timeout(Duration::from_secs(60), send(&wire, &url, &archive, false))
        .await
        .expect("the body went at once, with no wait for a `100`");
    assert_eq!(second.unwrap().status, 200);

    let first_wait = server.await.unwrap();
    assert!(
        first_wait >= EXPECT_WAIT - Duration::from_millis(50),
        "{first_wait:?}"
    );
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

/// A server that answers each connection's first request (kept alive)
/// and, for the second on the same connection, reads it whole and closes
/// without a byte of answer: as a pooled connection the server closed
/// while idle looks, and as one that applied the request and died. Counts
/// connections and the requests it read.
async fn closes_after_reading_the_second(
    listener: TcpListener,
    continues: bool,
) -> (Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (count, log) = (Arc::clone(&accepted), Arc::clone(&requests));
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                for n in 0..2 {
                    let (head, rest) = read_head(&mut stream).await;
                    if continues && head.contains("expect: 100-continue") {
                        stream
                            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                            .await
                            .unwrap();
                    }
                    read_body(&mut stream, rest, content_length(&head)).await;
                    log.lock()
                        .unwrap()
                        .push(head.lines().next().unwrap().to_owned());
                    if n == 1 {
                        return;
                    }
                    stream
                        .write_all(b"HTTP/1.1 200 OK\r\netag: \"e\"\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .unwrap();
                }
            });
        }
    });
    (accepted, requests)
}

async fn send_bytes(wire: &Wire, method: &str, url: &Url, body: &[u8]) -> Result<Answer, Error> {
    let request = Request {
        method,
        url,
        headers: &[],
        content_length: body.len() as u64,
    };
    wire.send(&request, Outgoing::Bytes(body), false).await
}

#[tokio::test]
async fn a_post_sent_whole_on_a_pooled_connection_that_dies_is_never_sent_again_as_stale() {
    let (listener, url) = listener().await;
    let (accepted, requests) = closes_after_reading_the_second(listener, true).await;
    let wire = Wire::new(&Transport::default());
    let xml = b"<CompleteMultipartUpload/>";

    send_bytes(&wire, "POST", &url, xml).await.unwrap();
    // The pooled connection takes the second POST, which the server reads
    // whole: it may have been applied, so the failure is the caller's to
    // judge (a completion is looked at again, not silently re-sent).
    let error = send_bytes(&wire, "POST", &url, xml).await.unwrap_err();

    assert!(matches!(error, Error::Exchange(_)), "{error:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "no new connection");
    assert_eq!(
        requests.lock().unwrap().len(),
        2,
        "the second POST went once"
    );
}

#[tokio::test]
async fn an_idempotent_request_on_a_pooled_connection_that_dies_unanswered_goes_on_a_new_one() {
    let (listener, url) = listener().await;
    let (accepted, requests) = closes_after_reading_the_second(listener, true).await;
    let wire = Wire::new(&Transport::default());

    send_bytes(&wire, "DELETE", &url, b"").await.unwrap();
    let answer = send_bytes(&wire, "DELETE", &url, b"").await.unwrap();

    assert_eq!(answer.status, 200);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(requests.lock().unwrap().len(), 3, "sent again, once");
}

#[tokio::test]
async fn a_part_whose_pooled_connection_dies_under_its_body_goes_on_a_new_one() {
    let (listener, url) = listener().await;
    // Never a `100`: after the first part the body goes at once, so the
    // dead connection fails under the body (or at its answer).
    let (accepted, requests) = closes_after_reading_the_second(listener, false).await;
    let mut wire = Wire::new(&Transport::default());
    wire.expect_wait = Duration::from_millis(100);
    let archive = archive(100_000);

    send(&wire, &url, &archive, false).await.unwrap();
    let answer = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(answer.status, 200);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(requests.lock().unwrap().len(), 3);
}

#[test]
fn stale_means_closed_quietly_before_the_request_could_have_been_applied() {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset, TimedOut, UnexpectedEof};

    use super::exchange::{Sent, stale};
    // (received nothing on a pooled connection, error, how far, method)
    let table = [
        (true, ConnectionReset, Sent::Partly, "POST", true),
        (true, BrokenPipe, Sent::Partly, "PUT", true),
        (true, UnexpectedEof, Sent::Whole, "PUT", true),
        (true, UnexpectedEof, Sent::Whole, "DELETE", true),
        (true, UnexpectedEof, Sent::Whole, "GET", true),
        (true, UnexpectedEof, Sent::Whole, "HEAD", true),
        // A POST sent whole may have been applied (Create, Complete).
        (true, UnexpectedEof, Sent::Whole, "POST", false),
        (true, ConnectionReset, Sent::Whole, "POST", false),
        // No answer in time is a slow server, not a closed connection.
        (true, TimedOut, Sent::Whole, "PUT", false),
        (true, TimedOut, Sent::Partly, "PUT", false),
        // A new connection, or one that had answered something.
        (false, ConnectionReset, Sent::Partly, "PUT", false),
        (false, UnexpectedEof, Sent::Whole, "DELETE", false),
    ];
    for (quiet_reuse, kind, sent, method, want) in table {
        assert_eq!(
            stale(quiet_reuse, kind, sent, method),
            want,
            "{quiet_reuse} {kind:?} {sent:?} {method}"
        );
    }
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
fn a_proxy_for_the_host_is_tunnelled_for_https_and_forwarded_to_for_http() {
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .https("http://user:secret@proxy.example:3128")
            .http("http://proxy.example:3128")
            .no("localhost,127.0.0.1")
            .build(),
    );
    let url = |s: &str| Url::parse(s).unwrap();
    let proxy = |https: bool, port: u16, auth: Option<&str>| route::Proxy {
        https,
        host: "proxy.example".into(),
        port,
        auth: auth.map(str::to_owned),
    };
    // https through an http proxy: a tunnel, the proxy's credentials sent
    // to the proxy alone.
    assert_eq!(
        wire.route(&url("https://bucket.s3.amazonaws.com/k"))
            .unwrap(),
        Route::Tunnel(proxy(false, 3128, Some("Basic dXNlcjpzZWNyZXQ=")))
    );
    assert!(wire.proxied(&url("https://bucket.s3.amazonaws.com/k")));
    assert_eq!(
        wire.route(&url("https://127.0.0.1:9000/b/k")).unwrap(),
        Route::Direct
    );
    assert!(!wire.proxied(&url("https://127.0.0.1:9000/b/k")));
    // Plain http through a proxy: the proxy reads and forwards it.
    let forward = wire
        .route(&url("http://bucket.s3.amazonaws.com/k?uploads"))
        .unwrap();
    assert_eq!(forward, Route::Forward(proxy(false, 3128, None)));
    assert_eq!(
        route::target(
            &url("http://bucket.s3.amazonaws.com:8080/k?uploads"),
            &forward
        ),
        "http://bucket.s3.amazonaws.com:8080/k?uploads"
    );
    assert_eq!(
        route::target(
            &url("http://bucket.s3.amazonaws.com/k?uploads"),
            &Route::Direct
        ),
        "/k?uploads"
    );
    // A proxy reached over https: TLS to it, then the tunnel; its port
    // defaults to 443.
    wire.proxies = Arc::new(Matcher::builder().https("https://proxy.example").build());
    assert_eq!(
        wire.route(&url("https://bucket.s3.amazonaws.com/k"))
            .unwrap(),
        Route::Tunnel(proxy(true, 443, None))
    );
    // A SOCKS proxy is never a way around the proxy: a connect error.
    wire.proxies = Arc::new(
        Matcher::builder()
            .all("socks5://proxy.example:1080")
            .build(),
    );
    let refused = wire
        .route(&url("https://bucket.s3.amazonaws.com/k"))
        .unwrap_err();
    assert!(refused.to_string().contains("socks5 proxy"), "{refused}");
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
    let acceptor = test_acceptor();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let (head, body_len) = serve_tls_put(&mut tls, "t").await;
        (head, body_len, listener, acceptor)
    });
    (port, server)
}

/// Serves one PUT on `tls`, checking that no body byte came before its
/// `100`; answers 200 with `etag`. Returns the head and the body's length.
async fn serve_tls_put(
    tls: &mut tokio_rustls::server::TlsStream<TcpStream>,
    etag: &str,
) -> (String, usize) {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed");
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
    let answer = format!("HTTP/1.1 200 OK\r\netag: \"{etag}\"\r\ncontent-length: 0\r\n\r\n");
    tls.write_all(answer.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    (head, body.len())
}

/// A TLS acceptor for `localhost` with the test CA's certificate.
fn test_acceptor() -> tokio_rustls::TlsAcceptor {
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
    tokio_rustls::TlsAcceptor::from(Arc::new(server_config))
}

/// Over TLS 1.3 the server sends session tickets after the handshake:
/// they are not news on an idle connection, which is reused; the server's
/// `close_notify` while idle is, and the next request takes a new one.
#[tokio::test]
async fn over_tls_a_quiet_pooled_connection_is_reused_and_a_closed_one_is_not() {
    let acceptor = test_acceptor();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let n = count.fetch_add(1, Ordering::SeqCst);
            let mut tls = acceptor.accept(tcp).await.unwrap();
            for i in 0..2 {
                serve_tls_put(&mut tls, &format!("c{n}r{i}")).await;
            }
            // Closed while idle, as S3 does after about 20 s.
            tls.shutdown().await.unwrap();
        }
    });
    let wire = Wire::new(&Transport {
        tls: Arc::new(crate::net::tls_config(&test_ca_roots())),
        ..Transport::default()
    });
    let url = Url::parse(&format!("https://localhost:{port}/bucket/key")).unwrap();
    let archive = archive(20_000);
    let mut etags = Vec::new();
    for _ in 0..3 {
        let answer = send(&wire, &url, &archive, false).await.unwrap();
        etags.push(answer.headers["etag"].to_str().unwrap().to_owned());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(etags, ["\"c0r0\"", "\"c0r1\"", "\"c1r0\""]);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
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

// What a hostile S3, a broken proxy or a CI runner's middlebox sends.

/// A server that takes one connection and runs `script` on it.
async fn one_connection<F, Fut>(script: F) -> (Url, tokio::task::JoinHandle<()>)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (listener, url) = listener().await;
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        script(stream).await;
    });
    (url, server)
}

/// Writes `bytes` in pieces of `step`, a few milliseconds apart, as a slow
/// or segmenting network delivers them.
async fn dribble(stream: &mut TcpStream, bytes: &[u8], step: usize) {
    for piece in bytes.chunks(step) {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn interim_answers_split_across_packets_then_two_100s_and_a_chunked_final_answer() {
    let (url, server) = one_connection(|mut stream| async move {
        for round in 0..2 {
            let (head, rest) = read_head(&mut stream).await;
            assert!(rest.is_empty(), "no body byte before the 100");
            dribble(&mut stream, b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n", 3).await;
            dribble(&mut stream, b"HTTP/1.1 100 Continue\r\n\r\n", 5).await;
            read_body(&mut stream, rest, content_length(&head)).await;
            // A second 100, then the answer in chunks with an extension
            // and a trailer, split at awkward places.
            let answer = format!(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\netag: \"r{round}\"\r\n\r\n4;ext=1\r\n<ok>\r\n3\r\n{round}/.\r\n0\r\nx-amz-trailer: y\r\n\r\n"
            );
            dribble(&mut stream, answer.as_bytes(), 7).await;
        }
    })
    .await;
    let wire = Wire::new(&Transport::default());
    let archive = archive(70_000);

    for round in 0..2 {
        let answer = send(&wire, &url, &archive, false).await.unwrap();
        assert_eq!((answer.status, answer.early), (200, false));
        assert_eq!(answer.headers["etag"], format!("\"r{round}\""));
        assert_eq!(
            String::from_utf8(answer.body).unwrap(),
            format!("<ok>{round}/.")
        );
    }
    // Both on one connection: a chunked answer read to its end keeps it.
    server.await.unwrap();
    assert!(!wire.waited_in_vain(&url));
}

#[tokio::test]
async fn a_101_is_no_interim_answer_and_no_body_follows_it() {
    let (url, server) = one_connection(|mut stream| async move {
        let (_, rest) = read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n")
            .await
            .unwrap();
        let mut after = rest;
        stream.read_to_end(&mut after).await.unwrap();
        assert!(after.is_empty(), "{} body bytes after a 101", after.len());
    })
    .await;
    let wire = Wire::new(&Transport::default());

    let error = send(&wire, &url, &archive(10_000), false)
        .await
        .unwrap_err();

    assert!(matches!(error, Error::Exchange(_)), "{error:?}");
    assert!(error.to_string().contains("switched protocols"), "{error}");
    server.await.unwrap();
}

#[tokio::test]
async fn a_server_that_closes_after_its_100_is_a_failed_exchange() {
    let (url, server) = one_connection(|mut stream| async move {
        read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        let _ = stream.set_zero_linger();
    })
    .await;
    let wire = Wire::new(&Transport::default());

    let error = send(&wire, &url, &archive(3 << 20), false)
        .await
        .unwrap_err();

    // Ambiguous to the retry policy: the body may have reached it.
    assert!(matches!(error, Error::Exchange(_)), "{error:?}");
    server.await.unwrap();
    assert!(wire.check_out(&Origin::of(&url).unwrap()).is_none());
}

#[tokio::test]
async fn a_100_then_a_refusal_before_the_body_is_read_is_the_refusal() {
    let (url, server) = one_connection(|mut stream| async move {
        read_head(&mut stream).await;
        let answer = format!(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{XML_403}",
            XML_403.len()
        );
        stream.write_all(answer.as_bytes()).await.unwrap();
        // Stops reading: the client's body hits a closed connection.
        drop(stream);
    })
    .await;
    let wire = Wire::new(&Transport::default());

    let answer = send(&wire, &url, &archive(3 << 20), false).await.unwrap();

    assert_eq!(answer.status, 403);
    assert_eq!(String::from_utf8(answer.body).unwrap(), XML_403);
    server.await.unwrap();
    assert!(wire.check_out(&Origin::of(&url).unwrap()).is_none());
}

#[tokio::test]
async fn a_server_that_drops_the_connection_mid_body_is_a_failed_exchange() {
    let (url, server) = one_connection(|mut stream| async move {
        let (_, rest) = read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        read_body(&mut stream, rest, 100_000).await;
        let _ = stream.set_zero_linger();
    })
    .await;
    let wire = Wire::new(&Transport::default());

    let error = send(&wire, &url, &archive(8 << 20), false)
        .await
        .unwrap_err();

    assert!(matches!(error, Error::Exchange(_)), "{error:?}");
    server.await.unwrap();
}

/// The server answers the first request, keeps the connection alive, then
/// writes a second answer nobody asked for; the next request must not read
/// it as its own.
#[tokio::test]
async fn an_answer_that_arrives_on_an_idle_pooled_connection_is_never_the_next_ones() {
    let (listener, url) = listener().await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let n = count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (head, rest) = read_head(&mut stream).await;
                stream
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .await
                    .unwrap();
                read_body(&mut stream, rest, content_length(&head)).await;
                let answer =
                    format!("HTTP/1.1 200 OK\r\netag: \"conn{n}\"\r\ncontent-length: 0\r\n\r\n");
                stream.write_all(answer.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\netag: \"stale\"\r\ncontent-length: 0\r\n\r\n")
                    .await
                    .unwrap();
                let _ = stream.read_to_end(&mut Vec::new()).await;
            });
        }
    });
    let wire = Wire::new(&Transport::default());
    let archive = archive(10_000);

    let first = send(&wire, &url, &archive, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(first.headers["etag"], "\"conn0\"");
    assert_eq!(
        second.headers["etag"], "\"conn1\"",
        "its own answer, on a new connection"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_417_is_repeated_once_without_expect_and_the_origin_remembered() {
    let (listener, url) = listener().await;
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                loop {
                    let (head, rest) = read_head(&mut stream).await;
                    seen.lock().unwrap().push(head.clone());
                    if head.contains("expect: 100-continue") {
                        stream
                            .write_all(
                                b"HTTP/1.1 417 Expectation Failed\r\ncontent-length: 0\r\n\r\n",
                            )
                            .await
                            .unwrap();
                        continue;
                    }
                    read_body(&mut stream, rest, content_length(&head)).await;
                    stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .unwrap();
                }
            });
        }
    });
    let wire = Wire::new(&Transport::default());
    let archive = archive(50_000);

    assert_eq!(
        send(&wire, &url, &archive, false).await.unwrap().status,
        200
    );
    assert_eq!(send(&wire, &url, &archive, true).await.unwrap().status, 200);

    let heads = heads.lock().unwrap().clone();
    let expects: Vec<bool> = heads.iter().map(|h| h.contains("expect:")).collect();
    assert_eq!(expects, [true, false, false], "{heads:#?}");
}

#[tokio::test]
async fn a_proxy_that_answers_connect_with_200_then_garbage_is_a_connect_error() {
    for answer in [
        // In one packet with the 200.
        "HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 502 Bad Gateway\r\n\r\n",
        // Or a body on the 2xx, which a CONNECT answer never has.
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
    ] {
        let (proxy_port, _connect) = connect_proxy(1, answer).await;
        let mut wire = Wire::new(&Transport::default());
        wire.proxies = Arc::new(
            Matcher::builder()
                .https(format!("http://127.0.0.1:{proxy_port}"))
                .build(),
        );
        let url = Url::parse("https://bucket.s3.amazonaws.com/key").unwrap();

        let error = send(&wire, &url, &archive(10), false).await.unwrap_err();

        assert!(matches!(error, Error::Connect(_)), "{answer:?}: {error:?}");
    }
}

#[tokio::test]
async fn an_answer_with_two_different_lengths_is_refused_not_guessed() {
    let (url, server) = one_connection(|mut stream| async move {
        let (head, rest) = read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        read_body(&mut stream, rest, content_length(&head)).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\ncontent-length: 44\r\n\r\n")
            .await
            .unwrap();
        let _ = stream.read_to_end(&mut Vec::new()).await;
    })
    .await;
    let wire = Wire::new(&Transport::default());

    let error = send(&wire, &url, &archive(1000), false).await.unwrap_err();

    assert!(
        error.to_string().contains("two different Content-Lengths"),
        "{error}"
    );
    drop(wire);
    server.await.unwrap();
}

/// The garbage comes a moment after the proxy's 200, where the server's
/// TLS handshake should be: the handshake fails, nothing was sent.
#[tokio::test]
async fn a_proxy_that_sends_garbage_after_its_connect_200_fails_the_handshake() {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_port = proxy.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut client, _) = proxy.accept().await.unwrap();
        read_head(&mut client).await;
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        let _ = client.read_to_end(&mut Vec::new()).await;
    });
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .https(format!("http://127.0.0.1:{proxy_port}"))
            .build(),
    );
    let url = Url::parse("https://bucket.s3.amazonaws.com/key").unwrap();

    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();

    assert!(matches!(error, Error::Connect(_)), "{error:?}");
}

/// A proxy reached over TLS (`https://`, the test CA's `localhost`) that
/// answers one `CONNECT` with `answer` inside its TLS and, on a 200,
/// relays the tunnel's bytes to `port`: TLS to S3 inside TLS to the proxy.
async fn tls_connect_proxy(
    port: u16,
    answer: &'static str,
) -> (u16, tokio::sync::oneshot::Receiver<String>) {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_port = proxy.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (tcp, _) = proxy.accept().await.unwrap();
        let mut client = test_acceptor().accept(tcp).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(String::from_utf8(got).unwrap());
        client.write_all(answer.as_bytes()).await.unwrap();
        client.flush().await.unwrap();
        if answer.starts_with("HTTP/1.1 200") {
            let mut upstream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    });
    (proxy_port, rx)
}

fn trusting_wire(proxy: String) -> Wire {
    let mut wire = Wire::new(&Transport {
        tls: Arc::new(crate::net::tls_config(&test_ca_roots())),
        ..Transport::default()
    });
    wire.proxies = Arc::new(Matcher::builder().all(proxy).build());
    wire
}

#[tokio::test]
async fn through_an_https_proxy_tls_runs_inside_tls_and_the_body_still_waits_for_100() {
    let (port, server) = tls_put_server().await;
    let (proxy_port, connect) =
        tls_connect_proxy(port, "HTTP/1.1 200 Connection established\r\n\r\n").await;
    let wire = trusting_wire(format!("https://ci:pass@localhost:{proxy_port}"));
    let url = Url::parse(&format!("https://localhost:{port}/bucket/key")).unwrap();
    let archive = archive(150_000);

    let answer = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(answer.status, 200);
    assert_eq!(
        connect.await.unwrap(),
        format!(
            "CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\nProxy-Authorization: Basic Y2k6cGFzcw==\r\n\r\n"
        )
    );
    // S3 (past the proxy) got the request over its own TLS, the body only
    // after its 100 (`serve_tls_put` checks), and no proxy credentials.
    let (head, body_len, ..) = server.await.unwrap();
    assert!(head.starts_with("PUT /bucket/key HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("expect: 100-continue\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("proxy-authorization"),
        "{head}"
    );
    assert_eq!(body_len as u64, encoded_length(archive.len));
}

#[tokio::test]
async fn an_https_proxy_that_refuses_the_tunnel_inside_its_tls_is_named() {
    let (proxy_port, _connect) = tls_connect_proxy(
        1,
        "HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n",
    )
    .await;
    let wire = trusting_wire(format!("https://localhost:{proxy_port}"));
    let url = Url::parse("https://bucket.s3.amazonaws.com/key").unwrap();

    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();

    let Error::Connect(e) = &error else {
        panic!("{error:?}");
    };
    assert!(
        e.get_ref().is_some_and(|i| i.is::<TunnelRefused>()),
        "{e:?}"
    );
    assert!(e.to_string().contains("407"), "{e}");
}

/// Hostile `https://` proxies: one that answers the TLS hello in plain
/// HTTP, one that is not the host its certificate names (an untrusted
/// one), one that answers `CONNECT` with 200 and closes, one that
/// redirects the `CONNECT`: each a connect error, nothing sent to S3.
#[tokio::test]
async fn hostile_https_proxies_are_connect_errors() {
    // Plain HTTP where the TLS handshake should be.
    let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_port = plain.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut c, _) = plain.accept().await.unwrap();
        let _ = c.read(&mut [0u8; 1024]).await;
        let _ = c
            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            .await;
    });
    let url = Url::parse("https://bucket.s3.amazonaws.com/key").unwrap();
    let wire = trusting_wire(format!("https://localhost:{plain_port}"));
    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();
    assert!(
        matches!(&error, Error::Connect(e) if e.to_string().contains("TLS to the proxy")),
        "{error:?}"
    );

    // A proxy whose certificate the run does not trust.
    let (untrusted_port, _) = tls_connect_proxy(1, "HTTP/1.1 200 OK\r\n\r\n").await;
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .all(format!("https://localhost:{untrusted_port}"))
            .build(),
    );
    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();
    assert!(matches!(error, Error::Connect(_)), "{error:?}");

    // 200 to CONNECT, then the proxy goes away: S3's handshake fails.
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone_port = gone.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (tcp, _) = gone.accept().await.unwrap();
        let mut c = test_acceptor().accept(tcp).await.unwrap();
        let _ = c.read(&mut [0u8; 4096]).await;
        let _ = c
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await;
        let _ = c.shutdown().await;
    });
    let wire = trusting_wire(format!("https://localhost:{gone_port}"));
    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();
    assert!(matches!(error, Error::Connect(_)), "{error:?}");

    // A redirect is no tunnel, and is not followed.
    let (redirecting, _) = tls_connect_proxy(
        1,
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: https://elsewhere.example/\r\ncontent-length: 0\r\n\r\n",
    )
    .await;
    let wire = trusting_wire(format!("https://localhost:{redirecting}"));
    let error = send(&wire, &url, &archive(10), false).await.unwrap_err();
    assert!(
        matches!(&error, Error::Connect(e) if e.to_string().contains("307")),
        "{error:?}"
    );
}

/// A plain-`http` S3 behind an HTTP proxy: the proxy gets the request in
/// absolute form with its credentials, `Expect` still sent and honoured.
#[tokio::test]
async fn to_a_plain_http_s3_the_proxy_gets_an_absolute_form_request_with_expect() {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_port = proxy.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut stream, _) = proxy.accept().await.unwrap();
        let (head, rest) = read_head(&mut stream).await;
        assert!(rest.is_empty(), "no body byte before the 100");
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        let body = read_body(&mut stream, rest, content_length(&head)).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\netag: \"f\"\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        (head, body.len())
    });
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .http(format!("http://ci:pass@127.0.0.1:{proxy_port}"))
            .build(),
    );
    let url = Url::parse("http://s3.example:9000/bucket/key?partNumber=1").unwrap();
    let archive = archive(20_000);

    let answer = send(&wire, &url, &archive, false).await.unwrap();

    assert_eq!(answer.status, 200);
    let (head, body_len) = server.await.unwrap();
    assert!(
        head.starts_with("PUT http://s3.example:9000/bucket/key?partNumber=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("host: s3.example:9000\r\n"), "{head}");
    assert!(
        head.contains("proxy-authorization: Basic Y2k6cGFzcw==\r\n"),
        "{head}"
    );
    assert!(head.contains("expect: 100-continue\r\n"), "{head}");
    assert_eq!(body_len as u64, encoded_length(archive.len));
}

/// A forwarding proxy that asks for credentials (407) asks again for the
/// same ones: a refusal naming its status, not an answer from S3.
#[tokio::test]
async fn a_forwarding_proxy_that_asks_for_credentials_is_a_refusal() {
    let (url, server) = one_connection(|mut stream| async move {
        read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
    })
    .await;
    let mut wire = Wire::new(&Transport::default());
    wire.proxies = Arc::new(
        Matcher::builder()
            .http(format!("http://ci:wrong@127.0.0.1:{}", url.port().unwrap()))
            .build(),
    );
    let target = Url::parse("http://s3.example/bucket/key").unwrap();

    let error = send(&wire, &target, &archive(10), false).await.unwrap_err();

    let Error::Connect(e) = &error else {
        panic!("{error:?}");
    };
    assert!(
        e.get_ref().is_some_and(|i| i.is::<TunnelRefused>()),
        "{e:?}"
    );
    assert!(e.to_string().contains("407"), "{e}");
    server.await.unwrap();
}
