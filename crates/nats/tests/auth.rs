//! Nodes on a secured `nats-server`: user and password (also in the URL),
//! token, NKey, TLS with a CA the test makes, mutual TLS, required TLS.
//! Each way in works, and each wrong credential is a clear error from
//! `Node::start`, not a hang.

mod common;

use std::path::PathBuf;

use common::{GUARD, Msg, Proc, collector, node};
use stepsched::Scheduler;
use stepsched_nats::{NatsServer, Node, NodeConfig, StartError};

/// A fresh directory for one test's files.
fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("auth-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(args: &[&str]) -> NatsServer {
    NatsServer::start_with_args(args.iter().copied()).unwrap_or_else(|e| panic!("{e}"))
}

/// Node `n` on `url` with the tests' cluster key and `creds` applied.
fn config(n: u32, url: &str, creds: &dyn Fn(NodeConfig) -> NodeConfig) -> NodeConfig {
    creds(NodeConfig::new(n, url).prefix("t").cluster_key(common::KEY))
}

/// Two nodes connect with `creds`, find each other, and a confirmed
/// message goes from one to the other.
fn two_nodes_talk(url: &str, creds: &dyn Fn(NodeConfig) -> NodeConfig) {
    let a = node(config(1, url, creds));
    let b = node(config(2, url, creds));
    assert!(a.wait_for(2, GUARD) && b.wait_for(1, GUARD));
    let (to, seen) = collector(&b);
    assert_eq!(a.send_confirmed(None, to, Msg::Data(1), GUARD), Ok(()));
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(1)));
}

/// `Node::start`'s error with `creds`, and its text.
fn refused(url: &str, creds: &dyn Fn(NodeConfig) -> NodeConfig) -> String {
    let err = Node::start(
        Scheduler::<Proc>::builder().workers(1),
        config(1, url, creds),
    )
    .expect_err("the server must refuse this node");
    assert!(matches!(err, StartError::Connect(_)), "{err}");
    println!("refused: {err}");
    err.to_string().to_lowercase()
}

#[test]
fn user_and_password() {
    let server = start(&["--user", "alice", "--pass", "s3cret"]);
    two_nodes_talk(&server.url(), &|c| c.user_password("alice", "s3cret"));
    let url = format!("nats://alice:s3cret@127.0.0.1:{}", server.port());
    two_nodes_talk(&url, &|c| c);
    let e = refused(&server.url(), &|c| c.user_password("alice", "wrong"));
    assert!(e.contains("authorization"), "{e}");
    let e = refused(&server.url(), &|c| c);
    assert!(e.contains("authorization"), "no credentials: {e}");
}

#[test]
fn token() {
    let server = start(&["--auth", "t0ken-for-the-test"]);
    two_nodes_talk(&server.url(), &|c| c.token("t0ken-for-the-test"));
    let url = format!("nats://t0ken-for-the-test@127.0.0.1:{}", server.port());
    two_nodes_talk(&url, &|c| c);
    let e = refused(&server.url(), &|c| c.token("wrong"));
    assert!(e.contains("authorization"), "{e}");
}

#[test]
fn nkey() {
    let user = nkeys::KeyPair::new_user();
    let intruder = nkeys::KeyPair::new_user();
    let d = dir("nkey");
    let conf = d.join("server.conf");
    std::fs::write(
        &conf,
        format!(
            "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n",
            user.public_key()
        ),
    )
    .unwrap();
    let server = start(&["-c", conf.to_str().unwrap()]);
    let seed = user.seed().unwrap();
    two_nodes_talk(&server.url(), &|c| c.nkey(seed.clone()));
    let wrong = intruder.seed().unwrap();
    let e = refused(&server.url(), &|c| c.nkey(wrong.clone()));
    assert!(e.contains("authorization"), "{e}");
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate,
/// as PEM files in `d`: (ca, server cert, server key, client cert, client
/// key).
fn certificates(d: &std::path::Path) -> [PathBuf; 5] {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
    let (client_cert, client_key) = leaf(vec!["node".into()]);
    let files = [
        ("ca.pem", ca.pem()),
        ("server.pem", server_cert),
        ("server-key.pem", server_key),
        ("client.pem", client_cert),
        ("client-key.pem", client_key),
    ];
    files.map(|(name, pem)| {
        let path = d.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    })
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn tls_with_a_ca_the_test_made() {
    let d = dir("tls");
    let [ca, cert, key, _, _] = certificates(&d);
    let server = start(&["--tlscert", s(&cert), "--tlskey", s(&key)]);
    two_nodes_talk(&server.url(), &|c| {
        c.tls_root_certificates(&ca).require_tls(true)
    });
    // Without the CA the server's certificate is not trusted.
    let e = refused(&server.url(), &|c| c);
    assert!(e.contains("tls failed") && e.contains("certificate"), "{e}");
}

#[test]
fn mutual_tls_needs_the_client_certificate() {
    let d = dir("mtls");
    let [ca, cert, key, client, client_key] = certificates(&d);
    let server = start(&[
        "--tlsverify",
        "--tlscert",
        s(&cert),
        "--tlskey",
        s(&key),
        "--tlscacert",
        s(&ca),
    ]);
    two_nodes_talk(&server.url(), &|c| {
        c.tls_root_certificates(&ca)
            .tls_client_certificate(&client, &client_key)
    });
    let e = refused(&server.url(), &|c| c.tls_root_certificates(&ca));
    assert!(e.contains("client certificate"), "{e}");
}

#[test]
fn required_tls_refuses_a_plain_server() {
    let server = common::server();
    let e = refused(&server.url(), &|c| c.require_tls(true));
    assert!(e.contains("tls"), "{e}");
}

#[test]
fn an_unreadable_credentials_file_is_a_config_error() {
    let server = common::server();
    let err = Node::start(
        Scheduler::<Proc>::builder().workers(1),
        config(1, &server.url(), &|c| {
            c.credentials_file("/nonexistent/stepsched.creds")
        }),
    )
    .unwrap_err();
    assert!(
        matches!(&err, StartError::Config(e) if e.contains("stepsched.creds")),
        "{err}"
    );
}
